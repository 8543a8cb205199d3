"""``run_campaign``: a campaign inside a run of the run store, checkpointed after every batch.

Files of a campaign run (``rnncon_core.runs``): ``seeds.npz``; ``queue.npz`` and
``faults.npz`` (rows appended batch by batch as parts while it runs, one file once it ends);
``checkpoint.npz`` (everything else that changes: pick counts, curve, guide state, random
state, counters; one atomic file, so a killed campaign loses at most the batch it was in);
``curve.npz`` (coverage and distinct faults against wall time and model calls) and
``summary.json``. ``resume=RUN_ID`` starts a new run (``resumed_from`` in its config) from
that run's last checkpoint and goes on exactly as the first would have.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import InputError, JobCancelled
from .loop import CAMPAIGN_PARAMS, CURVE_COLUMNS, Campaign
from .mutations import input_kind

GUIDE_NONE = "none"
PROFILE_INPUTS = {"image": 2000, "sequence": 2000, "text": 500}


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


def guide_names() -> list[str]:
    from ..coverage import CRITERIA
    return [*CRITERIA, GUIDE_NONE]


def make_guide(name: str, model, params: dict | None):
    """The guiding criterion (None for "none"), its profile built first where it needs one."""
    from ..coverage import CRITERIA, default_threshold, get_criterion
    if name == GUIDE_NONE:
        if params:
            raise InputError("the unguided baseline (guide none) takes no guide parameters")
        return None
    if name not in CRITERIA:
        raise InputError(f"unknown guide {name!r}; choose one of {', '.join(guide_names())}")
    params = dict(params or {})
    cls = CRITERIA[name]
    if cls.threshold_from_data and "threshold" not in params and "threshold" in cls.params:
        params["threshold"] = default_threshold(model)
    return get_criterion(name, model, **params)


def ensure_profile(model, x_train, kind: str, log=None) -> None:
    """The model's training profile (the abstraction and the profiled guides read it): built
    once from the first training inputs when it is missing."""
    from ..coverage.profile import build_profile, default_path
    if default_path(model).exists():
        return
    n = PROFILE_INPUTS[kind]
    if log is not None:
        log(f"building the model's training profile from {min(n, len(x_train))} inputs "
            f"(once per model)")
    build_profile(model, x_train[:n], source="campaign")


def make_abstraction(model, values: dict):
    """inputs -> (N,) int64: DeepStellar's abstract state of the last step's hidden state of
    the last recurrent layer (coverage.deepstellar.StateCoverage's abstraction)."""
    from ..coverage import StateCoverage
    sc = StateCoverage(model, components=values["components"], cells=values["cells"])
    return lambda x: sc.abstract_states(x)[:, -1]


def _lexicon(kind: str):
    if kind != "text":
        return None
    from ..text.eda import Lexicon
    from ..text.generators import load_vocabulary
    from ..text.lexical import imdb_names
    v = load_vocabulary()
    return Lexicon(v, names=imdb_names(v.words))


def load_seeds(model_ref, dataset=None, n_seeds=100, inputs=None, labels=None):
    """(keras model, x seeds, y seeds, x train, dataset name): the first n_seeds test inputs
    the model predicts right (generate.runner's seeds), or the inputs given."""
    from ..data import load_dataset
    from ..generate.base import model_head
    from ..trace import check_model_inputs
    from ..zoo import load_model, model_datasets, with_steps
    keras_model = load_model(model_ref) if isinstance(model_ref, str) else model_ref
    head = model_head(keras_model).require_classifier("a campaign")
    if (inputs is None) != (labels is None):
        raise InputError("give inputs and labels together (CLI: --inputs X.npy --labels Y.npy)")
    if inputs is not None:
        x_all = check_model_inputs(keras_model, inputs, "inputs")
        y_all, x_train, ds_name = np.asarray(labels).reshape(-1), x_all, "inputs"
        if len(y_all) != len(x_all):
            raise InputError(f"{len(x_all)} inputs but {len(y_all)} labels: give one each")
    else:
        fits = model_datasets(model_ref if isinstance(model_ref, str) else None, keras_model)
        if not dataset and not fits:
            raise InputError(f"cannot tell which data set fits a model with input "
                             f"{tuple(keras_model.input_shape[1:])}: give --dataset NAME or "
                             f"your own seeds (--inputs X.npy --labels Y.npy)")
        ds_name = dataset or fits[0]
        ds = load_dataset(ds_name)
        x_all = check_model_inputs(keras_model, ds.x_test, f"the {ds_name} test inputs")
        y_all, x_train = ds.y_test, ds.x_train
    y_all = head.check_labels(y_all)
    keras_model = with_steps(keras_model, x_all.shape[1])
    idx = _right_ones(keras_model, x_all, y_all, int(n_seeds))
    return keras_model, x_all[idx], y_all[idx], x_train, ds_name


def _right_ones(model, x, y, n: int) -> np.ndarray:
    """Indices of the first n inputs the model predicts right (the seeds of generation runs:
    jobs.runner.select_seeds, a layer above, picks the same)."""
    from ..generate.base import predict_proba
    if n < 1:
        raise InputError(f"the seed set is empty: ask for at least one seed (got {n})")
    picked, count = [], 0
    for i in range(0, len(x), 512):
        ok = np.flatnonzero(predict_proba(model, x[i:i + 512]).argmax(1) == y[i:i + 512]) + i
        picked.append(ok)
        count += len(ok)
        if count >= n:
            break
    idx = np.concatenate(picked)[:n] if picked else np.zeros(0, np.int64)
    if len(idx) == 0:
        raise InputError("the model predicts none of the inputs right: no seeds to start from")
    return idx


def run_campaign(model, dataset: str | None = None, *, guide: str = "rconc", budget="10m",
                 seeds: int = 100, seed: int = 0, inputs=None, labels=None,
                 guide_params: dict | None = None, store=None,
                 progress: Callable[[int, int], None] | None = None,
                 should_stop: Callable[[], bool] | None = None, resume: str | None = None,
                 workers: int = 0, ray_address: str | None = None, log=None,
                 **params) -> dict:
    """Run a campaign on ``model`` (a shipped name, a .keras path or a Keras model) from the
    first ``seeds`` test inputs it predicts right, until ``budget`` is spent, guided by the
    criterion ``guide`` (any of ``coverage.CRITERIA``, or "none"). ``params``: the declared
    mutation and loop parameters (``CAMPAIGN_PARAMS``). Stored in the run store (kind
    "campaign"); returns the summary with ``run_id``. ``resume``: a campaign run's id to go on
    from (its settings are taken; ``budget`` is the total, including what it spent).
    ``workers``/``ray_address``: one queue per Ray worker (``campaign.distributed``).
    ``store``: the run store to write to (``rnncon_core.runs.RunStore``; given by the caller,
    since the store is a layer above campaigns)."""
    if store is None:     # the run store is a layer above this one: the caller opens it
        raise InputError("run_campaign needs a run store: store=rnncon_core.runs.RunStore() "
                         "(or RunStore(DIR))")
    old = None
    if resume is not None:
        old = store.get(resume)
        if old.kind != "campaign":
            raise InputError(f"run {resume} is a {old.kind} run, not a campaign")
        if old.status == "running":
            raise InputError(f"run {resume} is still running: cancel it first (`rnncon runs "
                             f"--cancel {resume}`)")
        if old.load_npz("checkpoint") is None:
            raise InputError(f"run {resume} has no checkpoint to resume from")
        cfg = old.config
        model = cfg["model"] if isinstance(model, str) or model is None else model
        dataset, guide, seeds, seed = cfg["dataset"], cfg["guide"], cfg["seeds"], cfg["seed"]
        guide_params, params = cfg["guide_params"], cfg["params"]
        workers = cfg.get("workers", 0) if not workers else workers
        if budget is None:
            budget = cfg["budget"]
        if dataset == "inputs":            # the user's own seeds: the ones it stored
            stored = old.load_npz("seeds")
            dataset, inputs, labels = None, stored["x"], stored["y"]
    budget = parse_budget(budget)
    values = CAMPAIGN_PARAMS.check("a campaign", params)
    if guide not in guide_names():
        raise InputError(f"unknown guide {guide!r}; choose one of {', '.join(guide_names())}")
    if workers or ray_address:
        from .distributed import run_on_ray
        return run_on_ray(model, dataset, guide=guide, budget=budget, seeds=seeds, seed=seed,
                          guide_params=guide_params, store=store, progress=progress,
                          should_stop=should_stop, old=old, workers=workers or 1,
                          ray_address=ray_address, values=values, log=log)
    keras_model, x, y, x_train, ds_name = load_seeds(model, dataset, seeds, inputs, labels)
    kind = input_kind(keras_model)
    ensure_profile(keras_model, x_train, kind, log)
    camp = Campaign(keras_model, x, y, make_guide(guide, keras_model, guide_params), values,
                    seed, kind, make_abstraction(keras_model, values), _lexicon(kind))
    config = {"model": str(model) if isinstance(model, str) else "in-memory model",
              "dataset": ds_name, "guide": guide, "guide_params": guide_params or {},
              "budget": budget.text(), "seeds": int(seeds), "seed": int(seed),
              "params": {k: values[k] for k in values}, "kind": kind, "workers": 0,
              "resumed_from": resume}
    with store.start("campaign", model=config["model"], method=guide, config=config) as run:
        run.save_npz("seeds", x=x, y=y)
        if old is not None:
            _restore(camp, old, run)
        else:
            camp.start()
            _checkpoint(run, camp, {"queue": (0, len(camp.queue)), "faults": (0, 0)})
        stop = (lambda: run.cancel_requested() or bool(should_stop and should_stop()))
        loop(camp, budget, lambda added: _checkpoint(run, camp, added),
             lambda: _progress(run, camp, budget, progress), stop)
        summary = finish(run, camp, config, budget, stopped=not budget.done(camp))
        if summary["stopped"]:
            raise JobCancelled(f"campaign {run.run_id} was stopped after {camp.batches} "
                               f"batches; resume it with --resume {run.run_id}")
    return {"run_id": run.run_id, **summary}


def loop(camp: Campaign, budget: Budget, on_batch, on_progress, stop) -> None:
    last = 0.0
    while not budget.done(camp):
        if stop():
            return
        on_batch(camp.step())
        if time.monotonic() - last > 0.5:
            on_progress()
            last = time.monotonic()
    on_progress()


def _progress(run, camp, budget, progress) -> None:
    done, total = budget.fraction(camp)
    run.progress(done, total, f"{len(camp.faults)} distinct faults, coverage "
                              f"{camp.coverage():.4f}, {camp.calls} model calls")
    if progress is not None:
        progress(done, total)


def _checkpoint(run, camp: Campaign, added: dict) -> None:
    """Append the batch's new rows, then the state in one atomic file (it counts the rows,
    so rows appended by a batch whose state never made it to disk are ignored)."""
    q0, q1 = added["queue"]
    if q1 > q0:
        run.append_npz("queue", **camp.queue.rows.arrays(q0, q1))
    f0, f1 = added["faults"]
    if f1 > f0:
        run.append_npz("faults", **camp.faults.rows.arrays(f0, f1))
    run.save_npz("checkpoint", **camp.state())


def _restore(camp: Campaign, old, run) -> None:
    """Continue from ``old``'s checkpoint; its rows are copied into ``run`` first."""
    state = old.load_npz("checkpoint")
    camp.restore(state, old.load_npz("queue"), old.load_npz("faults") or {})
    run.append_npz("queue", **camp.queue.rows.arrays())
    if len(camp.faults):
        run.append_npz("faults", **camp.faults.rows.arrays())
    run.save_npz("checkpoint", **camp.state())


def summary_of(camp: Campaign, config: dict, budget: Budget, stopped: bool) -> dict:
    secs = camp.elapsed()
    first = camp.curve[0] if camp.curve else [0.0] * len(CURVE_COLUMNS)
    return {"guide": config["guide"], "model": config["model"], "dataset": config["dataset"],
            "budget": budget.text(), "seconds": round(secs, 3), "calls": int(camp.calls),
            "batches": int(camp.batches), "coverage_start": first[2],
            "coverage": camp.coverage(), "distinct_faults": len(camp.faults),
            "distinct_pairs": len(camp.faults.pairs), "faults_total": int(camp.faults.total),
            "unstable_faults": int(camp.unstable), "queue": len(camp.queue),
            "model_seconds": round(camp.model_seconds, 3),
            "overhead": round(secs / camp.model_seconds, 3) if camp.model_seconds else None,
            "faults_per_minute": 60 * len(camp.faults) / secs if secs > 0 else 0.0,
            "memory_mb": round((camp.queue.rows.nbytes() + camp.faults.rows.nbytes()) / 2**20,
                               2),
            "stopped": bool(stopped), "partial": bool(stopped),
            "resumed_from": config.get("resumed_from")}


def finish(run, camp: Campaign, config: dict, budget: Budget, stopped: bool) -> dict:
    """The curve, the summary, and (when the budget is spent) the rows as single files."""
    curve = np.array(camp.curve, np.float64).reshape(-1, len(CURVE_COLUMNS))
    run.save_npz("curve", **{c: curve[:, i] for i, c in enumerate(CURVE_COLUMNS)})
    summary = summary_of(camp, config, budget, stopped)
    run.save_json("summary", summary)
    if not stopped:
        run.save_npz("queue", **camp.queue.rows.arrays())
        run.save_npz("faults", **(camp.faults.rows.arrays() if len(camp.faults) else
                                  {"label": np.zeros(0, np.int64)}))
        run.finish(summary)
    return summary


def load_campaign(info) -> dict:
    """A stored campaign's arrays: curve (columns), faults, seeds and its summary."""
    curve = info.load_npz("curve")
    if curve is None:
        state = info.load_npz("checkpoint")
        rows = np.asarray(state["curve"]) if state is not None else np.zeros((0, 8))
        rows = rows.reshape(-1, len(CURVE_COLUMNS))
        curve = {c: rows[:, i] for i, c in enumerate(CURVE_COLUMNS)}
    counters = {}
    state = info.load_npz("checkpoint")
    if state is not None:
        counters = json.loads(str(state["counters"]))
    faults = info.load_npz("faults") or {}
    if "n_faults" in counters and faults:
        faults = {k: v[:counters["n_faults"]] for k, v in faults.items()}
    return {"curve": curve, "faults": faults, "seeds": info.load_npz("seeds") or {},
            "summary": info.summary or {}, "config": info.config}
