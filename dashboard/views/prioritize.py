"""Prioritize: which test inputs to inspect (or label) first, by each signal; the
fault-detection curves, the top-ranked inputs, the ranking to download (docs/prioritize.md)."""
import numpy as np
import plotly.graph_objects as go
import streamlit as st

from dashboard import images, state, text_views
from rnncon_core import data
from rnncon_core.errors import RNNConError
from rnncon_core.prioritize import prioritize, signal_names
from rnncon_core.text.generators import load_vocabulary

st.title("Prioritize")
st.caption("Rank the test inputs so that the misclassified ones come first: by the model's "
           "uncertainty (gini, margin, entropy), by surprise against the training inputs (lsa, "
           "dsa), by how the prediction changes along the steps (deepstate), by coverage "
           "(<criterion>-total: items covered; -additional: items not covered yet), or at "
           "random. A curve shows the share of the misclassified inputs found against the "
           "share of inputs inspected: the higher and earlier, the better.")

sel = state.require_model()
DEFAULT = ["gini", "margin", "entropy", "random"]
c = st.columns([1, 3])
n_inputs = c[0].select_slider("Test inputs", state.INPUT_CHOICES, value=500, key="prio_n",
                              help="The first N inputs of the test split.")
chosen = c[1].multiselect("Signals", signal_names(), default=DEFAULT, key="prio_signals",
                          help="lsa, dsa and the profiled criteria first profile 2,000 "
                               "training inputs (once per model, some seconds); the "
                               "coverage signals run each criterion over the inputs.")
if not chosen:
    st.info("Pick at least one signal.")
    st.stop()


@st.cache_data(show_spinner=False, max_entries=8)
def ranking(model_ref: str, dataset_name: str, n: int, signals: tuple):
    """The Prioritization of the first n test inputs (server-wide cache)."""
    ds = state.dataset(dataset_name)
    x, y = state.test_inputs(dataset_name, n)
    return prioritize(state.model(model_ref), x, y, list(signals), x_train=ds.x_train,
                      y_train=ds.y_train, repeats=10)


def curves(res):
    """One line per signal: share of faults found vs share of inputs inspected (from 0)."""
    fig = go.Figure()
    for s in res.signals:
        x, y = res.curve(s)
        step = max(1, len(x) // 400)                    # at most ~400 points a line
        keep = np.r_[np.arange(0, len(x), step), len(x) - 1]
        fig.add_trace(go.Scatter(x=x[keep], y=y[keep], mode="lines", name=s,
                                 line={"dash": "dot"} if s == "random" else None))
    fig.update_layout(xaxis_title="share of inputs inspected",
                      yaxis_title="share of misclassified inputs found", height=420,
                      xaxis={"range": [0, 1], "tickformat": ".0%"},
                      yaxis={"range": [0, 1.02], "tickformat": ".0%"},
                      margin={"l": 10, "r": 10, "t": 30, "b": 10}, legend_title="signal")
    return fig


with st.spinner(f"Ranking {n_inputs} test inputs by {len(chosen)} signals…"):
    try:
        res = ranking(sel.model, sel.dataset, int(n_inputs), tuple(chosen))
    except RNNConError as e:
        state.show_error(e)
        st.stop()

faults = int(res.misclassified.sum())
st.markdown(f"**{faults}** of the {len(res.predictions)} test inputs are misclassified.")
if faults:
    st.plotly_chart(curves(res), width="stretch", key="prio_curves")
    table = res.metrics.set_index("signal")
    shown = table[["apfd", "apfd_lo", "apfd_hi", "found_1pct", "found_5pct", "found_10pct",
                   "repeats"]]
    st.dataframe(shown, width="stretch",
                 column_config={"apfd": st.column_config.NumberColumn("APFD", format="%.3f"),
                                "apfd_lo": st.column_config.NumberColumn("2.5 %", format="%.3f"),
                                "apfd_hi": st.column_config.NumberColumn("97.5 %",
                                                                         format="%.3f"),
                                **{f"found_{p}pct": st.column_config.NumberColumn(
                                    f"found in first {p} %", format="percent")
                                   for p in (1, 5, 10)}})
    st.caption("APFD: 1 - (sum of the faults' positions) / (inputs × faults) + 1 / (2 × "
               "inputs); random order averages 0.5. Where ties or the random order enter, the "
               "mean over 10 repeats with the 2.5-97.5 % range of the repeats.")
else:
    st.info("No input of these is misclassified: the rankings are shown without curves.")

c = st.columns([2, 1])
top_signal = c[0].selectbox("Top-ranked inputs by", res.signals, key="prio_top")
k = c[1].number_input("How many", 4, 48, 12, step=4, key="prio_k")
order = res.orders[top_signal][:int(k)]
x, y = state.test_inputs(sel.dataset, int(n_inputs))
if state.kind_of(sel.dataset) == "image":
    caps = [f"#{r + 1}: {int(y[i])}→{int(res.predictions[i])}"
            + (" ✗" if res.predictions[i] != y[i] else "") for r, i in enumerate(order)]
    st.markdown(images.image_strip(data.to_images(x[order]), caps), unsafe_allow_html=True)
else:
    vocab = load_vocabulary()
    lex = text_views.lexicon(vocab, str(len(vocab.words)))
    for r, i in enumerate(order):
        words = lex.words_of(x[i])[0]
        wrong = " ✗" if res.predictions[i] != y[i] else ""
        st.markdown(f"**#{r + 1}** (test input {int(i)}) label "
                    f"{text_views.class_name(y[i])}, predicted "
                    f"{text_views.class_name(res.predictions[i])}{wrong}: "
                    + " ".join(words[:60]) + (" …" if len(words) > 60 else ""))
st.download_button("Download the ranking (CSV)", key="prio_download",
                   data=res.ranking_table().to_csv(index=False),
                   file_name=f"ranking-{sel.label.replace(' ', '_').replace(':', '')}.csv",
                   mime="text/csv", icon=":material/download:",
                   help="One row per input: its prediction, label, and per signal its rank "
                        "(1 = first) and score.")
