"""Background jobs: generation and retraining run in worker threads, the run store is the truth.

A job is the engine's own entry point (``run_generation``, ``run_retraining``) called in a
thread with a run store that notes the id of the run it creates. The worker never calls
Streamlit; the page polls the store (``progress.json``, the run's status and error) from a
``st.fragment(run_every=...)``, so progress survives reruns and page reloads, a crashing job
shows its error on its own card, cancelling goes through the store (any session, any process),
and a restarted server still lists every run.
"""
from __future__ import annotations

import calendar
import functools
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import streamlit as st

from dashboard import state
from dashboard.uploads import public
from rnncon_core import runs, zoo
from rnncon_core.errors import InputError, RNNConError
from rnncon_core.runs import Run, RunStore, display_name

POLL_SECONDS = 1.0
ACTIVE = ("starting", "running")


@dataclass
class Job:
    """One job started by this server process."""
    job_id: str
    kind: str
    label: str
    started: float = field(default_factory=time.time)
    run_id: str | None = None       # set by the engine's store.start(...)
    error: str | None = None        # an error raised before (or outside) the run
    thread: threading.Thread | None = field(default=None, repr=False)
    model: str | None = None        # the model it works on (cards are per model)
    session: str = ""               # the browser session that started it
    note: str = ""                  # the engine's last log line before its run began

    @property
    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


_JOBS: dict[str, Job] = {}
_LOCK = threading.Lock()


def store() -> RunStore:
    """The server's run store (one per root, shared by every session: opening one checks the
    folder and the index, not something to do on every poll of a card)."""
    return _store(Path(runs.RUNS_DIR))


@functools.lru_cache(maxsize=4)
def _store(root: Path) -> RunStore:
    return RunStore(root)


def _job_store(job: Job, name: str | None = None, tags=()) -> RunStore:
    """The store a job's engine call writes to: the server's root, a callback that hands
    the job the id of the first run it starts, and the user's name and tags for its runs."""
    def started(run) -> None:
        if job.run_id is None:
            job.run_id = run.run_id
    return RunStore(store().root, on_start=started, name=name, tags=tags)


def start(kind: str, label: str, fn: Callable[..., Any], /, **kwargs) -> Job:
    """Run ``fn(**kwargs, store=...)`` in a worker thread; return its Job at once.
    ``run_name`` / ``run_tags`` (taken out of kwargs): the user's name and tags for its run.
    ``log=True``: ``fn`` gets ``log=`` a callback whose last line the job's card shows while
    it prepares (e.g. a campaign fitting its validity checks)."""
    name, tags = kwargs.pop("run_name", None), kwargs.pop("run_tags", ())
    job = Job(job_id=secrets.token_hex(4), kind=kind, label=label,
              model=None if kwargs.get("model") is None else str(kwargs["model"]),
              session=_session())
    if kwargs.get("log") is True:
        kwargs["log"] = lambda line: setattr(job, "note", str(line))

    def work():
        try:
            fn(**kwargs, store=_job_store(job, name, tags))
        except RNNConError as e:          # bad input, cancelled, missing part: its message
            job.error = str(e)
        except Exception as e:            # a crash: the run (if any) holds the traceback
            job.error = one_line(e)

    job.thread = threading.Thread(target=work, name=f"rnncon-{kind}-{job.job_id}", daemon=True)
    with _LOCK:
        _JOBS[job.job_id] = job
    job.thread.start()
    return job


def _session() -> str:
    """The id of the browser session whose script runs now ("" outside one)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx
    ctx = get_script_run_ctx(suppress_warning=True)
    return ctx.session_id if ctx else ""


def one_line(e: BaseException) -> str:
    """An unexpected error as one line (its type and the last line of its message): the
    traceback stays in the run's error.txt, never on the page."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    last, name = (lines[-1] if lines else "no message"), type(e).__name__
    return last if last.startswith(f"{name}:") else f"{name}: {last}"


def get(job_id: str) -> Job | None:
    return _JOBS.get(job_id)


def cancel(run_id: str) -> None:
    """Ask a running run to stop at its next check (through the store)."""
    try:
        store().request_cancel(run_id)
    except InputError:
        pass                               # it finished meanwhile: nothing to cancel


def running_runs() -> int:
    """How many jobs of this server are running with a run in the store."""
    return sum(1 for j in list(_JOBS.values()) if j.alive and j.run_id)


def stop_all(grace: float = 0.6, reason: str = "the server was stopped") -> int:
    """Cancel every running job of this server (the server is stopping): ask each run to stop,
    wait up to ``grace`` seconds for the jobs to end by themselves (a cancelled run keeps what
    it finished), then mark the runs still running cancelled, outputs kept. Returns how many
    runs were cancelled."""
    live = [j for j in list(_JOBS.values()) if j.alive and j.run_id]
    for job in live:
        cancel(job.run_id)
    deadline = time.monotonic() + grace
    for job in live:
        job.thread.join(max(0.0, deadline - time.monotonic()))
    for job in live:
        try:
            if store().get(job.run_id).status == "running":
                Run(store(), job.run_id).fail(f"JobCancelled: {reason}; what the run had "
                                              f"finished is kept", status="cancelled")
        except RNNConError:
            pass
    return len(live)


# ---------------------------------------------------------------- what a card shows

@dataclass
class Card:
    title: str
    state: str                     # starting, running, finished, failed, cancelled
    run_id: str | None = None
    done: int = 0
    total: int = 0
    message: str = ""
    unit: str = ""                 # what done and total count (seeds, s, model calls)
    elapsed: float = 0.0
    error: str | None = None
    mine: bool = True              # started by this browser session
    origin: str = ""               # who started it, when not this session (said on the card)
    model: str | None = None       # the model it works on ("Show its results" switches to it)
    ident: str = ""                # the job's id (or the run's, for a run started elsewhere)
    rate: float | None = None      # items per second over the recent batches
    busy: float | None = None      # seconds since its run started (elapsed counts the loading)

    @property
    def count(self) -> str:
        return Run.count_text(self.done, self.total, self.unit)

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 0.0

    @property
    def eta(self) -> float | None:
        """From the recent batches' rate; before two batches, from the first batch's pace
        (the run's time so far, its loading left out when known); None before any."""
        return eta_seconds(self.elapsed if self.busy is None else self.busy, self.done,
                           self.total, self.rate)


def eta_seconds(elapsed: float, done: int, total: int,
                rate: float | None = None) -> float | None:
    """Seconds left: at the measured rate of the recent batches (items per second) when there
    is one, else at the pace so far (None until something is done). The pace so far counts the
    start-up (loading the model, tracing the first batch) and overestimates early on."""
    if done <= 0 or total <= 0:
        return None
    if rate is not None and rate > 0:
        return max(0.0, (total - done) / rate)
    if elapsed <= 0:
        return None
    return max(0.0, elapsed * (total - done) / done)


class Pace:
    """The measured rate of a run's recent batches: when each new ``done`` value was first seen
    (by any session polling the run; one tracker per server), over the last WINDOW seconds.
    Only batches after the first count: the first one carries the start-up."""
    WINDOW = 60.0

    def __init__(self):
        self._seen: dict[str, list[tuple[float, int]]] = {}
        self._lock = threading.Lock()

    def observe(self, run_id: str, done: int, now: float | None = None) -> float | None:
        """Note the run's progress; return its recent rate (items per second), or None until
        two batches have been seen finishing."""
        now = time.monotonic() if now is None else now
        with self._lock:
            seen = self._seen.setdefault(run_id, [])
            if done > 0 and (not seen or done > seen[-1][1]):
                seen.append((now, done))
            recent = [p for p in seen if now - p[0] <= self.WINDOW]
            if len(recent) < 2:
                recent = seen[-2:]
            if len(recent) < 2:
                return None
            (t0, d0), (t1, d1) = recent[0], recent[-1]
            return (d1 - d0) / (t1 - t0) if t1 > t0 else None

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._seen.pop(run_id, None)


PACE = Pace()


def _created_epoch(created: str) -> float:
    return calendar.timegm(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ"))


def card_for_run(info, title: str, mine: bool, started: float | None = None,
                 origin: str = "") -> Card:
    progress = info.progress() or {}
    end = time.time() if info.status == "running" else _created_epoch(info.updated)
    began = started if started is not None else _created_epoch(info.created)
    error = None
    if info.status == "failed":
        error = info.error or "the job failed"
    done = int(progress.get("done", 0))
    rate = PACE.observe(info.run_id, done) if info.status == "running" else None
    return Card(title=title, state=info.status, run_id=info.run_id, done=done,
                total=int(progress.get("total", 0)), message=progress.get("message", ""),
                unit=progress.get("unit", ""),
                elapsed=max(0.0, end - began), error=error, mine=mine, ident=info.run_id,
                rate=rate, origin=origin, model=info.model,
                busy=max(0.0, end - _created_epoch(info.created)))


def card_for_job(job: Job) -> Card:
    card = _card_for_job(job)
    card.ident = job.job_id
    card.model = card.model or job.model
    return card


def _card_for_job(job: Job) -> Card:
    if job.run_id is not None:
        try:
            info = store().get(job.run_id)
        except RNNConError as e:
            return Card(job.label, "failed", job.run_id, error=str(e))
        # elapsed from the job's start: the loading before its run began counts, once
        card = card_for_run(info, job.label, True, started=job.started)
        if job.error and card.state == "failed":
            card.error = job.error
        if job.error and card.state == "running" and not job.alive:
            card.state, card.error = "failed", job.error
        return card
    if job.error:
        return Card(job.label, "failed", error=job.error, elapsed=time.time() - job.started)
    if job.alive:
        return Card(job.label, "starting", message=f"{job.note or 'loading the model and the data'} "
                    f"({_fmt_seconds(time.time() - job.started)} so far)…",
                    elapsed=time.time() - job.started)
    return Card(job.label, "failed", error="the job ended without creating a run")


RECENT_SECONDS = 600       # a run that ended this long ago still has its card


def cards(kind: str, job_ids: list[str], now: float | None = None,
          model: str | None = None) -> list[Card]:
    """This session's jobs of a kind (newest first), then the runs of that kind that other
    sessions (or this one before a reload) started and that are running or ended in the last
    RECENT_SECONDS: a card outlives its job's end in every session. With ``model``, only the
    jobs and runs of that model. A run another run started (a retraining's held-out sets) has
    no card of its own: it is part of its parent's job."""
    now = time.time() if now is None else now
    out, known = [], set()
    for job_id in reversed(job_ids):
        job = get(job_id)
        if job is None or job.kind != kind or (model is not None and job.model is not None
                                               and job.model != str(model)):
            continue
        out.append(card_for_job(job))
        if job.run_id:
            known.add(job.run_id)
    for info in store().list(kind=kind, children=False,
                             model=None if model is None else str(model)):
        if info.run_id in known:
            continue
        if info.status != "running" and now - _created_epoch(info.updated) > RECENT_SECONDS:
            continue
        origin = started_by(info.run_id)
        out.append(card_for_run(info, _run_title(info), mine=not origin, origin=origin))
    return out


def _run_title(info) -> str:
    return f"{display_name(info)} on {public(info.model)}"   # an upload by name, not path


def started_by(run_id: str, session: str | None = None) -> str:
    """Who started a run, said only when it is true: "" for a job of this browser session,
    else "another tab (or this one before a reload)" for a job of this server, else "outside
    this dashboard" (the command line, or before the server restarted)."""
    session = _session() if session is None else session
    job = next((j for j in list(_JOBS.values()) if j.run_id == run_id), None)
    if job is None:
        return "outside this dashboard (the command line, or before a restart)"
    if session and job.session == session:
        return ""
    return "another tab (or this one before a reload)"


# ---------------------------------------------------------------- the Streamlit side

def session_jobs() -> list[str]:
    return st.session_state.setdefault("jobs", [])


def name_fields(key: str) -> tuple[str, str]:
    """The form's optional name and tags of the run (two text boxes side by side)."""
    c = st.columns(2)
    name = c[0].text_input("Name of the run (optional)", key=f"{key}_name", max_chars=80,
                           placeholder="e.g. baseline rconc",
                           help="Shown instead of the run's id everywhere.")
    tags = c[1].text_input("Tags (optional, comma separated)", key=f"{key}_tags",
                           placeholder="e.g. demo, mnist")
    return name, tags


def launch(kind: str, label: str, fn: Callable[..., Any], /, **kwargs) -> Job:
    """Start a job and remember it in this browser session."""
    job = start(kind, label, fn, **kwargs)
    session_jobs().append(job.job_id)
    return job


def _fmt_seconds(s: float | None) -> str:
    if s is None:
        return "…"
    s = int(round(s))
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


PARTIAL_NOTE = "what it had finished is kept (a partial run: never chosen by default)"


def render_card(card: Card, key: str, show_key: str | None = None,
                cancelled_note: str = PARTIAL_NOTE) -> None:
    """One job's card. A finished (or cancelled) run's card has a button that shows its
    results (it sets the page's results selector, ``show_key``); ``cancelled_note`` says what
    becomes of a cancelled run of this kind."""
    with st.container(border=True, key=f"card-{key}"):
        short = card.run_id.rsplit("-", 1)[-1] if card.run_id else ""
        head = f"**{card.title}**" + (f" · `{short}`" if short and short not in card.title
                                      else "")
        if not card.mine and card.origin:
            head += f" · started in {card.origin}"
        st.markdown(head)
        if card.state in ACTIVE:
            text = f"{card.state}: {card.count}" if card.total else card.state
            text += f" · {card.message}" if card.message else ""
            text += f" · elapsed {_fmt_seconds(card.elapsed)}"
            if card.state == "running" and card.total and card.done >= card.total:
                text += " · the last stage (its time is not in the estimate)…"
            elif card.state == "running" and card.total:
                text += (f" · about {_fmt_seconds(card.eta)} left"
                         + ("" if card.rate is not None else " (from the first batch)")
                         if card.eta is not None else " · estimating the time left…")
            st.progress(card.fraction, text=text)
            if card.run_id and st.button("Cancel", key=f"cancel-{key}-{card.run_id}",
                                         icon=":material/cancel:"):
                cancel(card.run_id)
                st.toast(f"Cancel requested for {card.run_id}")
            return
        if card.state == "finished":
            st.success(f"finished in {_fmt_seconds(card.elapsed)}", icon=":material/check:")
        elif card.state == "cancelled":
            what = card.count if card.total else "its start"
            what += f" ({card.message})" if card.message and card.total else ""
            st.warning(f"cancelled after {what}; {cancelled_note}", icon=":material/cancel:")
        else:
            st.error(f"failed: {card.error}", icon=":material/error:")
        if show_key and card.run_id and card.state in ("finished", "cancelled"):
            st.button("Show its results", key=f"show-{key}-{card.run_id}",
                      icon=":material/arrow_downward:", on_click=_show,
                      args=(show_key, card.run_id, card.model))


def _show(show_key: str, run_id: str, model: str | None = None) -> None:
    """Show a card's run: its model becomes the selection (when it is another shipped one)
    and the page's results selector picks the run."""
    if model and model != state.current().model and model in state.shipped():
        st.session_state["selection"] = state.Selection(model, model,
                                                        zoo.ARCHITECTURES[model].dataset)
    st.session_state[show_key] = run_id


def job_panel(kind: str, show_key: str | None = None, limit: int = 4,
              model: str | None = None, cancelled_note: str = PARTIAL_NOTE,
              follow_running: bool = False, body: Callable[[list[Card]], None] | None = None,
              live: bool = False, every: float = POLL_SECONDS) -> None:
    """The cards of a kind's jobs, polled while any of them is active. When one of them
    finishes (started here or in another session), the whole page reruns with its results
    selected in ``show_key`` (cancelled and failed runs are never selected by themselves).
    ``follow_running``: as soon as a job started in this session has its run, the page
    reruns with that run selected (a page that draws a running run live, e.g. campaigns).
    ``body``: what the page draws below the cards in the same fragment, from the same look
    at the store (it gets the cards and may set their ``message`` before they are drawn), so
    the cards and the results agree at every poll; ``live``: poll even with no active card
    (the shown run is running); ``every``: seconds between polls."""
    watch = st.session_state.setdefault("jobs_watch", {})
    followed = st.session_state.setdefault("jobs_followed", set())

    def note(now: list[Card]) -> set:
        """Remember what is active; return what ended since the last look (and, when
        following, this session's runs that started since)."""
        still = {c.ident for c in now if c.state in ACTIVE}
        ended = watch.get(kind, set()) - still
        watch[kind] = still
        finished = [c.run_id for c in now if c.ident in ended and c.run_id
                    and c.state == "finished"]
        if finished and show_key:
            st.session_state[show_key] = finished[0]
        for c in now:
            if c.ident in ended and c.run_id:
                PACE.forget(c.run_id)
        started = []
        if follow_running and show_key:
            started = [c for c in now if c.mine and c.state in ACTIVE and c.run_id
                       and c.run_id not in followed]
            followed.update(c.run_id for c in started)
            if started:
                st.session_state[show_key] = started[0].run_id
        return ended | {c.ident for c in started}

    note(cards(kind, session_jobs(), model=model)[:limit])
    # also poll while a job of this kind runs in this server but has no run yet (started
    # from a session that was reloaded since): its card appears as soon as the run exists
    active = bool(watch[kind]) or any(j.kind == kind and j.alive and j.run_id is None
                                      for j in list(_JOBS.values()))

    def panel():
        now = cards(kind, session_jobs(), model=model)[:limit]
        if note(now):                      # ended while only this fragment was rerunning
            st.rerun()
        box = st.container()
        if body is not None:
            body(now)
        with box:
            for i, card in enumerate(now):
                render_card(card, key=f"{kind}-{i}", show_key=show_key,
                            cancelled_note=cancelled_note)

    st.fragment(panel, run_every=every if active or live else None)()


# ---------------------------------------------------------------- choosing a run to show

def run_picker(label: str, runs: list, key: str, where=None, **kwargs):
    """A select box over runs (newest first) that starts on the newest complete run and never
    on a partial one; picking a partial run shows a warning. Returns the RunInfo, or None
    (no run, or only partial ones and none picked)."""
    from rnncon_core.reports import results
    where = where or st
    by_id = {r.run_id: r for r in runs}
    if key not in st.session_state or (st.session_state[key] is not None
                                       and st.session_state[key] not in by_id):
        st.session_state[key] = results.default_run(runs)
    picked = where.selectbox(label, list(by_id), key=key,
                             format_func=lambda r: results.run_label(by_id[r]),
                             placeholder="only partial runs so far: pick one to see what it "
                                         "finished", **kwargs)
    if picked is None:
        return None
    info = by_id[picked]
    if not results.complete(info):
        st.warning(results.partial_note(info), icon=":material/warning:")
    return info
