"""Perturbations: t-SNE of a run's perturbations (Figure 10); a point shows its pair."""
import numpy as np
import streamlit as st

from dashboard import jobs, state, text_views
from rnncon_core.reports import charts, results
from rnncon_core import data

st.title("Perturbations")
st.caption("Each point is one perturbation (generated input minus its seed), placed by t-SNE; "
           "click a point, or draw a box or a lasso (the chart's toolbar), to see the seeds "
           "and generated inputs.")

sel = state.require_model()
store = jobs.store()
runs = results.generation_runs(store, sel.model)
if not runs:
    st.info("No generation run for this model yet: start one on the Generate page.")
    st.stop()
if state.kind_of(sel.dataset) != "image":        # a text edit has no pixel perturbation
    info = jobs.run_picker("Run", runs, key="pert_run")
    if info is None:
        st.info("Every generation run of this model so far is partial: pick one above.")
        st.stop()
    text_views.perturbations_view(sel, info, state.run_outputs(info))
    st.stop()

c = st.columns([2, 1, 1])
info = jobs.run_picker("Run", runs, key="pert_run", where=c[0])
if info is None:
    st.info("Every generation run of this model so far is partial (cancelled or failed): "
            "pick one above to see its perturbations.")
    st.stop()
run_id = info.run_id
outputs = state.run_outputs(info)
only_adv = c[1].toggle("Only adversarial inputs", True, key="pert_only_adv")
colorings = {"contributions activated": "n_activated", "class (label of the seed)": "y_seed",
             "predicted class": "pred_gen"}
available = [k for k, v in colorings.items() if v in outputs
             and not (v == "n_activated" and (np.asarray(outputs[v]) < 0).all())]
color_by = c[2].radio("Colour by", available, key="pert_color")

rows = results.gallery_order(outputs, only_adv)
rows = np.sort(rows)
if len(rows) < 3:
    st.info(f"This view needs at least 3 perturbations; the run has {len(rows)}"
            + (" adversarial ones: switch off the filter, or run more seeds." if only_adv
               else "."))
    st.stop()

mtime = (info.path / "outputs.npz").stat().st_mtime
with st.spinner("Running t-SNE on the perturbations…"):
    points = state.tsne(run_id, mtime, tuple(int(r) for r in rows))
values = np.asarray(outputs[colorings[color_by]])[rows]
hover = [f"seed {int(outputs['seed_index'][r])}: {int(outputs['y_seed'][r])} → "
         f"{int(outputs['pred_gen'][r])}" for r in rows]
fig = charts.perturbation_map(points, values, color_by, hover,
                              continuous=colorings[color_by] == "n_activated")
event = st.plotly_chart(fig, width="stretch", key="pert_map", on_select="rerun",
                        selection_mode=("points", "box", "lasso"))

picked = charts.selected_rows(fig, event.selection.points if event else [])
if picked:
    chosen = np.asarray(picked)
    what = f"{len(chosen)} of the {len(rows)} points selected"
else:
    fallback = st.number_input("No point selected: click a point, or drag a box or a lasso "
                               "around some. Or pick a point by its number", 0, len(rows) - 1,
                               0, key="pert_pick")
    chosen = np.asarray([int(fallback)])
    what = f"point {int(fallback)} of {len(rows)} (picked by number)"
PAGE = 6
pages = max(1, -(-len(chosen) // PAGE))
page = 1
if pages > 1:
    page = st.number_input(f"Page of pairs (1 to {pages})", 1, pages, 1, key="pert_page")
start = (int(page) - 1) * PAGE
sub = rows[chosen[start:start + PAGE]]
st.caption(f"{what}; showing pairs {start + 1}–{start + len(sub)} of {len(chosen)}"
           + (f" (page {int(page)} of {pages}, {PAGE} pairs per page)" if pages > 1 else "")
           + ".")
st.plotly_chart(charts.image_triplets(data.to_images(outputs["x_seed"][sub]),
                                      data.to_images(outputs["x_gen"][sub]),
                                      results.captions(outputs, sub),
                                      title=f"Pairs {start + 1}–{start + len(sub)} of "
                                            f"{len(chosen)} selected"),
                width="stretch", key="pert_pairs")
