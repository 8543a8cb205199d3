"""Campaign: find the model's faults within a budget, guided by a criterion; the headline, the
curves of faults and coverage over time, the fault gallery (each fault beside its root seed,
by fault class), stop and resume.

Everything about the shown run (its job card's counts, the picker's status, the metrics, the
curves, the groups and the gallery) is drawn in one fragment from one look at the run store
(``campaign.load_campaign``: rows, curve and counters of the same checkpoint), so they agree
while it runs, after Cancel and after Resume."""
import time

import numpy as np
import streamlit as st

from dashboard import forms, images, jobs, state, text_views, urlstate
from rnncon_core import campaign as camp
from rnncon_core import data
from rnncon_core.errors import RNNConError
from rnncon_core.reports import campaign as report
from rnncon_core.reports import charts
from rnncon_core.reports import faults as fview


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
ss = st.session_state
# the form's values live in the session (and the URL, urlstate): a reload keeps what was typed
for key, value in (("camp_guide", "rconc"), ("camp_budget", "2m"),
                   ("camp_seeds", camp.DEFAULT_SEEDS[kind]), ("camp_seed", 0)):
    ss.setdefault(key, value)

with st.form("camp_form"):
    st.markdown(f"**Model:** {sel.label} · **seeds from:** the {state.data_label(sel.dataset)} test split")
    c = st.columns(4)
    guides = camp.guide_names()
    guide = c[0].selectbox("Guide", guides, key="camp_guide",
                           help=f"A coverage criterion, a signal beyond coverage (gini, margin, "
                                f"lsa, dsa, diversity: docs/prioritize.md), or a baseline "
                                f"without one: {BASELINES}.")
    budget = c[1].text_input("Budget", key="camp_budget",
                             help="10m, 90s, 1h, or model calls such as 5000calls.")
    n_seeds = c[2].number_input("Seeds", 1, 2000, key="camp_seeds",
                                help="The first N test inputs the model predicts right.")
    seed = c[3].number_input("Random seed", 0, 2 ** 31 - 1, key="camp_seed")
    values = forms.draw(_Declared, kind, {}, {}, {}, prefix="camp_")
    submitted = st.form_submit_button("Start", type="primary", icon=":material/play_arrow:")

if submitted:
    try:
        parsed = camp.parse_budget(budget)            # once, here: the job gets the Budget
        # only what differs from the declarations' defaults (the engine applies those)
        declared = {p.name: p.default for p in camp.CAMPAIGN_PARAMS}
        params = {k: v for k, v in forms.generation_params(_Declared, values).items()
                  if v is not None and v != declared.get(k)}
    except RNNConError as e:
        state.show_error(e)
        st.stop()
    jobs.launch("campaign", f"{guide} campaign on {sel.label} · {budget}", camp.run_campaign,
                model=sel.model, dataset=sel.dataset, guide=guide, budget=parsed,
                seeds=int(n_seeds), seed=int(seed), log=True, **params)

store = jobs.store()


def _runs() -> dict:
    return {r.run_id: r for r in store.list(kind="campaign") if r.model == str(sel.model)}


def _metrics(h: dict, info) -> None:
    m = st.columns(5)
    if h["checked"]:
        m[0].metric("Fault classes", "—" if h["fault_classes"] is None
                    else f"{h['fault_classes']:,}",
                    help="Valid faults (the reader's oracle accepts them) grouped into classes "
                         "per (true, predicted) pair: the headline.")
        m[1].metric("Root seeds", f"{h['fault_roots']:,}",
                    help="Distinct campaign seeds behind a valid fault.")
        m[2].metric("(true, predicted) pairs", f"{h['valid_pairs']:,}",
                    help="Pairs with a valid fault.")
    else:
        m[0].metric("Distinct faults", f"{h['distinct_faults']:,}",
                    help="By (true, predicted) and the abstract state of the last hidden "
                         "state (a run from before faults were checked for validity).")
        m[1].metric("(true, predicted) pairs", f"{h['distinct_pairs']:,}")
        m[2].metric("Coverage", f"{h['coverage']:.4f}" if h["coverage"] is not None else "—")
    m[3].metric("Model calls", f"{h['calls']:,}" if h["calls"] is not None else "—")
    m[4].metric("Status", info.status)
    if h["checked"]:
        cov = f"{h['coverage']:.4f}" if h["coverage"] is not None else "— (no criterion)"
        st.caption(f"{h['valid_faults']:,} valid and {h['invalid_faults']:,} invalid of "
                   f"{h['distinct_faults']:,} distinct faults (by abstract state) · coverage "
                   f"{cov}")


def _gallery(info, faults: dict, seeds: dict, rows: list[int], title: str) -> None:
    """Faults beside their root seeds, as the data's kind shows them: images in pairs (seed,
    fault), reviews beside their seed review with the changed words marked, a series over
    its seed."""
    run_kind = (info.config or {}).get("kind", kind)
    roots = np.asarray(faults["root"])[rows].astype(int)
    if run_kind == "image" and len(seeds.get("x", ())):
        seed_img = data.to_images(np.asarray(seeds["x"])[roots])
        fault_img = data.to_images(np.asarray(faults["x"])[rows])
        gap = np.ones(seed_img.shape[:-1] + (2,))
        pairs = np.concatenate([seed_img, gap, fault_img], axis=-1)
        with st.container(key="camp_gallery"):
            st.caption(f"{title}: each root seed (left) beside its fault (right)")
            st.html(images.image_strip(pairs, [fview.caption(faults, i) for i in rows]))
        return
    shown = rows[:6]
    if run_kind == "text":
        outputs = {"x_seed": seeds["x"][roots[:len(shown)]], "x_gen": faults["x"][shown],
                   "y_seed": faults["label"][shown], "pred_gen": faults["pred"][shown],
                   "adversarial": np.ones(len(shown), bool),
                   "seed_index": roots[:len(shown)]}
        for i in shown:
            if fview.checked(faults) and not bool(faults["valid"][i]):
                st.caption(f"fault {i}: {fview.caption(faults, i)}")
        text_views.show_pairs(outputs, range(len(shown)), state.dataset(sel.dataset).vocab,
                              key="camp_text", seed_label="campaign seed")
        return
    i = st.selectbox("Fault", shown, key="camp_fault",
                     format_func=lambda i: f"fault {i}: {fview.caption(faults, i)}")
    st.plotly_chart(charts.sequence_pair(seeds["x"][int(faults["root"][i])], faults["x"][i],
                                         f"Fault {i}: {int(faults['label'][i])} → "
                                         f"{int(faults['pred'][i])} (dashed) over its seed "
                                         f"(solid)"),
                    width="stretch", key="camp_gallery")


def _faults(info, loaded: dict) -> None:
    """The groups (fault classes; invalid faults by pair, with the filter) and the gallery."""
    faults = loaded["faults"]
    checked = fview.checked(faults)
    st.subheader("Faults by fault class" if checked else "Faults by (true, predicted)")
    which = "all"
    if checked:
        which = st.segmented_control("Show", fview.FILTERS, key="camp_filter",
                                     default="valid",
                                     help="valid: faults the oracle accepts (by fault class); "
                                          "invalid: those it refuses, with its reason; all.") \
            or "valid"
    table = fview.groups(faults, which)
    if table.empty:
        st.info("No fault found yet." if not len(faults.get("label", ())) else
                f"No {which} fault.")
        return
    what = "" if which == "all" else f"{which} "
    st.caption(f"{int(table['faults'].sum()):,} {what}faults in {len(table):,} groups",
               help="A group is a fault class of valid faults, or a (true, predicted) pair.")
    st.dataframe(table.drop(columns=["class"] if not checked else []), hide_index=True,
                 width="stretch", height=min(320, 38 + 35 * len(table)))
    options = table["group"].tolist()
    count = dict(zip(options, table["faults"]))
    if ss.get("camp_group") not in options:
        ss["camp_group"] = options[0]
    pick = st.selectbox("Group", options, key="camp_group",
                        format_func=lambda g: f"{g} ({count[g]} faults)")
    rows = fview.members(faults, pick, which)
    _gallery(info, faults, loaded["seeds"], rows, pick)


def _view(cards: list) -> None:
    """The shown run, read once: the picker, its card's counts, the metrics, the curves, the
    groups and the gallery (drawn below the job cards, in their fragment)."""
    by_id = _runs()
    if not by_id:
        st.info("No campaign of this model yet: start one above.")
        return
    if ss.get("camp_show") not in by_id:
        ss["camp_show"] = next(iter(by_id))
    # the options' text never changes while the picker is shown (the browser keeps the text
    # of the chosen option: a status in it stayed "running" after Cancel); the Status metric
    # and each card say the status
    run_id = st.selectbox("Campaign", list(by_id), key="camp_show",
                          format_func=lambda r: f"{by_id[r].method} · {r}")
    info = by_id[run_id]
    if (info.status == "running") != ss.get("camp_live", False):
        ss["camp_live"] = info.status == "running"
        st.rerun()                 # poll (or stop polling) with the whole page's new state
    started = time.perf_counter()
    loaded = camp.load_campaign(info)   # classes a running campaign's faults: seconds for 1000s
    # poll at most a third of the time: a long campaign's read (its fault classes) must not
    # take a core away from the campaign itself
    ss["camp_poll"] = min(10.0, max(jobs.POLL_SECONDS, 3 * (time.perf_counter() - started)))
    used = ss.get("camp_poll_used", jobs.POLL_SECONDS)
    if info.status == "running" and ss["camp_poll"] > 2 * used:
        st.rerun()                 # the fragment's interval is set by a whole run (at most
        #                            a few times a run: it only grows, up to 10 s)
    h = fview.headline(loaded["faults"], loaded["curve"])
    for card in cards:             # the card of the shown run says what the metrics say
        if card.run_id == run_id:
            card.message = fview.headline_text(h)
    _metrics(h, info)
    axis = st.segmented_control("Against", ["seconds", "calls"], key="camp_axis",
                                default="seconds",
                                format_func=fview.AXIS_TITLES.get) or "seconds"
    if len(loaded["curve"]["seconds"]):
        st.plotly_chart(fview.curves_figure(loaded["faults"], loaded["curve"], axis),
                        width="stretch", key="camp_curves")
    if info.status != "running":
        _resume(info, run_id)
    _faults(info, loaded)
    urlstate.sync()


def _resume(info, run_id: str) -> None:
    st.download_button("Download report (HTML)", lambda: report.campaign_html(info),
                       key="camp_report", file_name=f"{run_id}.html", mime="text/html",
                       on_click="ignore", icon=":material/download:")
    with st.form("camp_resume"):
        st.markdown("**Resume** this campaign from its last checkpoint (a new run goes on "
                    "exactly where it stopped).")
        total = st.text_input("Total budget", (info.config or {}).get("budget", "2m"),
                              key="camp_resume_budget",
                              help="Including what it spent: give more to extend a finished "
                                   "campaign.")
        if st.form_submit_button("Resume", icon=":material/replay:"):
            try:
                parsed = camp.parse_budget(total)
            except RNNConError as e:
                state.show_error(e)
                return
            jobs.launch("campaign", f"resume {run_id}", camp.run_campaign, model=info.model,
                        resume=run_id, budget=parsed, log=True)
            st.rerun()


shown = _runs().get(ss.get("camp_show"))
ss["camp_live"] = shown is not None and shown.status == "running"
ss["camp_poll_used"] = ss.get("camp_poll", jobs.POLL_SECONDS)
jobs.job_panel("campaign", show_key="camp_show", follow_running=True, model=sel.model,
               cancelled_note="resume it from its last checkpoint below", body=_view,
               live=ss["camp_live"], every=ss["camp_poll_used"])
