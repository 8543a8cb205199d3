"""Generate: start a coverage-guided generation run, watch it, see Table 2 and the pairs."""
import streamlit as st

from dashboard import charts, forms, jobs, report, results, state, tables, text_views
from rnncon_core import data, zoo
from rnncon_core import generate as gen
from rnncon_core.errors import RNNConError

st.title("Generate")
st.caption("Start from seeds the model predicts right, perturb them (guided by the criterion "
           "of the method) and keep what the model now gets wrong: adversarial inputs.")

sel = state.require_model()
kind = state.kind_of(sel.dataset)
try:
    layers = state.traced_layers(sel.model)
except RNNConError as e:
    state.show_error(e)
    st.stop()

methods = list(gen.IMAGE_METHODS if kind == "image" else gen.TEXT_METHODS)
method = st.selectbox("Method", methods, key="gen_method",
                      format_func=lambda m: f"{m}: {forms.DESCRIPTIONS.get(m, '')}")
fields = forms.FIELDS.get(method, ()) if kind == "image" else ()   # text: text_views' own
if kind == "text":
    text_views.objective_picker(method)
names = [layer["name"] for layer in layers]
recurrent = [layer["name"] for layer in layers if layer["kind"] != "dense"]

with st.form("gen_form"):
    st.markdown(f"**Model:** {sel.label} · **seeds from:** the {sel.dataset} test split")
    values = {}
    c = st.columns(4)
    n_seeds = c[0].number_input("Seeds", 1, 2000, 20, key="gen_seeds",
                                help="The first N test inputs the model predicts right.")
    if kind == "text":
        values.update(text_views.generation_form(method, recurrent,
                                                 state.default_threshold(sel.dataset)))
    if "target" in fields:
        values["target"] = c[1].selectbox(
            "Target layer", ["random", "dense"] + names, key="gen_target",
            format_func=lambda t: {"random": "Random (all layers)",
                                   "dense": "the Dense layers"}.get(t, t))
    if "layer" in fields:
        values["layer"] = c[1].selectbox("Target layer", ["random"] + recurrent, key="gen_layer",
                                         format_func=lambda t: "all layers" if t == "random"
                                         else t)
    if "constraint" in fields:
        values["constraint"] = c[2].selectbox("Constraint", list(gen.CONSTRAINTS),
                                              key="gen_constraint",
                                              help="DeepXplore's image constraints.")
    if "k" in fields:
        values["k"] = c[3].number_input("k (targets at once)", 1, 10, 1, key="gen_k")
    if "n_targets" in fields:
        values["n_targets"] = c[3].number_input("Target contributions", 1, 64, 8,
                                                key="gen_ntargets")
    c = st.columns(4)
    if "step" in fields:
        values["step"] = c[0].number_input("Step size", 0.001, 1.0, 0.01, step=0.005,
                                           format="%.3f", key="gen_step")
    if "iterations" in fields:
        values["iterations"] = c[1].number_input("Iterations", 1, 1000, 50, key="gen_iters")
    if "eps" in fields:
        values["eps"] = c[0].number_input("ε (L∞ radius)", 0.005, 1.0, 0.1, step=0.01,
                                          format="%.3f", key="gen_eps")
    if "l2" in fields:
        values["l2"] = c[0].number_input("L2 norm of the noise", 0.01, 20.0, 1.0,
                                         key="gen_l2")
    if "max_fraction" in fields:
        values["max_fraction"] = c[0].slider("Most words changed (share)", 0.01, 0.5, 0.1,
                                             key="gen_maxfrac")
    if "threshold" in fields:
        values["threshold"] = c[2].slider("Threshold", 0.05, 0.95,
                                          state.default_threshold(sel.dataset), step=0.05,
                                          key="gen_threshold")
    if "granularity" in fields:
        values["granularity"] = c[3].radio("Granularity", ["unit", "edge"], key="gen_gran",
                                           horizontal=True)
    if "others" in fields:
        own = zoo.ARCHITECTURES[sel.model].dataset if sel.shipped else \
            ("mnist" if kind == "image" else "imdb")
        same = [n for n in state.shipped() if n != sel.model
                and zoo.ARCHITECTURES[n].dataset == own]
        values["others"] = st.multiselect("Other models", same, default=same[:1],
                                          key="gen_others")
    submitted = st.form_submit_button("Start", type="primary", icon=":material/play_arrow:")

if submitted:
    params = (forms.generation_params(method, values) if kind == "image"
              else text_views.generation_params(method, values))
    if method == "differential" and not params.get("others"):
        st.error("Differential testing needs at least one other model with the same inputs; "
                 "none is shipped yet.")
    else:
        jobs.launch("generate", f"{method} on {sel.label} · {int(n_seeds)} seeds",
                    gen.run_generation, model=sel.model, method=method, n_seeds=int(n_seeds),
                    dataset=sel.dataset, batch_size=forms.batch_size(int(n_seeds)), **params)

jobs.job_panel("generate", show_key="gen_show")

store = jobs.store()
runs = results.generation_runs(store, sel.model)
st.subheader("Table 2: generation runs of this model")
if not runs:
    st.info("No finished generation run for this model yet: start one above.")
    st.stop()
if kind == "image":
    st.dataframe(tables.table2(runs), hide_index=True, width="stretch",
                 column_config=tables.TABLE2_COLUMNS)
else:
    st.dataframe(text_views.table2(runs), hide_index=True, width="stretch",
                 column_config=text_views.table2_columns())

st.subheader("Seeds and generated inputs")
info = jobs.run_picker("Run", runs, key="gen_show")
if info is None:
    st.info("Every run of this model so far is partial (cancelled or failed): pick one above "
            "to see what it finished.")
    st.stop()
run_id = info.run_id
outputs = state.run_outputs(info)
st.download_button("Download report (HTML)", lambda: report.generation(info, outputs),
                   key="gen_report", file_name=f"{run_id}.html", mime="text/html",
                   on_click="ignore", icon=":material/download:",
                   help="This run as one self-contained HTML file that opens offline.")
c = st.columns([1, 1, 2])
only_adv = c[0].toggle("Only adversarial inputs", True, key="gen_only_adv")
rows = results.gallery_order(outputs, only_adv)
if len(rows) == 0:
    st.info("This run found no adversarial input: switch off the filter to see every pair.")
    st.stop()
shown = rows[:c[1].number_input("Pairs shown", 1, 24, min(6, len(rows)), key="gen_n_pairs")]
caps = results.captions(outputs, shown)
if kind == "image":
    st.plotly_chart(charts.image_triplets(data.to_images(outputs["x_seed"][shown]),
                                          data.to_images(outputs["x_gen"][shown]), caps),
                    width="stretch", key="gen_gallery")
else:
    text_views.show_pairs(outputs, shown, state.dataset(sel.dataset).vocab)
