"""Campaign: find the model's faults within a budget, guided by a criterion; live curves, the
fault gallery by (true, predicted), stop and resume."""
import numpy as np
import streamlit as st

from dashboard import forms, jobs, state, text_views
from rnncon_core import campaign as camp
from rnncon_core import data
from rnncon_core.errors import RNNConError
from rnncon_core.reports import campaign as report
from rnncon_core.reports import charts


class _Declared:
    """The campaign's declared mutation and loop parameters, for the form."""
    params = camp.CAMPAIGN_PARAMS


BASELINES = "; ".join(f"{k} {v}" for k, v in camp.BASELINE_TEXT.items())

st.title("Campaign")
st.caption("A DeepHunter-style loop: pick inputs from a queue, mutate them within validity "
           "bounds, keep what raises the guide's coverage, and record every input the model "
           "now gets wrong as a fault (distinct by true and predicted label and by the "
           "abstract state of the last hidden state). Unguided baselines (no criterion): " +
           BASELINES + ". "
           "docs/campaign.md")

sel = state.require_model()
kind = state.data_kind(sel.dataset)     # image, text or sequence: its own mutations

with st.form("camp_form"):
    st.markdown(f"**Model:** {sel.label} · **seeds from:** the {sel.dataset} test split")
    c = st.columns(4)
    guides = camp.guide_names()
    guide = c[0].selectbox("Guide", guides, index=guides.index("rconc"), key="camp_guide",
                           help=f"A coverage criterion, a signal beyond coverage (gini, margin, "
                                f"lsa, dsa, diversity: docs/prioritize.md), or a baseline "
                                f"without one: {BASELINES}.")
    budget = c[1].text_input("Budget", "2m", key="camp_budget",
                             help="10m, 90s, 1h, or model calls such as 5000calls.")
    n_seeds = c[2].number_input("Seeds", 1, 2000, camp.DEFAULT_SEEDS[kind], key="camp_seeds",
                                help="The first N test inputs the model predicts right.")
    seed = c[3].number_input("Random seed", 0, 2 ** 31 - 1, 0, key="camp_seed")
    values = forms.draw(_Declared, kind, {}, {}, {}, prefix="camp_")
    submitted = st.form_submit_button("Start", type="primary", icon=":material/play_arrow:")

if submitted:
    try:
        camp.parse_budget(budget)
        params = {k: v for k, v in forms.generation_params(_Declared, values).items()
                  if v is not None}
    except RNNConError as e:
        state.show_error(e)
        st.stop()
    jobs.launch("campaign", f"{guide} campaign on {sel.label} · {budget}", camp.run_campaign,
                model=sel.model, dataset=sel.dataset, guide=guide, budget=budget,
                seeds=int(n_seeds), seed=int(seed), **params)

jobs.job_panel("campaign", show_key="camp_show", follow_running=True,
               cancelled_note="resume it from its last checkpoint below")

store = jobs.store()
runs = [r for r in store.list(kind="campaign") if r.model == str(sel.model)]
if not runs:
    st.info("No campaign of this model yet: start one above.")
    st.stop()
by_id = {r.run_id: r for r in runs}
if st.session_state.get("camp_show") not in by_id:
    st.session_state["camp_show"] = runs[0].run_id
run_id = st.selectbox("Campaign", list(by_id), key="camp_show",
                      format_func=lambda r: f"{by_id[r].method} · {by_id[r].status} · {r}")


def _curves():
    info = store.get(run_id)
    loaded = camp.live_state(info)          # the curve and counters only: cheap to poll
    s = loaded["summary"]
    m = st.columns(5)
    m[0].metric("Distinct faults", s.get("distinct_faults", "—"))
    m[1].metric("(true, predicted) pairs", s.get("distinct_pairs", "—"))
    cov = s.get("coverage")
    m[2].metric("Coverage", f"{cov:.4f}" if isinstance(cov, float) and cov == cov else "—")
    m[3].metric("Model calls", s.get("calls", "—"))
    m[4].metric("Status", info.status)
    if len(loaded["curve"]["seconds"]):
        st.plotly_chart(report.curve_figure(loaded["curve"]), width="stretch",
                        key="camp_curves")
    if info.status != "running" and st.session_state.get("camp_live"):
        st.session_state["camp_live"] = False
        st.rerun()


live = by_id[run_id].status == "running"
st.session_state["camp_live"] = live
st.fragment(_curves, run_every=jobs.POLL_SECONDS if live else None)()

info = store.get(run_id)
if info.status in ("cancelled", "failed", "finished"):
    with st.form("camp_resume"):
        st.markdown("**Resume** this campaign from its last checkpoint (a new run goes on "
                    "exactly where it stopped).")
        total = st.text_input("Total budget", (info.config or {}).get("budget", "2m"),
                              key="camp_resume_budget",
                              help="Including what it spent: give more to extend a finished "
                                   "campaign.")
        if st.form_submit_button("Resume", icon=":material/replay:"):
            try:
                camp.parse_budget(total)
                jobs.launch("campaign", f"resume {run_id}", camp.run_campaign, model=None,
                            resume=run_id, budget=total)
                st.rerun()
            except RNNConError as e:
                state.show_error(e)


def _gallery(info, faults: dict, seeds: dict, rows: list[int], pick: tuple[int, int]) -> None:
    """The faults of one (true, predicted) pair as the data's kind shows them: images in a grid,
    reviews beside their seed review with the changed words marked, a series over its seed."""
    run_kind = (info.config or {}).get("kind", kind)
    if run_kind == "image":
        st.plotly_chart(charts.image_grid(data.to_images(faults["x"][rows]),
                                          [f"{faults['op'][i]}" for i in rows], cols=8,
                                          title=f"Faults {pick[0]} → {pick[1]} (the mutation "
                                                f"that made each)"),
                        width="stretch", key="camp_gallery")
        return
    shown = rows[:6]
    if run_kind == "text":
        outputs = {"x_seed": seeds["x"][faults["root"][shown]], "x_gen": faults["x"][shown],
                   "y_seed": faults["label"][shown], "pred_gen": faults["pred"][shown],
                   "adversarial": np.ones(len(shown), bool),
                   "seed_index": faults["root"][shown]}
        text_views.show_pairs(outputs, range(len(shown)), state.dataset(sel.dataset).vocab,
                              key="camp_text", seed_label="campaign seed")
        return
    i = st.selectbox("Fault", shown, key="camp_fault",
                     format_func=lambda i: f"fault {i} (seed {int(faults['root'][i])}, "
                                           f"{faults['op'][i]})")
    st.plotly_chart(charts.sequence_pair(seeds["x"][int(faults["root"][i])], faults["x"][i],
                                         f"Fault {i}: {pick[0]} → {pick[1]} (dashed) over its "
                                         f"seed (solid)"),
                    width="stretch", key="camp_gallery")


st.download_button("Download report (HTML)", lambda: report.campaign_html(info),
                   key="camp_report", file_name=f"{run_id}.html", mime="text/html",
                   on_click="ignore", icon=":material/download:")
loaded = camp.load_campaign(info)
faults = loaded["faults"]
st.subheader("Faults by (true, predicted)")
pairs = report.pair_table(faults)
if pairs.empty:
    st.info("No fault found yet.")
    st.stop()
st.dataframe(pairs, hide_index=True, width="stretch")
options = [(int(r.true), int(r.predicted)) for r in pairs.itertuples()]
count = {p: int(n) for p, n in zip(options, pairs["valid faults"] + pairs["invalid faults"])}
pick = st.selectbox("Pair", options, key="camp_pair",
                    format_func=lambda p: f"{p[0]} → {p[1]} ({count[p]})")
rows = [i for i in range(len(faults["label"]))
        if (faults["label"][i], faults["pred"][i]) == pick][:16]
_gallery(info, faults, loaded["seeds"], rows, pick)
