"""RNNCon-Test dashboard: the frame around the pages (served by `dashboard/serve.py`: `make run`)."""
import os
import sys
from pathlib import Path

# TensorFlow's oneDNN kernels allocate from a pool of their own that never shrinks: after an
# IMDB coverage profile it kept about 750 MB the server never used again. With the system
# allocator (the same kernels, the same numbers) that memory goes back (state.release_memory).
# Set before the first import of TensorFlow, which comes after the first page has drawn.
os.environ.setdefault("TF_ONEDNN_USE_SYSTEM_ALLOCATOR", "1")
# coverage updates in chunks of a quarter of the usual size (rnncon_core.coverage.base): an IMDB
# profile's peak above the model 1.4 -> 0.65 GB (edge), 1.0 -> 0.44 GB (unit), in the same time
os.environ.setdefault("RNNCON_CHUNK_DIVISOR", "4")

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:          # `streamlit run` puts only dashboard/ on the path
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from dashboard import perf, shutdown, state, urlstate, warmup  # noqa: E402

# a local icon: a Material icon name here makes the browser fetch the favicon from a font host
# on the internet, and nothing may leave this machine at run time
st.set_page_config(page_title="RNNCon-Test", page_icon=str(ROOT / "assets" / "favicon.png"),
                   layout="wide")

# The page files live in views/, not pages/: Streamlit runs a pages/ folder as an old-style
# multipage app (each file on its own, without this frame) until some session has called
# st.navigation, so a fresh server opened on /generate would skip the frame.
PAGES = [
    st.Page("views/models.py", title="Models", icon=":material/deployed_code:", default=True),
    st.Page("views/coverage.py", title="Coverage", icon=":material/grid_on:"),
    st.Page("views/gates.py", title="Gates", icon=":material/view_timeline:"),
    st.Page("views/generate.py", title="Generate", icon=":material/auto_fix_high:"),
    st.Page("views/campaign.py", title="Campaign", icon=":material/bug_report:"),
    st.Page("views/prioritize.py", title="Prioritize", icon=":material/low_priority:"),
    st.Page("views/perturbations.py", title="Perturbations", icon=":material/scatter_plot:"),
    st.Page("views/retrain.py", title="Retrain", icon=":material/model_training:"),
    st.Page("views/runs.py", title="Runs", icon=":material/history:"),
]
page = st.navigation(PAGES)
shutdown.start()        # once per process: Ctrl-C / SIGTERM end the server within a second

urlstate.restore(page)      # a reload, a second tab, a shared link: the view in its URL
selection = state.current()
with st.sidebar:
    st.markdown("**RNNCon-Test**  \ncontribution coverage for recurrent networks")
    st.caption(f"Model: **{selection.label}**  \nData: **{state.data_label(selection.dataset)}**  \n"
               "(change them on the Models page)")

try:
    with perf.rerun(page.title, perf.session_id()):
        page.run()
finally:
    urlstate.publish(page)  # the address bar holds the view (model, data, run, settings)
    # once per server, after the first page has drawn what it can (importing TensorFlow in
    # a thread holds the interpreter for seconds): the default model and views, in background
    warmup.start()
