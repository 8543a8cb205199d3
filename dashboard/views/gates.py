"""Gates: contribution coverage per gate part and time step (Figure 12)."""
import numpy as np
import streamlit as st

from dashboard import charts, jobs, results, state
from rnncon_core import data
from rnncon_core.errors import RNNConError

st.title("Gates")
st.caption("Each row is one gate's input part (x·U) or recurrent part (h·W); each column a "
           "time step; each cell the share of that gate's contributions activated above the "
           "threshold. Hover for the values.")

state.need("coverage", "The gate view")
sel = state.require_model()
try:
    layers = [layer for layer in state.traced_layers(sel.model) if layer["kind"] != "dense"]
except RNNConError as e:
    state.show_error(e)
    st.stop()

c = st.columns([1, 1, 1, 2])
layer = c[0].selectbox("Layer", [layer["name"] for layer in layers], key="gates_layer")
threshold = c[1].slider("Threshold", 0.0, 0.95, state.default_threshold(sel.dataset),
                        step=0.05, key="gates_threshold")
n_inputs = c[2].select_slider("Test inputs", state.INPUT_CHOICES, value=200, key="gates_n")
modes = ["the whole set", "one input", "a seed vs its adversarial input"]
mode = c[3].radio("Show", modes, key="gates_mode")

try:
    rconc = state.coverage(sel.model, sel.dataset, n_inputs, "unit", "model")["RConC"]
except RNNConError as e:
    state.show_error(e)
    st.stop()

image = state.kind_of(sel.dataset) == "image"
if mode == modes[0]:
    table = rconc.by_gate_step(layer, threshold=threshold)
    st.plotly_chart(charts.gate_heatmap(table, f"{layer}: the first {rconc.n_inputs} test inputs "
                                               f"(threshold {threshold:g})"),
                    width="stretch", key="gates_set")
elif mode == modes[1]:
    i = st.number_input("Input (row of the test split)", 0, rconc.n_inputs - 1, 0,
                        key="gates_input")
    table = rconc.by_gate_step(layer, input_index=int(i), threshold=threshold)
    x, y = state.test_inputs(sel.dataset, rconc.n_inputs)
    pred, conf = state.predictions(sel.model, x[int(i):int(i) + 1])
    left, right = st.columns([1, 4])
    with left:
        if image:
            st.plotly_chart(charts.image_grid(data.to_images(x[int(i):int(i) + 1]),
                                              [f"label {y[int(i)]} → {pred[0]} ({conf[0]:.0%})"],
                                              cols=1), width="stretch", key="gates_img")
        else:
            st.caption(f"label {y[int(i)]}, predicted {pred[0]} ({conf[0]:.0%})")
    with right:
        st.plotly_chart(charts.gate_heatmap(table, f"{layer}: input {int(i)}"), width="stretch",
                        key="gates_one")
else:
    store = jobs.store()
    runs = [r for r in results.generation_runs(store, sel.model)
            if (r.summary or {}).get("n_adversarial", 0) > 0]
    if not runs:
        st.info("No generation run of this model found an adversarial input yet: start one on "
                "the Generate page.")
        st.stop()
    run_id = st.selectbox("Generation run", [r.run_id for r in runs], key="gates_run",
                          format_func=lambda r: results.run_label(store.get(r)))
    outputs = state.run_outputs(store.get(run_id))
    adv_rows = np.flatnonzero(outputs["adversarial"].astype(bool))
    pick = st.selectbox("Pair", [int(r) for r in adv_rows], key="gates_pair",
                        format_func=lambda r: f"seed {int(outputs['seed_index'][r])}: label "
                                              f"{int(outputs['y_seed'][r])} → predicted "
                                              f"{int(outputs['pred_gen'][r])}")
    xs, xg = outputs["x_seed"][pick:pick + 1], outputs["x_gen"][pick:pick + 1]
    try:
        seed_t = rconc.by_gate_step(layer, x=xs, threshold=threshold)
        adv_t = rconc.by_gate_step(layer, x=xg, threshold=threshold)
    except RNNConError as e:
        state.show_error(e)
        st.stop()
    st.plotly_chart(charts.gate_heatmap_pair(seed_t, adv_t, f"{layer}: seed vs adversarial "
                                                            f"(threshold {threshold:g})"),
                    width="stretch", key="gates_pair_chart")
    d = (adv_t - seed_t).to_numpy()
    st.caption(f"The adversarial input activates {np.clip(d, 0, None).sum():.2f} more and "
               f"{np.clip(-d, 0, None).sum():.2f} fewer gate-step shares than its seed "
               "(summed over the cells).")
    if image:
        st.plotly_chart(charts.image_triplets(data.to_images(xs), data.to_images(xg),
                                              results.captions(outputs, np.array([pick]))),
                        width="stretch", key="gates_pair_images")
