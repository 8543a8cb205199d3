"""What a campaign writes to its run: budgets, checkpoints, the summary, the curve; and how a
stored campaign is read back (``load_campaign``)."""
from __future__ import annotations

import io
import json
import os
import re
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from .classes import class_counts
from .loop import CURVE_COLUMNS, Campaign
from .statelog import MAGIC, StateLog, decode, drop_log, encode, latest, load_state, records


@dataclass(frozen=True)
class Budget:
    """How long a campaign runs: wall seconds, or model calls (inputs run through the model)."""
    seconds: float | None = None
    calls: int | None = None

    def done(self, camp: Campaign) -> bool:
        if self.calls is not None:
            return camp.calls >= self.calls
        return camp.elapsed() >= self.seconds

    def fraction(self, camp: Campaign) -> tuple[int, int]:
        if self.calls is not None:
            return min(camp.calls, self.calls), self.calls
        return int(min(camp.elapsed(), self.seconds)), int(self.seconds)

    @property
    def unit(self) -> str:
        return "model calls" if self.calls is not None else "s"

    def text(self) -> str:
        return f"{self.calls} calls" if self.calls is not None else f"{self.seconds:g}s"


def parse_budget(text) -> Budget:
    """"10m", "90s", "1h", "1m30s", a number of seconds, or "5000calls" (model calls)."""
    if isinstance(text, Budget):
        return text
    if isinstance(text, (int, float)) and not isinstance(text, bool) and text > 0:
        return Budget(seconds=float(text))
    t = str(text).strip().lower().replace(" ", "")
    m = re.fullmatch(r"(\d+)(calls?|c)", t)
    if m and int(m.group(1)) > 0:
        return Budget(calls=int(m.group(1)))
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms]?)", t)
    if parts and "".join(a + b for a, b in parts) == t:
        secs = sum(float(a) * {"h": 3600, "m": 60, "s": 1, "": 1}[b] for a, b in parts)
        if secs > 0:
            return Budget(seconds=secs)
    raise InputError(f"budget {text!r}: give a time such as 10m, 90s, 1h or 1m30s, or model "
                     f"calls such as 5000calls")


DEFAULT_BUDGET = "10m"


def campaign_budget(budget, old=None) -> Budget:
    """The one rule for a campaign's budget: the one given (text or ``Budget``), else a
    resumed run's own (``old``: its stored run), else ``DEFAULT_BUDGET``. The CLI calls it
    once, at the edge, and hands the ``Budget`` on."""
    if budget is None:
        budget = old.config["budget"] if old is not None else DEFAULT_BUDGET
    return parse_budget(budget)


def report_progress(run, camp, budget, progress) -> None:
    done, total = budget.fraction(camp)
    f = camp.faults
    run.progress(done, total, f"{f.n_valid:,} valid distinct faults from "
                              f"{len(f.valid_roots):,} seeds ({len(f) - f.n_valid:,} invalid), "
                              f"coverage {camp.coverage():.4f}, {camp.calls:,} model calls",
                 unit=budget.unit)
    if progress is not None:
        progress(done, total)


DURABLE_EVERY = 30.0       # seconds between checkpoints that are fsync'ed (machine crashes)
_MAGIC = b"RNCR"


@dataclass
class CampaignFiles:
    """What a running campaign keeps about its run's files, held by the code that writes them
    (never stored on the ``Run``): the open logs (file name -> file), the state log, the
    curve rows in ``curve.log`` and when the last durable save was."""
    run: object
    logs: dict = field(default_factory=dict)
    state_log: object = None
    curve_n: int = 0
    durable_at: float | None = None


def checkpoint(files: CampaignFiles, camp: Campaign, added: dict) -> None:
    """The batch's new queue and fault rows appended to ``rows.log``, its curve row to
    ``curve.log``, then the state's changes to the checkpoint (``statelog.StateLog``: it
    counts the rows, so rows of a batch whose state never made it to disk are ignored): a
    killed campaign loses at most the batch it was in. Nothing is fsync'ed after every batch
    (a killed process loses nothing the page cache holds; per-batch fsyncs and one file per
    batch took a fifth of a campaign's time on mnist-lstm): every ``DURABLE_EVERY`` seconds
    the logs are fsync'ed and a full snapshot of the state is written durably."""
    q0, q1 = added["queue"]
    f0, f1 = added["faults"]
    durable = durable_now(files)
    write_rows(files, camp.queue.rows.arrays(q0, q1) if q1 > q0 else {},
               camp.faults.rows.arrays(f0, f1) if f1 > f0 else {}, durable)
    state = camp.state(curve=False)
    state["n_curve"] = np.int64(append_curve(files, camp.curve, durable))
    save_checkpoint(files, state, durable)


def append_curve(files: CampaignFiles, curve, durable: bool) -> int:
    """The curve's rows not yet in ``curve.log`` appended to it (float64, one row of
    ``CURVE_COLUMNS`` per batch); returns how many rows it holds."""
    rows = np.asarray(curve[files.curve_n:], np.float64).reshape(-1, len(CURVE_COLUMNS))
    _append(files, "curve.log", rows.astype("<f8").tobytes(), durable)
    files.curve_n += len(rows)
    return files.curve_n


def curve_to_log(files: CampaignFiles, state: dict, durable: bool) -> dict:
    """The state without its curve: the curve's new rows appended to ``curve.log`` and their
    count kept (``n_curve``), so a checkpoint does not grow with the campaign's length."""
    curve = np.asarray(state.pop("curve"), np.float64).reshape(-1, len(CURVE_COLUMNS))
    state["n_curve"] = np.int64(append_curve(files, curve, durable))
    return state


def curve_rows(columns: dict) -> np.ndarray:
    """A stored curve's columns as rows of ``CURVE_COLUMNS`` (columns an earlier version did
    not store: NaN)."""
    n = len(columns["calls"]) if "calls" in columns else 0
    return np.stack([np.asarray(columns[c], np.float64) if c in columns else np.full(n, np.nan)
                     for c in CURVE_COLUMNS], axis=1)


def read_curve_log(info) -> np.ndarray:
    """The rows of ``curve.log`` (a row cut short by a kill is dropped)."""
    path = info.path / "curve.log"
    width = 8 * len(CURVE_COLUMNS)
    if not path.exists():
        return np.zeros((0, len(CURVE_COLUMNS)))
    data = path.read_bytes()
    data = data[:len(data) // width * width]
    return np.frombuffer(data, "<f8").reshape(-1, len(CURVE_COLUMNS)).copy()


def load_checkpoint(info) -> dict | None:
    """A campaign's last checkpoint (``statelog.load_state``: the snapshot and the changes
    logged after it) with its curve (from ``curve.log`` where it is kept there)."""
    state = load_state(info.path)
    if state is not None and "curve" not in state:
        state = dict(state)
        whole = info.load_npz("curve")     # a finished campaign's (its log is removed then)
        rows = read_curve_log(info) if whole is None else curve_rows(whole)
        state["curve"] = rows[:int(state.get("n_curve", 0))]
    return state


def durable_now(files: CampaignFiles) -> bool:
    """True for the first batch and then every ``DURABLE_EVERY`` seconds."""
    now = time.monotonic()
    if files.durable_at is None or now - files.durable_at >= DURABLE_EVERY:
        files.durable_at = now
        return True
    return False


def write_rows(files: CampaignFiles, queue: dict, faults: dict, durable: bool = True) -> None:
    """One record (the batch's rows, raw arrays: ``statelog.encode``) appended to
    ``rows.log``."""
    if not queue and not faults:
        return
    arrays = {**{f"queue/{k}": v for k, v in queue.items()},
              **{f"faults/{k}": v for k, v in faults.items()}}
    _append(files, "rows.log", encode(arrays), durable)


def _append(files: CampaignFiles, name: str, data: bytes, durable: bool) -> None:
    """``data`` appended to the run's file ``name`` (kept open in ``files.logs``) and
    flushed; fsync'ed too when ``durable``."""
    f = files.logs.get(name)
    if f is None or f.closed:
        f = files.logs[name] = open(files.run.path / name, "ab")
    if data:
        f.write(data)
        f.flush()
    if durable:
        os.fsync(f.fileno())


def _log_records(path):
    """The records of a rows log, in order (raw arrays, or .npz from older versions); a
    record cut short (killed while written) and what follows it are ignored."""

    for magic, body in records(path, (MAGIC, _MAGIC)):
        if magic == MAGIC:
            yield decode(body)
            continue
        with np.load(io.BytesIO(bytes(body)), allow_pickle=False) as z:
            yield {k: z[k] for k in z.files}


def read_rows(info, name: str) -> dict | None:
    """The rows of "queue" or "faults": the whole file of a finished campaign, else its
    log's records (or, from older versions, its ``rows.part*.npz`` files), in order."""
    whole = info.load_npz(name)
    if whole is not None:
        return whole
    records = []
    for part in sorted(info.path.glob("rows.part*.npz")):
        with np.load(part, allow_pickle=False) as z:
            records.append({k: z[k] for k in z.files})
    if (info.path / "rows.log").exists():
        records += list(_log_records(info.path / "rows.log"))
    parts = []
    for rec in records:
        got = {k.split("/", 1)[1]: v for k, v in rec.items() if k.startswith(name + "/")}
        if got:
            parts.append(got)
    if not parts:
        return None
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def save_state(files: CampaignFiles, camp: Campaign) -> None:
    save_checkpoint(files, camp.state())


def save_checkpoint(files: CampaignFiles, arrays: dict, durable: bool = True) -> None:
    """The state into the run's ``statelog.StateLog`` (a durable save is a full snapshot,
    checkpoint.npz, uncompressed: compressing a guide's state took a third of a 15 s
    campaign's time on mnist-lstm); its curve goes to ``curve.log`` (``curve_to_log``)."""
    if "curve" in arrays:
        arrays = curve_to_log(files, dict(arrays), durable)
    if files.state_log is None:
        files.state_log = StateLog(files.run.path)
    files.state_log.save(arrays, durable)


def sync_rows(files: CampaignFiles) -> None:
    """fsync the rows log (what ``write_rows(durable=False)`` appended)."""
    f = files.logs.get("rows.log")
    if f is not None and not f.closed:
        os.fsync(f.fileno())


def close_rows(files: CampaignFiles) -> None:
    """The logs closed; the checkpoint made one durable snapshot (its log removed)."""
    for f in files.logs.values():
        if not f.closed:
            f.close()
    if files.state_log is not None:
        files.state_log.snapshot(durable=True)
        files.state_log.close()
        drop_log(files.run.path)


def summary_of(camp: Campaign, config: dict, budget: Budget, stopped: bool) -> dict:
    """The campaign's figures. The headline is ``fault_classes``: valid faults grouped into
    classes within each (true, predicted) pair (``classes``), beside the root seeds behind them
    (``fault_roots``); ``distinct_faults`` (every distinct fault by abstract state, valid or
    not) is the secondary figure."""
    secs = camp.elapsed()
    first = camp.curve[0] if camp.curve else [0.0] * len(CURVE_COLUMNS)
    counts = class_counts(camp.faults.rows.arrays())
    counts.pop("fault_class")
    oracle = camp.validity
    return {"guide": config["guide"], "model": config["model"], "dataset": config["dataset"],
            **counts, "validity": oracle.describe() if oracle is not None else
            ["not checked (--validity-checks off)"],
            "validity_seconds": round(camp.validity_seconds, 3),
            "validity_share": round(camp.validity_seconds / secs, 4) if secs > 0 else None,
            "budget": budget.text(), "seeds": int(len(camp.x_seeds)),
            "seconds": round(secs, 3), "calls": int(camp.calls),
            "batches": int(camp.batches), "coverage_start": first[2],
            "coverage": camp.coverage(), "distinct_faults": len(camp.faults),
            "distinct_pairs": len(camp.faults.pairs), "faults_total": int(camp.faults.total),
            "unstable_faults": int(camp.unstable), "queue": len(camp.queue),
            "model_seconds": round(camp.model_seconds, 3),
            "overhead": round(secs / camp.model_seconds, 3) if camp.model_seconds else None,
            "faults_per_minute": 60 * len(camp.faults) / secs if secs > 0 else 0.0,
            "valid_faults_per_minute": 60 * camp.faults.n_valid / secs if secs > 0 else 0.0,
            "memory_mb": round((camp.queue.rows.nbytes() + camp.faults.rows.nbytes()) / 2**20,
                               2),
            "stopped": bool(stopped), "partial": bool(stopped),
            "resumed_from": config.get("resumed_from")}


def finish(files: CampaignFiles, camp: Campaign, config: dict, budget: Budget, stopped: bool,
           extra: dict | None = None) -> dict:
    """The curve, the summary (with ``extra``), and (when the budget is spent) the rows as
    single files."""
    close_rows(files)
    run = files.run
    curve = np.array(camp.curve, np.float64).reshape(-1, len(CURVE_COLUMNS))
    run.save_npz("curve", **{c: curve[:, i] for i, c in enumerate(CURVE_COLUMNS)})
    summary = {**summary_of(camp, config, budget, stopped), **(extra or {})}
    run.save_json("summary", summary)
    if not stopped:
        run.save_npz("queue", **camp.queue.rows.arrays())
        run.save_npz("faults", **(camp.faults.rows.arrays() if len(camp.faults) else
                                  {"label": np.zeros(0, np.int64)}))
        for part in [*run.path.glob("rows.part*.npz"), run.path / "rows.log",
                     run.path / "curve.log"]:
            part.unlink(missing_ok=True)
        run.finish(summary)
    return summary


def live_state(info) -> dict:
    """What a running campaign shows, read cheaply (only the curve and the counters of its
    checkpoint): ``curve`` (columns) and ``summary`` (the finished summary, else the counters
    and the curve's last row)."""
    curve, counters = None, {}
    if (info.path / "curve.npz").exists():
        curve = info.load_npz("curve")
    path = info.path / "checkpoint.npz"
    if path.exists():
        try:           # the counters of the last batch (the snapshot's or a later record's)
            z = latest(info.path, ("counters", "n_curve", "curve"))
            counters = json.loads(str(z["counters"]))
            rows = None
            if curve is None:
                rows = np.asarray(z["curve"]) if "curve" in z else \
                    read_curve_log(info)[:int(z["n_curve"])]
        except (OSError, ValueError, KeyError):      # replaced while read: the next poll
            rows = None
        if curve is None and rows is not None:
            rows = rows.reshape(-1, len(CURVE_COLUMNS))
            curve = {c: rows[:, i] for i, c in enumerate(CURVE_COLUMNS)}
    if curve is None:
        curve = {c: np.zeros(0) for c in CURVE_COLUMNS}
    n = len(curve["calls"])
    curve = {**{c: np.full(n, np.nan) for c in CURVE_COLUMNS}, **curve}    # earlier versions
    summary = dict(info.summary or {})
    if not summary and len(curve["calls"]):
        last = {c: float(curve[c][-1]) if c in curve else float("nan") for c in CURVE_COLUMNS}
        summary = {"distinct_faults": int(last["distinct_faults"]),
                   "distinct_pairs": int(last["distinct_pairs"]),
                   "coverage": last["coverage"], "calls": int(last["calls"])}
        if np.isfinite(last["valid_faults"]):
            summary.update(valid_faults=int(last["valid_faults"]),
                           valid_pairs=int(last["valid_pairs"]),
                           fault_roots=int(last["valid_roots"]),
                           invalid_faults=int(last["distinct_faults"] - last["valid_faults"]))
    return {"curve": curve, "summary": summary, "counters": counters}


_CLASSES: dict = {}


def _class_counts_of(info, faults: dict) -> dict:
    """``classes.class_counts`` of a run's fault rows, remembered per run and row count (a
    page polling a finished or paused campaign clusters its faults once)."""
    key = (str(info.path), len(faults["label"]))
    if key not in _CLASSES:
        if len(_CLASSES) > 32:
            _CLASSES.clear()
        _CLASSES[key] = class_counts(faults)
    return dict(_CLASSES[key])


def load_campaign(info) -> dict:
    """A stored campaign's arrays: curve (columns), faults (with ``fault_class`` per row: -1
    for an invalid fault; ``valid`` and ``reason``), seeds and its summary (a running
    campaign's with its fault classes so far)."""
    live = live_state(info)
    faults = read_rows(info, "faults") or {}
    n = live["counters"].get("n_faults")
    if n is not None and faults:
        faults = {k: v[:n] for k, v in faults.items()}
    if faults and "valid" in faults:
        counts = _class_counts_of(info, faults)
        if counts["fault_class"] is not None:
            faults["fault_class"] = counts.pop("fault_class")
        if live["summary"].get("fault_classes") is None:
            live["summary"] = {**live["summary"], **{k: v for k, v in counts.items()
                                                     if k != "fault_class"}}
    return {"curve": live["curve"], "faults": faults, "seeds": info.load_npz("seeds") or {},
            "summary": live["summary"], "config": info.config}

