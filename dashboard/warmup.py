"""Warm the server-wide caches in the background: once per server process, from its first run.

Streamlit runs no app code until a browser connects, so the frame starts this thread on its
first run; the pages never wait for it. It calls the same cached functions the pages call
(``st.cache_resource`` / ``st.cache_data`` in ``state``), in the order a visitor needs them:
the default model (which imports TensorFlow), the sample's predictions, Table 1, then the
Coverage page's default profile and views (at every stop of the threshold slider), the Gates
page's layers and the edge profile. A page
that needs a value the thread is computing waits on the same per-key lock instead of computing
it again. ``RNNCON_DASHBOARD_WARMUP=0`` turns it off (the tests use that for isolation).
"""
from __future__ import annotations

import logging
import os
import threading
import time

from dashboard import state

LOG = logging.getLogger("rnncon.dashboard")
ENABLED = os.environ.get("RNNCON_DASHBOARD_WARMUP", "1").lower() not in ("0", "false", "no")

_lock = threading.Lock()
_thread: threading.Thread | None = None
steps: dict[str, float] = {}            # step -> seconds it took (filled as they finish)
failed: dict[str, str] = {}             # step -> error (the page shows it when it gets there)


def start() -> bool:
    """Start the warm-up once per process; True if this call started it."""
    global _thread
    if not ENABLED:
        return False
    with _lock:
        if _thread is not None:
            return False
        _thread = threading.Thread(target=_run, name="rnncon-warmup", daemon=True)
        _thread.start()
        return True


def busy() -> bool:
    """Whether the warm-up is still to come or running (the pages then never wait for what it
    computes: they show what they have and poll)."""
    return ENABLED and (_thread is None or _thread.is_alive())


def _run() -> None:
    sel = state.default_selection()
    if sel.model is None:
        return
    ds = sel.dataset

    def views(granularity: str):
        """The Coverage page's default views of one profile (all shared caches)."""
        profile = state.Profile(sel.model, ds, state.DEFAULT_INPUTS, granularity)
        t = state.default_threshold(ds)
        state.coverage_at(profile, "layer", t)
        state.coverage_bars(profile, "layer", t)
        state.growth_figure(profile, "layer", t)          # the views a click opens
        state.sweep_figure(profile, "layer", t)

    def every_threshold():
        """The slider's other stops (a move then reads a built chart in every session)."""
        profile = state.Profile(sel.model, ds, state.DEFAULT_INPUTS)
        for t in state.THRESHOLD_GRID:
            state.coverage_bars(profile, "layer", t)

    plan = [
        ("model", lambda: state.model(sel.model)),
        ("sample", lambda: state.sample(sel.model, ds, state.SAMPLE_SIZE)),
        ("table1", lambda: (state.table1(), state.accuracy_figure())),
        ("coverage", lambda: views("unit")),
        ("thresholds", every_threshold),
        ("layers", lambda: state.traced_layers(sel.model)),
        ("edge coverage", lambda: views("edge")),
    ]
    start_all = time.perf_counter()
    for name, step in plan:
        t = time.perf_counter()
        try:
            step()
        except Exception as e:  # noqa: BLE001 - a page that needs it will show the error
            failed[name] = f"{type(e).__name__}: {e}"
            LOG.info("warm-up: %s failed: %s", name, failed[name])
            continue
        steps[name] = time.perf_counter() - t
    LOG.info("warm-up of %s done in %.1f s: %s", sel.model, time.perf_counter() - start_all,
             ", ".join(f"{k} {v:.1f} s" for k, v in steps.items()))
