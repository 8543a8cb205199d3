"""Runs: the history of the run store, two runs compared, downloads."""
import json

import streamlit as st

from dashboard import jobs, state, tables
from rnncon_core.reports import charts
from rnncon_core.runs import display_name

st.title("Runs")
store = jobs.store()
st.caption("Every job (generation, retraining, …) is a run in the store (`rnncon runs` lists "
           "it too); they stay after a restart of the server. A retraining's held-out sets are "
           "listed under it (↳).")

runs = store.list()
if not runs:
    st.info("No runs yet: start one on the Generate page (or with `rnncon generate`).")
    st.stop()

c1, c2 = st.columns(2)
kinds = sorted({r.kind for r in runs})
kind = c1.selectbox("Kind", ["all"] + kinds, key="runs_kind")
statuses = sorted({r.status for r in runs})
status = c2.selectbox("Status", ["all"] + statuses, key="runs_status")
shown = [r for r in runs if (kind == "all" or r.kind == kind)
         and (status == "all" or r.status == status)]

history = tables.runs_history(shown)
every = st.toggle("All columns", False, key="runs_all_columns",
                  help="Kind, method, error and the full id; the default columns fit a "
                       "1,280 px screen.")
st.dataframe(history, hide_index=True, width="stretch", column_config=tables.HISTORY_COLUMNS,
             column_order=None if every else tables.HISTORY_SHORT)
st.download_button("Download this history (CSV)", history.to_csv(index=False),
                   file_name="runs.csv", mime="text/csv", key="runs_history_csv")

st.subheader("Compare runs")
ids = [r.run_id for r, _ in tables.under_parents(shown)]
by_id = {r.run_id: r for r in shown}
label = {r: display_name(by_id[r]) for r in ids}
picked = st.multiselect("Runs to compare", ids, default=tables.same_kind_default(shown),
                        max_selections=4, key="runs_compare",
                        format_func=lambda r: f"{label[r]} · {by_id[r].kind} · "
                                              f"{by_id[r].status}"
                                              + (" · held-out set" if by_id[r].parent else ""),
                        help="Starts on the two newest finished runs of the same kind and "
                             "model, so their rows line up.")
if len({by_id[r].kind for r in picked}) > 1:
    st.warning("These runs are of different kinds: most of their rows have nothing to compare "
               "(shown as —).", icon=":material/warning:")
if len(picked) >= 2:
    summaries = {r: store.get(r).summary or {} for r in picked}
    st.dataframe(tables.compare(summaries, label), width="stretch")
    keys = [k for k in ("adv_rate", "avg_l2", "avg_l1", "avg_linf", "seconds",
                        "accuracy_after", "rconc_after") if any(k in s for s in summaries.values())]
    if keys:
        st.plotly_chart(charts.compare_runs(summaries, keys, label, tables.SUMMARY_NAMES),
                        width="stretch", key="runs_compare_chart")
else:
    st.caption("Pick two runs to see them side by side.")

st.subheader("One run")
run_id = st.selectbox("Run", ids, key="runs_one", format_func=lambda r: label[r])
if run_id:
    info = store.get(run_id)
    st.markdown(f"**{display_name(info)}** · {info.kind} · model `{state.public(info.model)}` · "
                f"**{info.status}** · started {info.created}, last update {info.updated}  \n"
                f"id `{info.run_id}`" + (f" · a held-out set of retraining `{info.parent}`"
                                         if info.parent else ""))
    kids = store.list(parent=info.run_id)
    if kids:
        st.caption("Held-out sets it generated (its children; never a default elsewhere): "
                   + ", ".join(display_name(k) for k in kids))
    if info.error:
        st.error(f"{info.status}: {info.error}")
    with st.expander("Configuration"):
        st.json(info.config)
    cols = st.columns(3)
    if info.summary:
        cols[0].download_button("summary (JSON)", json.dumps(info.summary, indent=2),
                                file_name=f"{run_id}-summary.json", mime="application/json",
                                key="runs_dl_summary")
    outputs = info.load_npz("outputs")
    if outputs is not None:
        cols[1].download_button("per input (CSV)", tables.per_input(outputs).to_csv(index=False),
                                file_name=f"{run_id}-inputs.csv", mime="text/csv",
                                key="runs_dl_csv")
    for i, name in enumerate(f for f in info.files() if f.endswith(".npz")):
        cols[2].download_button(f"{name} (NPZ)", (info.path / name).read_bytes(),
                                file_name=f"{run_id}-{name}", mime="application/octet-stream",
                                key=f"runs_dl_npz_{i}")
    st.caption("Files: " + ", ".join(info.files()))
