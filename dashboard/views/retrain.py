"""Retrain: add a generation run's adversarial inputs to the training data, retrain, compare."""
import streamlit as st

from dashboard import jobs, state
from rnncon_core.reports import charts, results
from rnncon_core.reports import html as report
from rnncon_core import retrain
from rnncon_core.jobs.retraining import run_retraining
from rnncon_core.errors import RNNConError
from rnncon_core.runs import display_name

st.title("Retrain")
st.caption("From the trained weights, the adversarial inputs of a generation run (labelled "
           "with their seeds' labels) join the training data and the model trains a few more "
           "epochs, several times over; a control arm trains on as many clean inputs "
           "(Table 6, Figures 13 and 14).")

# a text model's defaults: evaluation and training samples that keep the form's smallest
# setting (1 epoch, 1 repeat) within about two minutes on two cores (docs/results.md)
EVALUATION_INPUTS, FIT_INPUTS = 2000, 4000
ALL_EVAL, ALL_FIT = 20000, 100000      # the boxes' largest values: every input

sel = state.require_model()
store = jobs.store()

sources = results.retrain_sources(store, sel.model)
st.markdown(f"**Model:** {sel.label} · **data:** {state.data_label(sel.dataset)}")
if not sources:
    st.info("No generation run with adversarial inputs for this model yet: start one on "
            "the Generate page, then come back.")
source = jobs.run_picker("Generation run whose adversarial inputs are added", sources,
                         key="retrain_from")
with st.form("retrain_form"):
    c = st.columns(4)
    epochs = c[0].number_input("Epochs per retraining", 1, 50, 2, key="retrain_epochs",
                               help="The paper trains 10 more epochs.")
    repeats = c[1].number_input("Repeats", 1, 20, 2, key="retrain_repeats",
                                help="The paper repeats 10 times (Figure 14).")
    coverage_inputs = c[2].number_input("Inputs for RConC", 50, 2000, 200, step=50,
                                        key="retrain_cov_inputs")
    control = c[3].checkbox("Control arm (clean inputs)", True, key="retrain_control")
    c = st.columns(4)
    mix = c[0].number_input("Share of generated inputs per batch", 0.0, 0.9,
                            retrain.DEFAULT_MIX, step=0.05, key="retrain_mix",
                            help="0: each generated input once per epoch (the paper's "
                                 "recipe); the default mixes them into every batch.")
    transfer_seeds = c[1].number_input("Held-out seeds per method", 0, 1000, 100, step=50,
                                       key="retrain_transfer_seeds",
                                       help="Evaluation seeds for the held-out transfer sets "
                                            "(rconc, nc, rnntest, pgd for images); 0: skip.")
    text = state.kind_of(sel.dataset) == "text"
    # the smallest value is the least work (an earlier "0: all" made the form's smallest
    # setting the slowest); the largest value stands for all
    eval_inputs = c[2].number_input(f"Evaluation inputs ({ALL_EVAL:,}: all)", 100, ALL_EVAL,
                                    EVALUATION_INPUTS if text else ALL_EVAL, step=500,
                                    key="retrain_eval_inputs",
                                    help="Evaluate and validate on a sample of this many test "
                                         "inputs per part (a text model's 12,000-review parts "
                                         "take minutes per evaluation); the results say the "
                                         "sizes used.")
    fit_inputs = c[3].number_input(f"Clean training inputs per epoch ({ALL_FIT:,}: all)",
                                   500, ALL_FIT, FIT_INPUTS if text else ALL_FIT, step=1000,
                                   key="retrain_fit_inputs",
                                   help="Each epoch trains on a fresh random sample of this "
                                        "many clean training inputs (an IMDB model's whole "
                                        "epoch of 22,500 reviews takes minutes on two cores); "
                                        "the results say the size used.")
    run_name, run_tags = jobs.name_fields("retrain")
    submitted = st.form_submit_button("Start retraining", type="primary",
                                      disabled=not sources, icon=":material/play_arrow:")
run_id = source.run_id if source is not None else None
if submitted and run_id is None:
    st.error("Pick the generation run whose adversarial inputs are added.")
if submitted and run_id:
    jobs.launch("retrain", run_name or f"retraining of {sel.label} with "
                f"{display_name(source)}", run_retraining,
                model=sel.model, from_run=run_id, dataset=sel.dataset, epochs=int(epochs),
                repeats=int(repeats), control=bool(control),
                coverage_inputs=int(coverage_inputs), mix=float(mix),
                transfer_seeds=int(transfer_seeds), run_name=run_name or None,
                evaluation_inputs=None if eval_inputs >= ALL_EVAL else int(eval_inputs),
                fit_inputs=None if fit_inputs >= ALL_FIT else int(fit_inputs),
                run_tags=run_tags)

jobs.job_panel("retrain", show_key="retrain_show", model=sel.model)

st.subheader("Results")
done = [r for r in store.list(kind="retrain", model=str(sel.model))
        if r.summary and r.summary.get("repeats_done")]
if not done:
    st.info("No retraining has finished yet.")
    st.stop()
shown_info = jobs.run_picker("Retraining run", done, key="retrain_show")
if shown_info is None:
    st.info("Every retraining so far is partial (cancelled or failed): pick one above to see "
            "the repeats it finished.")
    st.stop()
shown = shown_info.run_id
st.download_button("Download report (HTML)", lambda: report.retraining(shown_info),
                   key="retrain_report", file_name=f"{shown}.html", mime="text/html",
                   on_click="ignore", icon=":material/download:",
                   help="This retraining as one self-contained HTML file that opens offline.")
summary = store.get(shown).summary
try:
    source_name = display_name(store.get(summary["from_run"]))
except RNNConError:
    source_name = summary["from_run"]          # deleted since
st.caption(f"{display_name(shown_info)}: {sel.label} retrained with the {summary['n_inputs']} "
           f"adversarial inputs of run {source_name}: {summary['repeats_done']} of {summary['repeats']} "
           f"repeats of {summary['epochs']} epochs; "
           + "".join(f"{t}; " for t in [results.trained_on(summary)] if t)
           + f"evaluated on {summary['evaluated_on']}.")
transfer = summary.get("transfer")
if transfer and transfer.get("control") is not None:
    c = st.columns(3)
    c[0].metric(f"Held-out {transfer['method']} inputs: retrained",
                f"{100 * transfer['retrained']:.1f} %",
                delta=f"{100 * (transfer['retrained'] - transfer['control']):+.1f} points "
                      f"vs control")
    c[1].metric("Same inputs: control arm", f"{100 * transfer['control']:.1f} %")
    c[2].metric("Clean accuracy: after − control",
                f"{100 * summary['accuracy_after_minus_control']:+.2f} points")
# one table a row: side by side, their columns were cut at 1,280 px
st.markdown("**Clean metrics** (evaluation part of the test split)")
st.dataframe(results.table6(summary), hide_index=True, width="stretch")
st.markdown("**Held-out transfer** (accuracy on adversarial inputs made against the "
            "original model from evaluation seeds; no model trained on them)")
table = results.transfer_table(summary)
if table.empty:
    st.caption("Not measured in this run (held-out seeds per method: 0).")
else:
    st.dataframe(table, hide_index=True, width="stretch")
# the small multiples take the page's width (nine panels in half of it ran together)
st.plotly_chart(charts.before_after(results.before_after_frame(summary),
                                    title="Before and after retraining (mean over repeats)"),
                width="stretch", key="retrain_bars")
st.plotly_chart(charts.repeats(results.repeats_frame(summary),
                               title="Spread over the repeats (Figure 14)"),
                width="stretch", key="retrain_repeats_chart")
if "robustness" in summary:
    rob = summary["robustness"]
    c = st.columns(3)
    c[0].metric("Adv. rate vs original", f"{100 * rob['original']['adv_rate']:.1f} %")
    c[1].metric("Adv. rate vs retrained", f"{100 * rob['retrained']['adv_rate']:.1f} %",
                delta=f"{-100 * rob['drop']:.1f} points", delta_color="inverse")
quality = summary.get("quality") or {}
if quality.get("skipped"):
    st.caption(f"Quality of the inputs used: not computed ({quality['skipped']}).")
elif quality:
    st.caption("Quality of the inputs used: " + ", ".join(
        f"{k} {v:.4g}" for k, v in quality.items() if isinstance(v, (int, float)))
        + (f". {quality['note']}" if quality.get("note") else ""))
