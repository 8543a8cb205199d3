"""The run store: every job (generation, retraining, ...) in its own directory, indexed in SQLite.

Layout of ``<root>/``::

    index.sqlite                 one row per run (WAL mode; a connection per call, so threads
                                 and processes may write at once)
    <run_id>/config.json         what was asked
    <run_id>/versions.json       python / tensorflow / keras / numpy / rnncon versions
    <run_id>/model.json          the model's name or path, size and sha256
    <run_id>/progress.json       {done, total, message, updated} for polling
    <run_id>/<name>.npz|.json    outputs (written by the job, e.g. outputs.npz, summary.json)
    <run_id>/error.txt           the error of a failed run

    <run_id>/status.json         {status, error, updated} once the run has ended
    <run_id>/relation.json       {parent, name, tags} when the run has any of them

A run may have a ``parent``: the run that started it as part of its own work (a retraining's
held-out transfer and robustness generation runs). Such a child is shown under its parent and
is never a default elsewhere, nor a retraining source (:func:`check_source_run`). A run may also
have a user ``name`` and ``tags`` (shown instead of its bare id).

Every file is written atomically (a temporary file, then ``os.replace``), so a reader never
sees half a file, and a run that crashes keeps what it last wrote. Cancelling works across
processes: ``request_cancel`` sets a column in the index, ``Run.check_cancel`` reads it.
The run folders hold the truth: ``RunStore.repair()`` (``rnncon runs --repair``) rebuilds a
lost or corrupt index from them. A running run whose process is gone (its id unknown, or reused
by a process that started later) is reported failed.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import sqlite3
import threading
import time
import traceback
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

import numpy as np

from .errors import InputError, JobCancelled, RunStoreError
from .paths import RUNS_DIR
from .io import (atomic_write_bytes, atomic_write_json, atomic_write_npz, file_sha256,
                 model_file, model_sha256, read_npz, to_json, versions)

STATUSES = ("running", "finished", "failed", "cancelled")
KINDS = ("generate", "retrain", "campaign", "robustness", "pollution")   # what jobs start
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    model TEXT,
    method TEXT,
    created TEXT NOT NULL,
    updated TEXT NOT NULL,
    summary TEXT,
    error TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    pid INTEGER,
    host TEXT,
    proc_start TEXT,
    parent TEXT,
    name TEXT,
    tags TEXT
)"""
_ADDED = ("proc_start", "parent", "name", "tags")     # columns older indexes lack
_CORRUPT = ("file is not a database", "malformed", "disk image", "no such table", "no such column")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _model_record(model: str | None) -> dict | None:
    """Name/path of the model plus the file's size and sha256 when it can be found."""
    if model is None:
        return None
    rec: dict[str, Any] = {"model": str(model)}
    path = model_file(model)
    if path is not None:
        rec.update(path=str(path.resolve()), bytes=path.stat().st_size, sha256=file_sha256(path))
    return rec


_OPEN_LOCK = threading.Lock()


def _proc_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, from /proc), or None if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]      # field 22, after the command name


def _pid_alive(pid: int | None, started: str | None = None) -> bool:
    """Whether the process that started a run still runs: its id exists and, where its start
    time was recorded, it is the same process (not a later one that reused the id)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    now = _proc_start(pid)
    return started is None or now is None or now == started


@dataclass
class RunInfo:
    """One row of the index plus where its files are. ``to_dict()`` is the `rnncon runs` row."""
    run_id: str
    kind: str
    status: str
    model: str | None
    method: str | None
    created: str
    updated: str
    summary: dict | None
    error: str | None
    cancel_requested: bool
    path: Path = field(repr=False)
    parent: str | None = None       # the run that started this one (a retraining's held-out set)
    name: str | None = None         # the user's name for it
    tags: tuple = ()

    def to_dict(self) -> dict:
        return {"run_id": self.run_id, "kind": self.kind, "status": self.status,
                "model": self.model, "method": self.method, "created": self.created,
                "summary": self.summary, "parent": self.parent, "name": self.name,
                "tags": list(self.tags)}

    @property
    def config(self) -> dict:
        return self.load_json("config") or {}

    def progress(self) -> dict | None:
        return self.load_json("progress")

    def load_json(self, name: str):
        p = self.path / f"{name}.json"
        return json.loads(p.read_text()) if p.exists() else None

    def load_npz(self, name: str) -> dict[str, np.ndarray] | None:
        """The arrays of ``<name>.npz`` (loaded into memory), or None if it was never written.
        A job that appends (``Run.append_npz``) leaves parts until it ends; they are read
        together, in order, as one."""
        p = self.path / f"{name}.npz"
        fix = f"run {self.run_id}'s file is damaged; start that work again"
        if p.exists():
            return read_npz(p, "run file", fix)
        parts = sorted(self.path.glob(f"{name}.part*.npz"))
        if not parts:
            return None
        loaded = [read_npz(part, "run file", fix) for part in parts]
        return {k: np.concatenate([d[k] for d in loaded]) for k in loaded[0]}

    def files(self) -> list[str]:
        return sorted(p.name for p in self.path.iterdir() if not p.name.startswith("."))


class Run:
    """The handle a job writes through. Use it as a context manager (``store.start(...)``):
    leaving the block by an exception marks the run failed (or cancelled for JobCancelled);
    leaving it normally without ``finish`` finishes it with the last saved summary."""

    def __init__(self, store: "RunStore", run_id: str):
        self.store = store
        self.run_id = run_id
        self.path = store.root / run_id
        self._closed = False

    # ---- files
    def _folder(self) -> Path:
        """The run's folder, or a RunStoreError (one line) if it was removed while the job ran."""
        if not self.path.is_dir():
            self._closed = True
            raise RunStoreError(f"run {self.run_id} was removed while it ran (its folder "
                                f"{self.path} is gone); the job stopped")
        return self.path

    def save_json(self, name: str, obj) -> Path:
        """``<name>.json``; a "summary" is also put in the index (so listings show a running
        run's partial summary)."""
        p = self._folder() / f"{name}.json"
        atomic_write_json(p, obj)
        if name == "summary":
            self.store._set_summary(self.run_id, obj)
        return p

    def save_npz(self, name: str, **arrays) -> Path:
        """``<name>.npz``, written whole; parts left by append_npz are then removed."""
        p = self._folder() / f"{name}.npz"
        atomic_write_npz(p, {k: np.asarray(v) for k, v in arrays.items()})
        for part in self.path.glob(f"{name}.part*.npz"):
            part.unlink(missing_ok=True)
        return p

    def append_npz(self, name: str, **arrays) -> Path:
        """Append rows (the same keys each time) as ``<name>.partNNNNN.npz``: a job that saves
        its outputs batch by batch writes each row once (RunRecord.load_npz reads the parts
        as one array until save_npz writes the whole)."""
        n = len(list(self._folder().glob(f"{name}.part*.npz")))
        p = self.path / f"{name}.part{n:05d}.npz"
        atomic_write_npz(p, {k: np.asarray(v) for k, v in arrays.items()})
        return p

    @staticmethod
    def count_text(done: int, total: int, unit: str = "") -> str:
        """"20 of 600 s", "3,000 of 12,000 model calls", "4 of 8" (no unit said)."""
        return f"{done:,} of {total:,}" + (f" {unit}" if unit else "")

    def progress(self, done: int, total: int, message: str = "", unit: str = "") -> None:
        """How far the run is: ``done`` of ``total`` ``unit`` (seeds, seconds, model calls)."""
        self.save_json("progress", {"done": int(done), "total": int(total), "unit": unit,
                                    "message": message, "updated": _now()})

    # ---- cancellation
    def cancel_requested(self) -> bool:
        """True once anyone (any process) asked to cancel this run; usable as ``should_stop``."""
        return self.store._cancel_flag(self.run_id)

    def check_cancel(self) -> None:
        if self.cancel_requested():
            raise JobCancelled(f"run {self.run_id} was cancelled; the seeds it had finished are "
                               f"kept in {self.path}")

    # ---- end states
    def finish(self, summary: dict | None = None) -> None:
        if summary is not None:
            atomic_write_json(self._folder() / "summary.json", summary)
        self.store._set_status(self.run_id, "finished", summary=summary, only_running=True)
        self._closed = True

    def fail(self, error: str, status: str = "failed") -> None:
        self._closed = True
        if not self.path.is_dir():          # removed while it ran: nothing left to mark
            return
        atomic_write_bytes(self.path / "error.txt", error.encode())
        summary = None
        if (self.path / "summary.json").exists():
            summary = json.loads((self.path / "summary.json").read_text())
        self.store._set_status(self.run_id, status, error=error.strip().splitlines()[-1]
                               if error.strip() else status, summary=summary,
                               only_running=True)

    def info(self) -> RunInfo:
        return self.store.get(self.run_id)

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self._closed:
            return False
        if exc is None:
            p = self.path / "summary.json"
            self.finish(json.loads(p.read_text()) if p.exists() else None)
        elif isinstance(exc, JobCancelled):
            self.fail(f"JobCancelled: {exc}", status="cancelled")
        elif isinstance(exc, KeyboardInterrupt):        # Ctrl-C: the user cancelled it
            self.fail(f"JobCancelled: interrupted (Ctrl-C); the finished outputs are kept in "
                      f"{self.path}", status="cancelled")
        else:
            self.fail("".join(traceback.format_exception(exc_type, exc, tb)))
        return False


class RunStore:
    """All runs under one root (default ``rnncon_core.paths.RUNS_DIR``, env ``RNNCON_RUNS``).
    ``on_start(run)``, if given, is called with each run this store starts (the dashboard
    learns its job's run id that way). ``read_only``: a store this process cannot write (a
    shared or archived one) opened to list and report its runs; a write is a RunStoreError
    (:meth:`for_reading` opens one so where the store cannot be written)."""

    def __init__(self, root: str | os.PathLike | None = None,
                 on_start: Callable[["Run"], None] | None = None,
                 parent: str | None = None, name: str | None = None, tags=(),
                 read_only: bool = False):
        self.root = Path(root) if root is not None else RUNS_DIR
        self.on_start = on_start
        self.parent, self.name, self.tags = parent, clean_name(name), clean_tags(tags)
        self.db = self.root / "index.sqlite"
        self.read_only = read_only
        if read_only:
            self._open_read_only()
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise self._unusable(e) from None
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise self._unusable(PermissionError("permission denied"))
        # one store opened at a time in this process: two job threads opening a fresh store
        # at once could meet the WAL switch's lock ("database is locked", no busy wait)
        with _OPEN_LOCK, closing(self._connect()) as con:
            try:
                con.execute("PRAGMA journal_mode=WAL")
                con.execute(_SCHEMA)
                cols = {r[1] for r in con.execute("PRAGMA table_info(runs)")}
                for col in _ADDED:                 # an index written before these columns
                    if col not in cols:
                        con.execute(f"ALTER TABLE runs ADD COLUMN {col} TEXT")
                con.commit()
            except sqlite3.Error as e:
                raise self._unusable(e) from None

    @classmethod
    def for_reading(cls, root: str | os.PathLike | None = None) -> "RunStore":
        """The store at ``root`` to list and report: writable where it can be written, else
        opened read-only (its runs listed and reported; any write a RunStoreError)."""
        try:
            return cls(root)
        except RunStoreError as e:
            if "corrupt" in str(e):
                raise
            return cls(root, read_only=True)

    def _open_read_only(self) -> None:
        """Open the index without writing anything: read-only, or, where SQLite's WAL needs a
        file it cannot make in a read-only folder, as an immutable file."""
        if not self.db.is_file():
            raise RunStoreError(f"no run store at {self.root} (no index.sqlite, and the folder "
                                f"cannot be written to start one): give the store's folder "
                                f"with --runs-dir DIR")
        for mode in ("mode=ro", "immutable=1"):
            self._uri = f"file:{quote(str(self.db.resolve()))}?{mode}"
            try:
                self._execute("SELECT run_id FROM runs LIMIT 1")
                return
            except RunStoreError as e:
                if "corrupt" in str(e):
                    raise
                error = e
        raise error

    def _unusable(self, e: Exception) -> RunStoreError:
        """One clear error for a store that cannot be used, naming the path and the way out."""
        text = str(getattr(e, "strerror", None) or e)
        if isinstance(e, sqlite3.DatabaseError) and any(w in text.lower() for w in _CORRUPT):
            return RunStoreError(f"the run store's index {self.db} is corrupt ({text}); rebuild "
                                 f"it from the run folders with `rnncon runs --repair --runs-dir "
                                 f"{self.root}`, or use another store with --runs-dir DIR")
        if getattr(self, "read_only", False):
            return RunStoreError(f"the run store {self.root} is read-only here ({text}): its "
                                 f"runs can be listed and reported, not changed; to write, "
                                 f"use a writable folder with --runs-dir DIR")
        return RunStoreError(f"the run store {self.root} cannot be written ({text}); choose a "
                             f"writable folder with --runs-dir DIR (or RNNCON_RUNS=DIR)")

    def children_of(self, parent: str) -> "RunStore":
        """The same store, starting runs as children of run ``parent`` (a retraining passes it
        to the generation runs it starts for its held-out sets)."""
        return RunStore(self.root, parent=parent)

    def named(self, name: str | None = None, tags=()) -> "RunStore":
        """The same store (same ``on_start``), giving the runs it starts a name and tags."""
        return RunStore(self.root, on_start=self.on_start, parent=self.parent, name=name,
                        tags=tags)

    def label(self, run_id: str, name: str | None, tags=()) -> RunInfo:
        """Give a run a name and tags (None / empty: remove them)."""
        self._writable()
        info = self.get(run_id)
        name, tags = clean_name(name), clean_tags(tags)
        _write_relation(self.root / run_id, info.parent, name, tags)
        self._execute("UPDATE runs SET name = ?, tags = ? WHERE run_id = ?",
                      (name, ",".join(tags) or None, run_id))
        return self.get(run_id)

    def _connect(self) -> sqlite3.Connection:
        try:
            con = sqlite3.connect(self._uri, timeout=30, uri=True) if self.read_only else \
                sqlite3.connect(self.db, timeout=30)
        except sqlite3.Error as e:
            raise self._unusable(e) from None
        con.row_factory = sqlite3.Row
        return con

    def _execute(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        with closing(self._connect()) as con:
            try:
                with con:   # one transaction, committed on success
                    rows = con.execute(sql, args).fetchall()
            except sqlite3.Error as e:
                raise self._unusable(e) from None
        return rows

    # ---- writing
    def _writable(self) -> None:
        if self.read_only:
            raise self._unusable(PermissionError("opened read-only"))

    def start(self, kind: str, model: str | None = None, method: str | None = None,
              config: dict | None = None) -> Run:
        """Create a running run (its directory, config, versions, model record) and return it."""
        self._writable()
        if not kind or not isinstance(kind, str):
            raise InputError("a run needs a kind (generate, retrain, coverage, ...)")
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        run_id = f"{stamp}-{kind}-{secrets.token_hex(3)}"
        path = self.root / run_id
        path.mkdir(parents=True)
        atomic_write_json(path / "config.json", config or {})
        atomic_write_json(path / "versions.json", versions())
        rec = _model_record(model)
        if rec is not None:
            atomic_write_json(path / "model.json", rec)
        _write_relation(path, self.parent, self.name, self.tags)
        now = _now()
        self._execute("INSERT INTO runs (run_id, kind, status, model, method, created, updated, "
                      "pid, host, proc_start, parent, name, tags) "
                      "VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      (run_id, kind, None if model is None else str(model), method, now, now,
                       os.getpid(), socket.gethostname(), _proc_start(os.getpid()),
                       self.parent, self.name, ",".join(self.tags) or None))
        run = Run(self, run_id)
        if self.on_start is not None:
            self.on_start(run)
        return run

    def request_cancel(self, run_id: str) -> None:
        """Ask a running run to stop at its next check (works from any thread or process)."""
        self._writable()
        info = self.get(run_id)
        if info.status != "running":
            raise InputError(f"run {run_id} is {info.status}, not running: nothing to cancel")
        self._execute("UPDATE runs SET cancel_requested = 1, updated = ? WHERE run_id = ?",
                      (_now(), run_id))

    def _refuse_live(self, run_id: str, action: str, force: bool) -> None:
        """A running run is never marked failed or deleted while its process lives (its pid
        and start time are checked); one whose process cannot be checked here (another host,
        no pid) only with ``force``. One whose process is gone is already reported failed."""
        row = self._execute("SELECT pid, host, proc_start FROM runs WHERE run_id = ?",
                            (run_id,))[0]
        here = row["host"] == socket.gethostname() and row["pid"]
        if here and _pid_alive(row["pid"], row["proc_start"]):
            raise InputError(f"run {run_id} is running (process {row['pid']} is alive): it is "
                             f"not {action}; stop it with `rnncon runs --cancel {run_id}` (it "
                             f"ends as cancelled and keeps its finished outputs)")
        if not here and not force:
            raise InputError(f"run {run_id} is running on {row['host'] or 'an unknown host'}, "
                             f"whose processes cannot be checked from here: if its process is "
                             f"gone, pass --force (force=True) to have it {action}")

    def delete(self, run_id: str, force: bool = False) -> None:
        """Remove a run and its folder; a running run must be cancelled first (see
        :meth:`_refuse_live` for ``force``)."""
        self._writable()
        info = self.get(run_id)
        if info.status == "running":
            self._refuse_live(run_id, "deleted", force)
        self._execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
        shutil.rmtree(self.root / run_id, ignore_errors=True)

    def mark_failed(self, run_id: str, reason: str = "marked failed by hand",
                    force: bool = False) -> RunInfo:
        """End a run that is stuck as "running" (its job will never finish it); a live run is
        refused (see :meth:`_refuse_live`)."""
        self._writable()
        info = self.get(run_id)
        if info.status != "running":
            raise InputError(f"run {run_id} is {info.status}, not running: nothing to mark "
                             f"(a run whose process ended is reported failed by itself)")
        self._refuse_live(run_id, "marked failed", force)
        err = self.root / run_id / "error.txt"
        if not err.exists():
            atomic_write_bytes(err, reason.encode())
        self._set_status(run_id, "failed", summary=info.summary, error=reason)
        return self.get(run_id)

    def _set_status(self, run_id: str, status: str, summary: dict | None = None,
                    error: str | None = None, only_running: bool = False) -> None:
        """Set a run's end state; ``only_running``: not over one already ended (a job does
        not turn a run marked failed by hand back into finished)."""
        assert status in STATUSES
        if only_running and self._execute("SELECT 1 FROM runs WHERE run_id = ? AND status "
                                          "!= 'running'", (run_id,)):
            return
        if status != "running":
            atomic_write_json(self.root / run_id / "status.json",
                              {"status": status, "error": error, "updated": _now()})
        self._execute("UPDATE runs SET status = ?, updated = ?, summary = ?, error = ? "
                      "WHERE run_id = ?",
                      (status, _now(), None if summary is None else
                       to_json(summary), error, run_id))

    def _set_summary(self, run_id: str, summary) -> None:
        self._execute("UPDATE runs SET summary = ?, updated = ? WHERE run_id = ?",
                      (to_json(summary), _now(), run_id))

    def _cancel_flag(self, run_id: str) -> bool:
        rows = self._execute("SELECT cancel_requested FROM runs WHERE run_id = ?", (run_id,))
        return bool(rows and rows[0]["cancel_requested"])

    # ---- reading
    def _info(self, row: sqlite3.Row) -> RunInfo:
        status, error = row["status"], row["error"]
        if status == "running" and row["host"] == socket.gethostname() \
                and not _pid_alive(row["pid"], row["proc_start"]):
            # the process died without marking the run (killed, power loss): say so once
            status, error = "failed", "the process running it ended without finishing"
        if status != row["status"] and not self.read_only:     # (read-only: only reported)
            self._execute("UPDATE runs SET status = ?, error = ?, updated = ? WHERE run_id = ? "
                          "AND status = 'running'", (status, error, _now(), row["run_id"]))
            folder = self.root / row["run_id"]
            if folder.is_dir():
                if not (folder / "error.txt").exists():
                    atomic_write_bytes(folder / "error.txt", error.encode())
                atomic_write_json(folder / "status.json",
                                  {"status": status, "error": error, "updated": _now()})
        return RunInfo(run_id=row["run_id"], kind=row["kind"], status=status, model=row["model"],
                       method=row["method"], created=row["created"], updated=row["updated"],
                       summary=json.loads(row["summary"]) if row["summary"] else None,
                       error=error, cancel_requested=bool(row["cancel_requested"]),
                       path=self.root / row["run_id"], parent=row["parent"], name=row["name"],
                       tags=tuple(t for t in (row["tags"] or "").split(",") if t))

    def get(self, run_id: str) -> RunInfo:
        rows = self._execute("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        if not rows:
            raise InputError(f"no run {run_id!r} in {self.root}; `rnncon runs` lists them")
        return self._info(rows[0])

    def list(self, kind: str | None = None, status: str | None = None,
             model: str | None = None, limit: int | None = None,
             children: bool = True, parent: str | None = None) -> list[RunInfo]:
        """Runs, newest first, optionally filtered (``children=False``: only runs without a
        parent; ``parent``: only that run's children)."""
        where, args = [], []
        for col, val in (("kind", kind), ("status", status), ("model", model),
                         ("parent", parent)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        if not children:
            where.append("parent IS NULL")
        sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(where) if where else "") + \
              " ORDER BY created DESC, rowid DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [self._info(r) for r in self._execute(sql, tuple(args))]

    def find_finished(self, model, config: dict, seeds=None, kind: str = "generate",
                      children: bool = True) -> RunInfo | None:
        """The one rule for "is there a stored run for this request?": the newest finished run
        of ``kind`` on this very model file (same name and same sha256 of its file; a model
        without a file matches nothing), whose stored configuration has every key of
        ``config`` with an equal value (compared as JSON, so a generator's whole
        ``get_config()`` must be equal, not a few of its settings), and, with ``seeds``, on
        exactly those seed indices (its ``seeds.npz``). None when there is none."""
        return next(self.matching(model, config, seeds, kind, children), None)

    def matching(self, model, config: dict, seeds=None, kind: str = "generate",
                 children: bool = True):
        """Every run ``find_finished`` would accept, newest first (a generator)."""
        sha = model_sha256(model)
        if sha is None:
            return
        want = json.loads(to_json(config))
        for info in self.list(kind=kind, status="finished", model=str(model),
                              children=children):
            stored = json.loads(to_json(info.config))
            if any(k not in stored or stored[k] != v for k, v in want.items()):
                continue
            if (info.load_json("model") or {}).get("sha256") != sha:
                continue
            if seeds is not None:
                got = info.load_npz("seeds")
                if got is None or not np.array_equal(got.get("seed_index"),
                                                     np.asarray(seeds, np.int64).reshape(-1)):
                    continue
            yield info


def repair_store(root: str | os.PathLike | None = None) -> dict:
    """Rebuild the index from the run folders (they hold the truth): a corrupt index is
    moved aside as ``index.sqlite.corrupt-<time>``; runs it lacks are added from their folders
    (one that never recorded an end state is added as failed, so repair while no job runs).
    Returns {runs, recovered, moved_aside, index}."""
    root = Path(root) if root is not None else RUNS_DIR
    if not root.is_dir():
        raise InputError(f"no run store at {root}: nothing to repair")
    db = root / "index.sqlite"
    moved = None
    if db.exists():
        try:
            with closing(sqlite3.connect(db)) as con:
                ok = con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
                con.execute("SELECT count(*) FROM runs").fetchone()
        except sqlite3.Error:
            ok = False
        if not ok:
            moved = db.with_name(f"index.sqlite.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
            os.replace(db, moved)
            for extra in ("-wal", "-shm"):
                side = db.with_name(db.name + extra)
                if side.exists():
                    side.unlink()
    fresh = RunStore(root)
    known = {r["run_id"] for r in fresh._execute("SELECT run_id FROM runs")}
    added = 0
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        row = _row_from_folder(folder)
        if row is None or row["run_id"] in known:
            continue
        fresh._execute("INSERT INTO runs (run_id, kind, status, model, method, created, "
                       "updated, summary, error, parent, name, tags) VALUES (:run_id, :kind, "
                       ":status, :model, :method, :created, :updated, :summary, :error, "
                       ":parent, :name, :tags)", row)
        added += 1
    return {"runs": len(known) + added, "recovered": added,
            "moved_aside": None if moved is None else str(moved), "index": str(db)}


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _row_from_folder(folder: Path) -> dict | None:
    """An index row rebuilt from a run folder (None if it is not one): status from
    status.json, else error.txt (failed / cancelled), else finished with a final summary, else
    failed (it ended without saying so)."""
    parts = folder.name.split("-")
    if len(parts) < 4 or not (folder / "config.json").exists():
        return None
    stamp = f"{parts[0]}-{parts[1]}"
    try:
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.strptime(stamp, "%Y%m%d-%H%M%S"))
    except ValueError:
        return None
    config = _read_json(folder / "config.json") or {}
    model = (_read_json(folder / "model.json") or {}).get("model", config.get("model"))
    summary = _read_json(folder / "summary.json")
    state = _read_json(folder / "status.json") or {}
    error = state.get("error")
    status = state.get("status")
    if status not in STATUSES or status == "running":
        err = folder / "error.txt"
        if err.exists():
            text = err.read_text(errors="replace").strip()
            status = "cancelled" if text.startswith("JobCancelled") else "failed"
            error = text.splitlines()[-1] if text else status
        elif summary is not None and not summary.get("partial"):
            status = "finished"
        else:
            status, error = "failed", "ended without finishing (recovered by repair)"
    updated = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(folder.stat().st_mtime))
    rel = _read_json(folder / "relation.json") or {}
    return {"parent": rel.get("parent"), "name": rel.get("name"),
            "tags": ",".join(rel.get("tags") or []) or None,"run_id": folder.name, "kind": "-".join(parts[2:-1]), "status": status,
            "model": None if model is None else str(model), "method": config.get("method"),
            "created": created, "updated": updated,
            "summary": None if summary is None else to_json(summary),
            "error": error}


def clean_name(name: str | None) -> str | None:
    """A run's user name: one line, at most 80 characters; empty is no name."""
    if name is None:
        return None
    name = " ".join(str(name).split())
    if len(name) > 80:
        raise InputError(f"a run name has at most 80 characters (got {len(name)}): shorten it")
    return name or None


def clean_tags(tags) -> tuple:
    """Tags as a tuple of short words (a comma-separated string or a list)."""
    if isinstance(tags, str):
        tags = tags.split(",")
    out = tuple(dict.fromkeys(" ".join(str(t).split()) for t in tags or ()))
    out = tuple(t for t in out if t)
    if any(len(t) > 30 for t in out):
        raise InputError("a run tag has at most 30 characters: shorten it")
    return out


def _write_relation(folder: Path, parent, name, tags) -> None:
    path = folder / "relation.json"
    if parent is None and name is None and not tags:
        path.unlink(missing_ok=True)
        return
    atomic_write_json(path, {"parent": parent, "name": name, "tags": list(tags)})


def display_name(info: RunInfo) -> str:
    """What a person calls a run: its name and tags (the id's short tail beside), or, without
    a name, what it did and when (a retraining says so: not its source's method)."""
    short = info.run_id.rsplit("-", 1)[-1]
    if info.name:
        tags = f" [{', '.join(info.tags)}]" if info.tags else ""
        return f"{info.name}{tags} · {short}"
    what = {"retrain": "retraining", "generate": info.method or "generation"}.get(
        info.kind, info.method or info.kind)
    if info.kind == "retrain" and info.method:
        what = f"retraining with {info.method} inputs"
    when = info.created[5:16].replace("T", " ") if info.created else ""
    tags = f" [{', '.join(info.tags)}]" if info.tags else ""
    return f"{what}{tags} · {when} · {short}"


def check_source_run(run: RunInfo, model: str, force: bool = False) -> str | None:
    """Whether a generation run may feed ``model``'s retraining: a run that a retraining
    started for itself (a held-out transfer or robustness set, ``parent`` set) is always an
    InputError (training on it would leak the inputs that judge the retraining); a run
    generated for another model (told apart by the model file's sha256 where both are known,
    else by name) is an InputError unless ``force``; a run that did not finish gives a note to
    show (its finished seeds are used), else None."""
    if run.parent is not None:
        raise InputError(f"run {run.run_id} is a held-out evaluation set of retraining "
                         f"{run.parent}: training on it would leak the inputs that judge a "
                         f"retraining; pick a generation run you started (`rnncon runs` lists "
                         f"them, children show their parent)")
    rec = _read_json(run.path / "model.json") or {}
    mine = _model_record(str(model)) or {}
    same = rec.get("sha256") == mine.get("sha256") if rec.get("sha256") and mine.get("sha256") \
        else str(run.model) == str(model)
    if not same and not force:
        raise InputError(f"run {run.run_id} was generated for model {run.model!r}, not "
                         f"{str(model)!r}: its adversarial inputs belong to the other model "
                         f"(pass --force, or force=True, to retrain with them anyway)")
    summary = run.summary or {}
    if run.status != "finished" or summary.get("partial"):
        done = summary.get("n_seeds")
        return (f"run {run.run_id} is {run.status} (partial): only the "
                f"{done if done is not None else 'seeds it'} finished seeds' outputs are used")
    return None
