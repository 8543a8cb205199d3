"""One adjustment to Streamlit's script runner, made once per server process.

After every script run (every rerun, every poll of a fragment) Streamlit calls
``keras.backend.clear_session()``. With TensorFlow that resets the default graph, empties the
eager kernel cache and runs a full garbage collection, under the models this app keeps in
``st.cache_resource`` and under the jobs running in worker threads: polling once a second
then stalls the jobs. The dashboard builds no models in its scripts (models are loaded once and
cached), so it skips that step; the rest of the clean-up (closing matplotlib figures) stays.
"""
from __future__ import annotations

import sys


def _clean_without_keras() -> None:
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        try:
            plt.close("all")
        except Exception:  # noqa: BLE001 - never stop the app over a clean-up
            pass


def keep_keras_session() -> bool:
    """Stop Streamlit from clearing the Keras session after each run; True if patched."""
    try:
        from streamlit.runtime.scriptrunner import script_runner
    except ImportError:
        return False
    if not hasattr(script_runner, "_clean_problem_modules"):
        return False                    # a Streamlit without the step: nothing to do
    script_runner._clean_problem_modules = _clean_without_keras
    return True
