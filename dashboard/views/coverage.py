"""Coverage: RConC beside NC per layer, the threshold slider, HS_C and CS_C; the profile's
settings in a popover; on demand the growth curves, the sweep, the threshold-selection helper,
CS_C's sections and every criterion."""
import pandas as pd
import streamlit as st

from dashboard import images, perf, state, urlstate
from rnncon_core.coverage import needs_profile, title
from rnncon_core.errors import RNNConError
from rnncon_core.reports import charts
from rnncon_core.reports import html as report

st.title("Coverage")
st.caption("RConC counts the contributions (a neuron's output times a weight) that some test "
           "input activates above the threshold; NC counts neurons. Moving the threshold reads "
           "the kept maxima: no new forward pass.")

sel = state.require_model()

# The profile's settings sit in a popover whose label shows them: its widgets are drawn only
# when it is opened, so a new tab's first view loads and lays out five widgets fewer.
ss = st.session_state
GRAN_WORDS = {"unit": "a contribution per gate unit", "edge": "a contribution per weight"}
settings = st.popover(f"Settings: {ss.get('cov_n', state.DEFAULT_INPUTS)} test inputs · "
                      f"{GRAN_WORDS[ss.get('cov_gran', 'unit')]} · scaled per "
                      f"{ss.get('cov_norm', state.DEFAULT_NORM[0])} "
                      f"({ss.get('cov_values', state.DEFAULT_NORM[1])}) · "
                      f"rows by {ss.get('cov_by', 'layer')}", icon=":material/tune:",
                      help="The measurement's settings (the profile): open to change them.")
ss.setdefault("cov_n", state.DEFAULT_INPUTS)        # or the URL's (urlstate.restore)
with settings:
    n_inputs = st.select_slider("Test inputs", state.INPUT_CHOICES, key="cov_n",
                                help="The first N inputs of the test split.")
    granularity = st.radio("Granularity", ["unit", "edge"], horizontal=True, key="cov_gran",
                           help="unit: one contribution per gate unit, step and part (the "
                                "paper's Table 1 count); edge: one per source neuron and weight "
                                "(Definition 1).")
    normalize = st.radio("Normalization", state.NORMALIZATIONS, horizontal=True, key="cov_norm",
                         help="The scope of each input's min-max normalization (Eq. 3): step = "
                              "one matmul (one layer, one time step, one part; the default), "
                              "layer = all steps of a layer, model = all of the input's "
                              "contributions. model + signed is Eq. 3 as written.")
    values = st.radio("Values", state.VALUES, horizontal=True, key="cov_values",
                      help="abs: the magnitudes |contribution| are normalized (the default); "
                           "signed: the signed values.")
    by = st.radio("RConC rows", ["layer", "source"], horizontal=True, key="cov_by",
                  help="layer: where the contribution arrives; source: the layer whose "
                       "neurons emit it (the paper's Figure 7 rows, with the input layer).")
if (normalize, values) == state.EQ3_AS_WRITTEN:
    st.caption(":material/menu_book: model + signed: **the paper's scaling formula as written "
               "(Eq. 3)**")
profile = state.Profile(sel.model, sel.dataset, n_inputs, granularity, normalize, values)

try:                  # the first time on this server, its stages are shown as they pass
    crits = state.load_with_progress(sel.model, sel.dataset,
                                     f"the coverage profile of {n_inputs} test inputs",
                                     lambda: state.coverage(profile))
except RNNConError as e:
    state.show_error(e)
    st.stop()

if "cov_threshold" not in st.session_state:
    st.session_state["cov_threshold"] = state.default_threshold(sel.dataset)


MORE = {"growth": "Growth with inputs", "sweep": "Coverage vs threshold",
        "select": "Threshold selection", "sections": "CS_C sections", "every": "Every criterion"}


@st.fragment
def at_threshold():
    """The slider and what it drives: reruns on its own when the slider moves. Everything it
    shows is read from server-wide caches (one computation per profile and threshold). The
    first view is the headline figures and the per-layer bars (inline SVG, no chart script);
    the Plotly charts and the tables load only when their view is picked."""
    t = st.slider("Threshold", 0.0, 0.95, step=0.05, key="cov_threshold",
                  help="A contribution (or neuron) counts as covered when its normalized "
                       "value exceeds this for some input.")
    t = round(t, 2)             # the cache key of the warm-up's figures at each stop
    urlstate.sync()             # this fragment's rerun: the address bar follows the slider
    with perf.rerun("Coverage · threshold", perf.session_id()):
        view = state.coverage_at(profile, by, t)
        rate, covered, total = view["rconc"]
        figures = [("RConC", f"{rate:.2%}", f"{covered:,} of {total:,} contributions")]
        rate, covered, total = view["nc"]
        figures.append(("NC", f"{rate:.2%}", f"{covered:,} of {total:,} neurons (layer "
                                             f"outputs, no input pixels)"))
        figures.append(("Hidden-state coverage (HS_C, RNN-Test)", f"{view['hsc']:.2%}",
                        "hidden-state coverage: units among the top k of some hidden vector "
                        "(no threshold)"))
        if view["csc_boundary"] is not None:
            figures.append(("Cell-state boundary coverage (CS_C, RNN-Test)",
                            f"{view['csc_boundary']:.2%}",
                            "cell-state coverage: share of LSTM cells some input drove into an "
                            "outer section of tanh(c) (no threshold)"))
        else:
            figures.append(("Cell-state coverage (CS_C, RNN-Test)", "—", "only for LSTM models (it reads the cell "
                                                   "state); this model has none"))
        # the headline as HTML, not metric widgets: one Markdown block (the bars' script)
        st.markdown(images.headline(figures), unsafe_allow_html=True)
        left, right = st.columns([3, 2], gap="large")
        with left.container(key="cov_by_layer"):
            st.markdown(state.coverage_bars(profile, by, t), unsafe_allow_html=True)
        one_unit_note(right, granularity)
        right.caption(f"{view['n_inputs']} inputs of the {state.data_label(sel.dataset)} test split, model "
                      f"{sel.label}, {granularity} granularity, {normalize} normalization of "
                      f"{values} values"
                      + (" (the paper's formula as written, Eq. 3)." if (normalize, values) == state.EQ3_AS_WRITTEN
                         else ".") + " Hover a bar for covered / total.")
        # the report and the other views sit in a popover (drawn only when opened), so a new
        # tab's first view loads no download-button or pills script and shows no placeholder
        # pulsing while those scripts arrive
        with st.popover("More views · report", icon=":material/add_chart:"):
            more = st.pills("Views", list(MORE), format_func=MORE.get, selection_mode="multi",
                            key="cov_more", help="Each opens below the bars, for this session "
                                                 "only. The interactive charts load Plotly's "
                                                 "script in this tab the first time.")
            st.download_button("Download report (HTML)", key="cov_report",
                               data=lambda: coverage_report(t, source),
                               file_name=f"coverage-"
                                         f"{sel.label.replace(' ', '_').replace(':', '')}"
                                         f"-{t:g}.html", mime="text/html", on_click="ignore",
                               icon=":material/download:",
                               help="One self-contained HTML file (interactive figures, "
                                    "tables, settings, versions) that opens offline in a "
                                    "browser.")
        if "growth" in more:
            st.plotly_chart(state.growth_figure(profile, by, t), width="stretch",
                            key="cov_growth")
        if "sweep" in more:
            st.subheader("Coverage vs threshold (Figures 7 and 8)")
            st.plotly_chart(state.sweep_figure(profile, by, t), width="stretch",
                            key="cov_sweep")
        if {"select", "sections"} & set(more):
            left, right = st.columns(2)
            if "select" in more:
                with left:
                    threshold_selection()
            if "sections" in more:
                with right:
                    cell_sections(t)
        if "every" in more:
            every_criterion()


def one_unit_note(where, granularity: str) -> None:
    """What NC and RConC mean for a layer of one neuron (a binary classifier's output)."""
    one = [layer["name"] for layer in state.traced_layers(sel.model)
           if layer["kind"] == "dense" and layer["units"] == 1]
    if not one:
        return
    names = ", ".join(f"`{n}`" for n in one)
    text = (f"**One-unit output {names}** (a binary classifier's sigmoid): NC reads it as "
            f"P(positive), covered at a threshold when some input gives a higher probability.")
    if granularity == "unit":
        text += (" RConC at unit granularity has one contribution per input there (the sum "
                 "over its sources) and min-max scaling (Eq. 3) needs two values, so its row "
                 "stays at 0 %: pick the edge granularity (Profile settings) to see one "
                 "contribution per source neuron.")
    where.info(text, icon=":material/info:")


def coverage_report(t: float, source: str) -> str:
    """The report at threshold t (called by the download, outside this session's run: it
    reads only the server-wide caches and the values passed in)."""
    facts = {"model": sel.label, "data": f"{state.data_label(sel.dataset)}: the first {n_inputs} test inputs",
             "data source": source}
    settings = {"threshold": t, "granularity": granularity, "normalize": normalize,
                "values": values, "RConC rows": by, "inputs": n_inputs}
    return report.coverage(state.coverage_at(profile, by, t), state.sweep(profile, by),
                           facts, settings)


def threshold_selection() -> None:
    st.subheader("Threshold selection (§5.2)")
    st.caption("Among candidate thresholds, take the one where RConC differs most between "
               "the labels.")
    candidates = st.multiselect("Candidates", list(state.THRESHOLD_GRID[1:]),
                                default=[0.1, 0.25, 0.5, 0.75], key="cov_candidates")
    if st.button("Suggest a threshold", key="cov_suggest", icon=":material/tune:"):
        st.session_state["cov_suggest_on"] = True
    if st.session_state.get("cov_suggest_on"):
        try:
            best, table = state.threshold_choice(profile, tuple(sorted(candidates)))
        except RNNConError as e:
            state.show_error(e)
            return
        scores = pd.DataFrame({"threshold": table["threshold"],
                               "score": table["max_difference"]})
        st.plotly_chart(charts.threshold_selection(scores, chosen=best), width="stretch",
                        key="cov_selection")

        def use(best=best):
            st.session_state["cov_threshold"] = best
        st.button(f"Use {best:g}", on_click=use, key="cov_use", type="primary")


def cell_sections(t: float) -> None:
    st.subheader("RNN-Test's cell-state sections (CS_C)")
    if crits["CS_C"] is None:
        st.info("CS_C reads the LSTM cell state; this model has no LSTM layer.")
        return
    # five rows: a static table; "≥", as ">=" would start a Markdown quote in the cell
    sections = state.coverage_at(profile, by, t)["sections"]
    st.table(sections.assign(section=sections["section"].str.replace(">=", "≥"),
                             covered=sections["covered"].map("{:,}".format),
                             cells=sections["cells"].map("{:,}".format),
                             rate=sections["rate"].map("{:.1%}".format),
                             boundary=sections["boundary"].map({True: "yes", False: ""}))
             .set_index("section"))


def every_criterion() -> None:
    st.subheader("Every criterion on the same inputs")
    st.caption("testRNN's, DeepStellar's and DeepGauge's criteria as their authors' code "
               "defines them (docs/criteria.md) beside RConC, NC and RNN-Test's, each with its "
               "default parameters over the same test inputs. The profile-based ones read the "
               "model's training profile, built here from the data set's training split the "
               "first time (a minute or so).")
    if st.button("Measure every criterion", key="cov_every", icon=":material/table_chart:"):
        st.session_state["cov_every_on"] = True
    if not st.session_state.get("cov_every_on"):
        return
    bar = st.progress(0.0, text="Measuring every criterion…")

    def progress(i, n, name):
        extra = " (builds the training profile the first time)" if needs_profile(name) else ""
        bar.progress(i / n, text=f"{i + 1} of {n}: {title(name)} ({name}){extra}")
    try:
        table = state.every_criterion(sel.model, sel.dataset, n_inputs, progress)
    except RNNConError as e:
        bar.empty()
        state.show_error(e)
        return
    bar.empty()
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config={"criterion": st.column_config.TextColumn("criterion"),
                                "id": st.column_config.TextColumn("id", width="small"),
                                "rate": st.column_config.NumberColumn(format="%.4f")})


source = state.dataset(sel.dataset).source
at_threshold()
