"""Ctrl-C / SIGTERM stop the server within about a second, whatever ran.

Streamlit's own handler stops the runtime, but the interpreter then tears down TensorFlow,
the models and profiles of every page seen (gigabytes on a text model) and waits for the
threads: 10 s or more after a walk on imdb-lstm. A watcher thread (started once per process,
from the first script run) sees the runtime stopping, asks every running job of this server to
stop, marks the runs that have not stopped within ``JOB_GRACE`` seconds cancelled (their
finished outputs stay in their folders, as for any cancelled run), gives Streamlit ``GRACE``
seconds to close its sessions and ends the process with ``os._exit(0)``: nothing left to tear
down is worth waiting for (the run store's files are written atomically, its index commits per
statement). ``RNNCON_FAST_EXIT=0`` turns it off.

When no job is running, the signal itself ends the process: our handler (wrapped around
Streamlit's, in the main thread) exits at once instead of waiting for the runtime to stop.
A signal can only be handled when the main thread gets the interpreter back, and a thread
that imports TensorFlow holds it for up to 1.6 s at a stretch on two loaded cores (the warm-up
does that right after the first page opens): the runtime's stop then took several such
stretches, 2.3 s in all.
"""
from __future__ import annotations

import functools
import logging
import os
import signal
import sys
import threading
import time

from dashboard import jobs

LOG = logging.getLogger("rnncon.dashboard")
ENABLED = os.environ.get("RNNCON_FAST_EXIT", "1").lower() not in ("0", "false", "no")
POLL = 0.05
JOB_GRACE = 0.6          # seconds a running job has to stop by itself
GRACE = 0.5              # then seconds for Streamlit to close its sessions

_lock = threading.Lock()
_thread: threading.Thread | None = None


def start() -> bool:
    """Start the watcher once per process (from a script run); True if this call did."""
    global _thread
    if not ENABLED:
        return False
    with _lock:
        if _thread is not None:
            return False
        try:
            from streamlit.runtime import Runtime
            runtime = Runtime.instance()
        except Exception:  # noqa: BLE001 - no runtime (bare mode): nothing to watch
            return False
        if type(runtime) is not Runtime:     # AppTest's stand-in: not a server to stop
            return False
        # not a daemon: the interpreter joins it before finalizing (a daemon thread would
        # freeze at its next step once the main thread starts tearing down TensorFlow)
        _thread = threading.Thread(target=_watch, args=(runtime,), name="rnncon-shutdown",
                                   daemon=False)
        _thread.start()
        _wrap_signals(runtime)
        return True


def _wrap_signals(runtime) -> None:
    """Put :func:`on_signal` before Streamlit's SIGINT / SIGTERM handlers (handlers are set in
    the main thread: through the runtime's event loop, which runs there)."""
    def wrap():
        for sig in (signal.SIGINT, signal.SIGTERM):
            prev = signal.getsignal(sig)
            if callable(prev) and not isinstance(prev, functools.partial):
                signal.signal(sig, functools.partial(on_signal, prev=prev))
    try:
        runtime._get_async_objs().eventloop.call_soon_threadsafe(wrap)
    except Exception as e:  # noqa: BLE001 - the watcher alone still stops the server
        LOG.info("could not wrap the signal handlers: %s", e)


def on_signal(signum, frame, prev) -> None:
    """No job with a run is running: end the process now; else Streamlit's handler (``prev``)
    stops the runtime and the watcher cancels the jobs (their outputs kept)."""
    _say(f"signal {signum}")
    try:
        busy = jobs.running_runs()
    except Exception:  # noqa: BLE001 - unsure: take the careful way
        busy = 1
    if busy:
        prev(signum, frame)
    else:
        exit_now()


def _stopping(runtime) -> bool:
    """The runtime stops (a signal), or the main thread has ended (any other way out)."""
    from streamlit.runtime.runtime import RuntimeState
    return runtime.state in (RuntimeState.STOPPING, RuntimeState.STOPPED) \
        or not threading.main_thread().is_alive()


def _watch(runtime) -> None:
    while not _stopping(runtime):
        time.sleep(POLL)
    began = time.monotonic()
    _say("stopping seen")
    try:
        stopped = jobs.stop_all(JOB_GRACE, reason="the dashboard server was stopped")
        if stopped:
            LOG.info("server stopping: %d running job(s) cancelled, their outputs kept", stopped)
    except Exception as e:  # noqa: BLE001 - never keep the process alive over this
        LOG.info("server stopping: could not cancel the jobs: %s", e)
    _say("jobs stopped")
    from streamlit.runtime.runtime import RuntimeState
    if runtime.state not in (RuntimeState.STOPPING, RuntimeState.STOPPED):
        return             # the main thread ended some other way: its exit code stands
    while runtime.state != RuntimeState.STOPPED and time.monotonic() - began < JOB_GRACE + GRACE:
        time.sleep(POLL)
    exit_now()


def _say(what):
    if os.environ.get("RNNCON_DEBUG_EXIT"):
        print(f"[shutdown] {time.time():.2f} {what}", file=sys.stderr, flush=True)


def exit_now(code: int = 0) -> None:
    """Flush what was printed and end the process at once."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    _say("exit")
    os._exit(code)
