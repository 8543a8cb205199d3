"""Generate: start a coverage-guided generation run, watch it, see Table 2 and the pairs."""
import streamlit as st

from dashboard import forms, jobs, state, tables, text_views
from rnncon_core.reports import charts, results
from rnncon_core.reports import html as report
from rnncon_core import data, zoo
from rnncon_core import generate as gen
from rnncon_core.errors import RNNConError
from rnncon_core.runs import display_name
from rnncon_core.jobs import run_generation

st.title("Generate")
st.caption("Start from seeds the model predicts right, perturb them (guided by the criterion "
           "of the method) and keep what the model now gets wrong: adversarial inputs.")

sel = state.require_model()
kind = state.kind_of(sel.dataset)
try:
    layers = state.traced_layers(sel.model)
except RNNConError as e:
    state.show_error(e)
    st.stop()

methods = [m for m, k in gen.list_generators().items() if k == kind]
method = st.selectbox("Method", methods, key="gen_method",      # the paper's method first
                      index=methods.index("rconc") if "rconc" in methods else 0,
                      format_func=lambda m: f"{m}: {forms.description(m)}")
cls = gen.generator_class(method)
chosen = forms.draw_controls(cls, kind)       # e.g. synonym-gradient's objective
layers_of = {"all": [layer["name"] for layer in layers],
             "recurrent": [layer["name"] for layer in layers if layer["kind"] != "dense"]}

with st.form("gen_form"):
    st.markdown(f"**Model:** {sel.label} · **seeds from:** the {state.data_label(sel.dataset)} test split")
    n_seeds = st.columns(4)[0].number_input("Seeds", 1, 2000, 20, key="gen_seeds",
                                            help="The first N test inputs the model predicts "
                                                 "right.")
    values = chosen | forms.draw(cls, kind, chosen,
                                 {"threshold": state.default_threshold(sel.dataset)}, layers_of)
    others = []
    if "others" in cls.accepts:                   # differential: the models compared
        own = zoo.ARCHITECTURES[sel.model].dataset if sel.shipped else \
            data.default_dataset(kind)
        same = [n for n in state.shipped() if n != sel.model
                and zoo.ARCHITECTURES[n].dataset == own]
        others = st.multiselect("Other models", same, default=same[:1], key="gen_others")
    run_name, run_tags = jobs.name_fields("gen")
    submitted = st.form_submit_button("Start", type="primary", icon=":material/play_arrow:")

if submitted:
    try:
        params = forms.generation_params(cls, values)
    except RNNConError as e:
        state.show_error(e)
        st.stop()
    if "others" in cls.accepts and not others:
        st.error("Differential testing needs at least one other model with the same inputs; "
                 "none is shipped yet.")
    else:
        jobs.launch("generate", run_name or f"{method} on {sel.label} · {int(n_seeds)} seeds",
                    run_generation, model=sel.model, method=method, n_seeds=int(n_seeds),
                    dataset=sel.dataset, batch_size=forms.batch_size(int(n_seeds)),
                    **({"others": list(others)} if others else {}), **params,
                    run_name=run_name or None, run_tags=run_tags)

jobs.job_panel("generate", show_key="gen_show", model=sel.model)

store = jobs.store()
runs = results.generation_runs(store, sel.model)
st.subheader("Table 2: generation runs of this model")
if not runs:
    st.info("No finished generation run for this model yet: start one above.")
    st.stop()
table = tables.table2(runs) if kind == "image" else text_views.table2(runs)
table["run"] = [display_name(r) for r in runs]      # its name, or what and when; short id
every = st.toggle("All columns", False, key="gen_all_columns",
                  help="The run's target layer, constraint and every distance or check; the "
                       "default columns fit a 1,280 px screen.")
st.dataframe(table, hide_index=True, width="stretch",
             column_order=None if every else tables.table2_order(table, kind),
             column_config=tables.TABLE2_COLUMNS if kind == "image"
             else text_views.table2_columns())

st.subheader("Seeds and generated inputs")
info = jobs.run_picker("Run", runs, key="gen_show")
if info is None:
    st.info("Every run of this model so far is partial (cancelled or failed): pick one above "
            "to see what it finished.")
    st.stop()
run_id = info.run_id
outputs = state.run_outputs(info)
st.download_button("Download report (HTML)", lambda: report.generation(info, outputs),
                   key="gen_report", file_name=f"{run_id}.html", mime="text/html",
                   on_click="ignore", icon=":material/download:",
                   help="This run as one self-contained HTML file that opens offline.")
c = st.columns([1, 1, 2])
only_adv = c[0].toggle("Only adversarial inputs", True, key="gen_only_adv")
rows = results.gallery_order(outputs, only_adv)
if len(rows) == 0:
    st.info("This run found no adversarial input: switch off the filter to see every pair.")
    st.stop()
shown = rows[:c[1].number_input("Pairs shown", 1, 24, min(6, len(rows)), key="gen_n_pairs")]
caps = results.captions(outputs, shown)
if kind == "image":
    st.plotly_chart(charts.image_triplets(data.to_images(outputs["x_seed"][shown]),
                                          data.to_images(outputs["x_gen"][shown]), caps),
                    width="stretch", key="gen_gallery")
else:
    text_views.show_pairs(outputs, shown, state.dataset(sel.dataset).vocab)
