"""Coverage: RConC beside NC per layer, the threshold slider, growth curves, the sweep, HS_C
and CS_C, and the threshold-selection helper."""
import pandas as pd
import streamlit as st

from dashboard import charts, state
from rnncon_core.errors import RNNConError

st.title("Coverage")
st.caption("RConC counts the contributions (a neuron's output times a weight) that some test "
           "input activates above the threshold; NC counts neurons. Moving the threshold reads "
           "the kept maxima: no new forward pass.")

state.need("coverage", "Coverage")
sel = state.require_model()

c = st.columns(4)
n_inputs = c[0].select_slider("Test inputs", state.INPUT_CHOICES, value=200, key="cov_n",
                              help="The first N inputs of the test split.")
granularity = c[1].radio("Granularity", ["unit", "edge"], horizontal=True, key="cov_gran",
                         help="unit: one contribution per gate unit, step and part (the "
                              "paper's Table 1 count); edge: one per source neuron and weight "
                              "(Definition 1).")
normalize = c[2].radio("Normalization", ["model", "layer"], horizontal=True, key="cov_norm",
                       help="Min-max over all of one input's contributions (Eq. 3), or per "
                            "layer.")
by = c[3].radio("RConC rows", ["layer", "source"], horizontal=True, key="cov_by",
                help="layer: where the contribution arrives; source: the layer whose "
                     "neurons emit it (the paper's Figure 7 rows, with the input layer).")

try:
    crits = state.coverage(sel.model, sel.dataset, n_inputs, granularity, normalize)
except RNNConError as e:
    state.show_error(e)
    st.stop()
n_seen = crits["RConC"].n_inputs

if "cov_threshold" not in st.session_state:
    st.session_state["cov_threshold"] = state.default_threshold(sel.dataset)


@st.fragment
def at_threshold():
    """The slider and what it drives: reruns on its own when the slider moves."""
    t = st.slider("Threshold", 0.0, 0.95, step=0.05, key="cov_threshold",
                  help="A contribution (or neuron) counts as covered when its normalized "
                       "value exceeds this for some input.")
    rconc, nc, hsc, csc = (crits[k] for k in ("RConC", "NC", "HS_C", "CS_C"))
    m = st.columns(4)
    m[0].metric("RConC", f"{rconc.rate(t):.2%}",
                help=f"{rconc.covered_at(t):,} of {rconc.total:,} contributions")
    m[1].metric("NC", f"{nc.rate(t):.2%}", help=f"{nc.covered_at(t):,} of {nc.total:,} neurons")
    m[2].metric("HS_C (RNN-Test)", f"{hsc.rate():.2%}",
                help="hidden-state coverage: units among the top k of some hidden vector "
                     "(no threshold)")
    if csc is not None:
        sections = csc.sections()
        m[3].metric("CS_C boundary (RNN-Test)",
                    f"{sections[sections['boundary']]['rate'].mean():.2%}",
                    help="cell-state coverage: share of LSTM cells some input drove into an "
                         "outer section of tanh(c) (no threshold)")
    else:
        m[3].metric("CS_C (RNN-Test)", "—", help="only for LSTM models (it reads the cell "
                                                "state); this model has none")
    left, right = st.columns(2)
    with left:
        st.plotly_chart(charts.coverage_by_layer({"RConC": rconc.by_layer(t, by=by),
                                                  "NC": nc.by_layer(t)}, threshold=t),
                        width="stretch", key="cov_by_layer")
    with right:
        g = state.nearest_grid(t)
        st.plotly_chart(charts.growth_curves({"RConC": rconc.curve(g), "NC": nc.curve(g)},
                                             threshold=g), width="stretch", key="cov_growth")
    st.caption(f"{n_seen} inputs of the {sel.dataset} test split, model {sel.label}, "
               f"{granularity} granularity, {normalize} normalization.")


at_threshold()

st.subheader("Coverage vs threshold (Figures 7 and 8)")
sweep = state.sweep(sel.model, sel.dataset, n_inputs, granularity, normalize, by)
st.plotly_chart(charts.threshold_sweep(sweep, chosen=st.session_state["cov_threshold"]),
                width="stretch", key="cov_sweep")

left, right = st.columns(2)
with left:
    st.subheader("Threshold selection (§5.2)")
    st.caption("Among candidate thresholds, take the one where RConC differs most between "
               "the labels.")
    candidates = st.multiselect("Candidates", list(state.THRESHOLD_GRID[1:]),
                                default=[0.1, 0.25, 0.5, 0.75], key="cov_candidates")
    if st.button("Suggest a threshold", key="cov_suggest", icon=":material/tune:"):
        st.session_state["cov_suggest_on"] = True
    if st.session_state.get("cov_suggest_on"):
        try:
            best, table = state.threshold_choice(sel.model, sel.dataset, n_inputs, granularity,
                                                 normalize, tuple(sorted(candidates)))
        except RNNConError as e:
            state.show_error(e)
        else:
            scores = pd.DataFrame({"threshold": table["threshold"],
                                   "score": table["max_difference"]})
            st.plotly_chart(charts.threshold_selection(scores, chosen=best), width="stretch",
                            key="cov_selection")

            def use(best=best):
                st.session_state["cov_threshold"] = best
            st.button(f"Use {best:g}", on_click=use, key="cov_use", type="primary")
with right:
    st.subheader("RNN-Test's cell-state sections (CS_C)")
    if crits["CS_C"] is None:
        st.info("CS_C reads the LSTM cell state; this model has no LSTM layer.")
    else:
        st.dataframe(crits["CS_C"].sections(), hide_index=True, width="stretch")
