"""Perturbations: t-SNE of a run's perturbations (Figure 10); a point shows its pair."""
import numpy as np
import streamlit as st

from dashboard import charts, jobs, results, state
from rnncon_core import data

st.title("Perturbations")
st.caption("Each point is one perturbation (generated input minus its seed), placed by t-SNE; "
           "select a point (click, or drag a box) to see its seed and generated input.")

state.need("generate", "The perturbation map")
sel = state.require_model()
if state.kind_of(sel.dataset) != "image":
    st.info("The perturbation map is drawn for image models (a text edit has no pixel "
            "perturbation); see the text diff of a run on the Generate page.")
    st.stop()

store = jobs.store()
runs = results.generation_runs(store, sel.model)
if not runs:
    st.info("No generation run for this model yet: start one on the Generate page.")
    st.stop()

c = st.columns([2, 1, 1])
run_id = c[0].selectbox("Run", [r.run_id for r in runs], key="pert_run",
                        format_func=lambda r: results.run_label(store.get(r)))
info = store.get(run_id)
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
points = state.tsne(run_id, mtime, tuple(int(r) for r in rows))
values = np.asarray(outputs[colorings[color_by]])[rows]
hover = [f"seed {int(outputs['seed_index'][r])}: {int(outputs['y_seed'][r])} → "
         f"{int(outputs['pred_gen'][r])}" for r in rows]
event = st.plotly_chart(charts.perturbation_map(points, values, color_by, hover),
                        width="stretch", key="pert_map", on_select="rerun",
                        selection_mode=("points", "box", "lasso"))

picked = [int(p["customdata"][0]) for p in (event.selection.points if event else [])
          if p.get("customdata")]
fallback = st.number_input("…or pick a point by its number", 0, len(rows) - 1, 0,
                           key="pert_pick")
chosen = picked[:6] if picked else [int(fallback)]
sub = rows[np.asarray(chosen)]
st.plotly_chart(charts.image_triplets(data.to_images(outputs["x_seed"][sub]),
                                      data.to_images(outputs["x_gen"][sub]),
                                      results.captions(outputs, sub),
                                      title=f"{len(sub)} selected pair(s)"),
                width="stretch", key="pert_pairs")
