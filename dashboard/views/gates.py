"""Gates: contribution coverage per gate part and time step (Figure 12)."""
import numpy as np
import streamlit as st

from dashboard import jobs, state, text_views
from rnncon_core import data
from rnncon_core.errors import RNNConError
from rnncon_core.reports import charts, results

st.title("Gates")
st.caption("Each row is one gate's input part (x·U) or recurrent part (h·W); each column a "
           "time step; each cell the share of that gate's contributions activated above the "
           "threshold. Hover for the values.")
st.caption("**Rows** read *gate:part*: i input gate, f forget gate, c cell candidate, o output "
           "gate (GRU: z update, r reset, h candidate); x the part fed by the input, h the part "
           "fed by the previous hidden state (i:x = the input gate's input part).")

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
n_inputs = c[2].select_slider("Test inputs", state.INPUT_CHOICES, value=state.DEFAULT_INPUTS,
                              key="gates_n")
modes = ["one input", "the whole set", "a seed vs its adversarial input"]
mode = c[3].radio("Show", modes, key="gates_mode",
                  help="The whole set saturates quickly at low thresholds; one input, or a "
                       "seed beside its adversarial input (Figure 12), shows the structure.")

image = state.kind_of(sel.dataset) == "image"
fold = not image and text_views.fold_toggle()
profile = state.Profile(sel.model, sel.dataset, n_inputs)     # unit granularity, default scaling
try:                                       # the cache shows a spinner only while it computes
    rconc = state.coverage(profile)["RConC"]
except RNNConError as e:
    state.show_error(e)
    st.stop()

if mode == "the whole set":
    table = state.gate_table(profile, layer, threshold)
    if fold:
        table = text_views.fold_padding(table, state.test_inputs(sel.dataset,
                                                                 rconc.n_inputs)[0])
    st.plotly_chart(charts.gate_heatmap(table, f"{layer}: the first {rconc.n_inputs} test inputs "
                                               f"(threshold {threshold:g})"),
                    width="stretch", key="gates_set")
elif mode == "one input":
    i = st.number_input("Input (row of the test split)", 0, rconc.n_inputs - 1, 0,
                        key="gates_input")
    table = state.gate_table(profile, layer, threshold, int(i))
    x, y = state.test_inputs(sel.dataset, rconc.n_inputs)
    pred, conf = state.predictions(sel.model, x[int(i):int(i) + 1])
    if fold:
        table = text_views.fold_padding(table, x[int(i)],
                                        state.dataset(sel.dataset).vocab.decode(x[int(i)]))
    left, right = st.columns([1, 4])
    with left:
        if image:
            st.plotly_chart(charts.image_grid(data.to_images(x[int(i):int(i) + 1]),
                                              [f"label {y[int(i)]} → {pred[0]} ({conf[0]:.0%})"],
                                              cols=1), width="stretch", key="gates_img")
        else:
            st.caption(f"label {text_views.class_name(y[int(i)])}, predicted "
                       f"{text_views.class_name(pred[0])} ({conf[0]:.0%})")
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
    info = jobs.run_picker("Generation run", runs, key="gates_run")
    if info is None:
        st.info("Every run with adversarial inputs so far is partial (cancelled or failed): "
                "pick one above to see its pairs.")
        st.stop()
    outputs = state.run_outputs(info)
    adv_rows = np.flatnonzero(outputs["adversarial"].astype(bool))
    name = (lambda c: str(int(c))) if image else text_views.class_name
    pick = st.selectbox("Pair", [int(r) for r in adv_rows], key="gates_pair",
                        format_func=lambda r: f"seed {int(outputs['seed_index'][r])}: label "
                                              f"{name(outputs['y_seed'][r])} → predicted "
                                              f"{name(outputs['pred_gen'][r])}")
    xs, xg = outputs["x_seed"][pick:pick + 1], outputs["x_gen"][pick:pick + 1]
    try:
        seed_t = rconc.by_gate_step(layer, x=xs, threshold=threshold)
        adv_t = rconc.by_gate_step(layer, x=xg, threshold=threshold)
    except RNNConError as e:
        state.show_error(e)
        st.stop()
    if fold:
        seed_t = text_views.fold_padding(seed_t, np.concatenate([xs, xg]))
        adv_t = text_views.fold_padding(adv_t, np.concatenate([xs, xg]))
    st.plotly_chart(charts.gate_heatmap_pair(seed_t, adv_t, f"{layer}: seed vs adversarial "
                                                            f"(threshold {threshold:g})"),
                    width="stretch", key="gates_pair_chart")
    d = (adv_t - seed_t).to_numpy()
    rise, fall = 100 * d.max(), 100 * max(0.0, -d.min())
    st.caption(f"Per gate part and step, the adversarial input activates on average "
               f"{100 * d.mean():+.1f} percentage points of contributions more than its seed "
               f"(largest rise {rise:.0f}, largest fall {fall:.0f} points).")
    if image:
        st.plotly_chart(charts.image_triplets(data.to_images(xs), data.to_images(xg),
                                              results.captions(outputs, np.array([pick]))),
                        width="stretch", key="gates_pair_images")
    else:
        text_views.show_pairs(outputs, [pick], state.dataset(sel.dataset).vocab,
                              key="gates_text")
