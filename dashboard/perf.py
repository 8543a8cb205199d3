"""Per-rerun timings, written to the server log when ``RNNCON_DASHBOARD_DEBUG=1``.

Each script run (and each fragment run) of a session logs one line: the page, the session, the
wall time of the run and of every timed call in it (cached engine calls, figure builders)::

    rnncon.dashboard rerun Coverage session=3f2a 0.041 s | coverage 0.000, view 0.002, ...

A cache hit shows as a few milliseconds, a miss as the time of the computation. Without the
flag the timers cost one attribute read.
"""
from __future__ import annotations

import functools
import logging
import os
import threading
import time
from contextlib import contextmanager

ENABLED = os.environ.get("RNNCON_DASHBOARD_DEBUG", "").lower() not in ("", "0", "false", "no")
LOG = logging.getLogger("rnncon.dashboard")
if ENABLED and not LOG.handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
    LOG.addHandler(_handler)
    LOG.setLevel(logging.INFO)
    LOG.propagate = False
_local = threading.local()


def session_id() -> str:
    """This browser session's id (for the log lines), or "" outside a script run."""
    if not ENABLED:
        return ""
    from streamlit.runtime.scriptrunner import get_script_run_ctx
    ctx = get_script_run_ctx(suppress_warning=True)
    return ctx.session_id if ctx else ""


def _calls() -> list | None:
    return getattr(_local, "calls", None)


@contextmanager
def rerun(page: str, session: str = ""):
    """Time one script or fragment run and log it with the calls timed inside."""
    if not ENABLED or _calls() is not None:          # not on, or nested in a timed run
        yield
        return
    _local.calls = []
    start = time.perf_counter()
    try:
        yield
    finally:
        total = time.perf_counter() - start
        calls, _local.calls = _local.calls, None
        parts = ", ".join(f"{name} {sec:.3f}" for name, sec in calls)
        LOG.info("rerun %s session=%s %.3f s | %s", page, session[:8], total, parts)


def timed(name: str | None = None):
    """Decorator: record the call's wall time in the current run's line (if timing is on)."""
    def deco(fn):
        label = name or fn.__name__

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            calls = _calls()
            if calls is None:
                return fn(*args, **kwargs)
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                calls.append((label, time.perf_counter() - start))
        return wrapper
    return deco
