"""Campaign: find the model's faults within a budget, guided by a criterion; live curves, the
fault gallery by (true, predicted), stop and resume."""
import streamlit as st

from dashboard import forms, jobs, state
from rnncon_core import campaign as camp
from rnncon_core import data
from rnncon_core.errors import RNNConError
from rnncon_core.reports import campaign as report
from rnncon_core.reports import charts


class _Declared:
    """The campaign's declared mutation and loop parameters, for the form."""
    params = camp.CAMPAIGN_PARAMS


st.title("Campaign")
st.caption("A DeepHunter-style loop: pick inputs from a queue, mutate them within validity "
           "bounds, keep what raises the guide's coverage, and record every input the model "
           "now gets wrong as a fault (distinct by true and predicted label and by the "
           "abstract state of the last hidden state). `none` is the unguided baseline. "
           "docs/campaign.md")

sel = state.require_model()
kind = state.kind_of(sel.dataset)

with st.form("camp_form"):
    st.markdown(f"**Model:** {sel.label} · **seeds from:** the {sel.dataset} test split")
    c = st.columns(4)
    guides = camp.guide_names()
    guide = c[0].selectbox("Guide", guides, index=guides.index("rconc"), key="camp_guide",
                           help="A coverage criterion, or none (no guidance).")
    budget = c[1].text_input("Budget", "2m", key="camp_budget",
                             help="10m, 90s, 1h, or model calls such as 5000calls.")
    n_seeds = c[2].number_input("Seeds", 1, 2000, 100, key="camp_seeds",
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

jobs.job_panel("campaign", show_key="camp_show")

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

faults = camp.load_campaign(info)["faults"]
st.subheader("Faults by (true, predicted)")
pairs = report.pair_table(faults)
if pairs.empty:
    st.info("No fault found yet.")
    st.stop()
st.dataframe(pairs, hide_index=True, width="stretch")
if (info.config or {}).get("kind") == "image":
    options = [(int(r.true), int(r.predicted)) for r in pairs.itertuples()]
    pick = st.selectbox("Pair", options, key="camp_pair",
                        format_func=lambda p: f"{p[0]} → {p[1]} "
                                              f"({int(pairs[(pairs.true == p[0]) & (pairs.predicted == p[1])].faults.iloc[0])})")
    rows = [i for i in range(len(faults["label"]))
            if (faults["label"][i], faults["pred"][i]) == pick][:16]
    st.plotly_chart(charts.image_grid(data.to_images(faults["x"][rows]),
                                      [f"{faults['op'][i]}" for i in rows], cols=8,
                                      title=f"Faults {pick[0]} → {pick[1]} (the mutation that "
                                            f"made each)"),
                    width="stretch", key="camp_gallery")
st.download_button("Download report (HTML)", lambda: report.campaign_html(info),
                   key="camp_report", file_name=f"{run_id}.html", mime="text/html",
                   on_click="ignore", icon=":material/download:")
