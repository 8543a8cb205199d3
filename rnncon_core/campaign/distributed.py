"""Campaigns on Ray: one queue per worker, the guide's coverage states merged by the driver.

Each worker (a Ray actor) loads the model once and runs its own ``Campaign`` over its share of
the seeds (worker w: seeds w, w + N, ...; its random stream ``default_rng(seed)`` for worker 0,
``default_rng([seed, w])`` for the others), ``SYNC_EVERY`` batches at a time (with a time
budget, at most ``ROUND_SECONDS``). After each round the driver merges the workers' guide states
(``Criterion.merge``: the union of what every worker covered) and sends the merged state back,
so each queue keeps what is new to all of them; faults are deduplicated again across workers,
and each round's new distinct faults are sent to every worker (``_share_faults``), so a worker
neither re-predicts nor explores (``explore_faults``) a fault another worker found. With one
worker the merged state is the worker's own, so a campaign with ``workers=1`` and a budget in
model calls finds the inputs and faults one process finds (tests/test_campaign_ray.py). The Ray
runtime comes from the caller (``rnncon_core.jobs.distributed.runtime``, a layer above: it
starts or joins the runtime). The checkpoint (after every round) holds the driver's rows, curve
and merged state and every worker's own state; ``resume`` restores each worker and goes on (the
same number of workers).
"""
from __future__ import annotations

import os
import time

import numpy as np

from ..errors import InputError, JobCancelled
from ..lazy import tf
from ..zoo import load_model, with_steps
from . import prepare
from .loop import Campaign
from .prepare import make_campaign, make_guide
from .queue import Rows
from .record import (CampaignFiles, durable_now, finish, load_checkpoint, read_rows,
                     report_progress, save_checkpoint, sync_rows, write_rows)

# batches a worker runs between the driver's merges (a round); a killed campaign on Ray loses
# at most its last round. 40, not 10: each round costs about two batches' time in the driver's
# calls, merges and checkpoint, so two workers made 1.14x the calls a second with 40 on
# mnist-lstm (reports/bench/campaign.txt section 21)
SYNC_EVERY = 40
# with a time budget a round also ends after this many seconds (40 batches of imdb-lstm take
# ~13 s: the budget's end, a cancel and the live curve would wait that long). Not with a budget
# in model calls, whose rounds stay a fixed number of batches: the same campaign every time.
ROUND_SECONDS = 2.0


def _one_cpu() -> None:
    """TensorFlow in an actor uses the one CPU Ray gave it (``num_cpus=1``): one intra-op and
    one inter-op thread, so N workers on N cores do not fight over them (set before the
    actor's first TensorFlow op; an actor whose TensorFlow already runs keeps its threads)."""
    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:
        pass


class _Worker:
    """One actor: the model, its campaign over a share of the seeds."""

    def __init__(self, model_ref, x, y, guide, guide_params, values, seed, kind, share,
                 validity=None):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        _one_cpu()
        model = with_steps(load_model(model_ref), x.shape[1])
        self.camp = make_campaign(model, x, y, guide, guide_params, values, seed, kind,
                                  validity)
        if share and self.camp.guide is not None:
            self.camp.delta = make_guide(guide, model, guide_params)

    def warm(self) -> None:
        """Trace every graph (before the driver's clock starts)."""
        self.camp.warm_up()

    def start(self) -> dict:
        self.camp.start(warm=False)
        if self.camp.delta is not None:
            self.camp.delta.update(self.camp.x_seeds)
        return self._delta(0, 0)

    def rounds(self, steps: int, calls_left: int | None, seconds: float | None = None) -> dict:
        """Up to ``steps`` batches, fewer once the worker made ``calls_left`` model calls or
        (when given) ``seconds`` have passed; the round's new rows and state."""
        q0, f0 = len(self.camp.queue), len(self.camp.faults)
        end = None if seconds is None else time.monotonic() + seconds
        for _ in range(steps):
            if calls_left is not None and self.camp.calls >= calls_left:
                break
            self.camp.step()
            if end is not None and time.monotonic() >= end:
                break
        return self._delta(q0, f0)

    def _delta(self, q0, f0) -> dict:
        c = self.camp
        out = {"faults": c.faults.rows.arrays(f0), "queue": c.queue.rows.arrays(q0),
               "calls": c.calls, "batches": c.batches, "model_seconds": c.model_seconds,
               "validity_seconds": c.validity_seconds,
               "faults_total": c.faults.total, "guide": None}
        if c.delta is not None:
            out["guide"] = c.delta.state()
            c.delta.reset()
        return out

    def learn(self, keys: dict) -> None:
        """Fault keys the other workers found: no longer new here (not re-predicted, not
        explored as parents, no reset of a root's stale count)."""
        self.camp.faults.know(keys["label"], keys["pred"], keys["state"], keys.get("valid"))

    def load_guide(self, arrays) -> None:
        self.camp.guide.load_state(arrays)

    def guide_state(self) -> dict:
        return self.camp.guide.state()

    def state(self) -> dict:
        """This worker's state but its fault rows (the driver keeps those from the rounds)
        and its curve (the driver's is the campaign's)."""
        return self.camp.state(curve=False)

    def restore(self, state: dict, queue: dict) -> dict:
        faults = {k[7:]: v for k, v in state.items() if k.startswith("faults/")}
        self.camp.restore({k: v for k, v in state.items() if not k.startswith("faults/")},
                          queue, faults)
        return self._delta(len(self.camp.queue), len(self.camp.faults))


def run_on_ray(model, dataset, *, guide, budget, seeds, seed, inputs, labels, guide_params,
               store, progress,
               should_stop, old, workers, ray_address, values, log, ray_runtime=None,
               validity_checks=None, reference_model=None) -> dict:
    """run_campaign's Ray path (same arguments); returns the summary with ``run_id``."""
    if ray_runtime is None:
        raise InputError("a campaign on Ray needs the runtime of rnncon_core.jobs "
                         "(ray_runtime=rnncon_core.jobs.distributed.runtime; the CLI passes it)")
    if not isinstance(model, str):
        raise InputError("--workers needs a model every worker can load (a shipped name or a "
                         ".keras path)")
    keras_model, x, y, x_train, ds_name = prepare.load_seeds(model, dataset, seeds, inputs, labels)
    seeds = len(x) if seeds is None else seeds
    if workers > len(x):
        raise InputError(f"{workers} workers for {len(x)} seeds: each worker needs a seed of "
                         f"its own; give --workers {len(x)} or fewer, or more --seeds")
    kind = prepare.input_kind(keras_model)
    prepare.ensure_profile(keras_model, x_train, kind, log)
    merged = prepare.make_guide(guide, keras_model, guide_params)
    spec = validity_checks if isinstance(validity_checks, prepare.ValiditySpec) or old is not None \
        else prepare.validity_spec(validity_checks, ds_name, reference_model, kind, log,
                                   should_stop)
    config = {"model": model, "dataset": ds_name, "guide": guide,
              "guide_params": guide_params or {}, "budget": budget.text(),
              "seeds": int(seeds), "seed": int(seed), "params": dict(values), "kind": kind,
              "workers": int(workers), "ray_address": ray_address,
              "validity": None if spec is None else spec.config(),
              "resumed_from": None if old is None else old.run_id}
    if old is not None and old.config.get("workers", 0) != workers:
        raise InputError(f"run {old.run_id} ran on {old.config.get('workers') or 'no'} Ray "
                         f"workers: resume it with the same --workers")
    view = Campaign(keras_model, x, y, merged, values, seed, kind, None,     # the driver's
                    validity=None if spec is None else spec.oracle(kind))
    view.queue.capacity = workers * values["max_queue"]
    with ray_runtime(workers, ray_address) as ray, \
            store.start("campaign", model=model, method=guide, config=config) as run:
        # the runtime first: a cluster that does not answer leaves no failed run behind
        run.save_npz("seeds", x=x, y=y)
        files = CampaignFiles(run)
        Worker = ray.remote(num_cpus=1)(_Worker)
        actors = [Worker.remote(model, x[w::workers], y[w::workers], guide, guide_params,
                                values, seed if w == 0 else [seed, w], kind, workers > 1,
                                spec)
                  for w in range(workers)]
        ray.get([a.warm.remote() for a in actors])     # Ray's start-up is not the budget's
        if old is None:
            view.resume_clock()
            _absorb(files, view, ray.get([a.start.remote() for a in actors]), actors, ray)
            _save(files, view, actors, ray)
        else:
            _resume(files, view, old, actors, ray, read_rows)
        share = None if budget.calls is None else -(-budget.calls // workers)
        seconds = ROUND_SECONDS if budget.calls is None else None
        while not budget.done(view):
            if (should_stop is not None and should_stop()) or run.cancel_requested():
                break
            before = view.calls
            deltas = ray.get([a.rounds.remote(SYNC_EVERY, share, seconds) for a in actors])
            _absorb(files, view, deltas, actors, ray)
            report_progress(run, view, budget, progress)
            _save(files, view, actors, ray)
            if view.calls == before:            # every worker spent its share of calls
                break
        found = sum(len(rows) for rows in _worker_faults(view, workers))
        summary = finish(files, view, config, budget, stopped=not budget.done(view),
                         extra={"worker_faults": found,
                                "duplicate_faults": found - len(view.faults)})
        if summary["stopped"]:
            raise JobCancelled(f"campaign {run.run_id} was stopped after {view.batches} "
                               f"batches; resume it with --resume {run.run_id} --workers "
                               f"{workers}")
    return {"run_id": run.run_id, **summary}


def _absorb(files, view: Campaign, deltas, actors, ray) -> None:
    """The workers' rounds into the driver's view: rows, faults (distinct across workers),
    counters; with several workers the guide states merged (``merge``) and sent back."""
    q0, f0 = len(view.queue), len(view.faults)
    own = _worker_faults(view, len(deltas))
    for w, d in enumerate(deltas):             # rows carry their worker (resume splits them)
        if len(d["queue"].get("x", ())):
            view.queue.add(**d["queue"], worker=np.full(len(d["queue"]["x"]), w))
        f = d["faults"]
        if len(f.get("label", ())):
            own[w].append(**f)        # a fault another worker found first stays the worker's
            new = view.faults.new_mask(f["label"], f["pred"], f["state"], f.get("valid"))
            view.faults.add(**{k: v[new] for k, v in f.items()},
                            worker=np.full(int(new.sum()), w))
    view.calls = sum(d["calls"] for d in deltas)
    view.batches = sum(d["batches"] for d in deltas)
    view.model_seconds = sum(d["model_seconds"] for d in deltas)
    view.validity_seconds = sum(d.get("validity_seconds", 0.0) for d in deltas)
    view.faults.total = sum(d["faults_total"] for d in deltas)
    guide = view.guide
    if guide is not None and len(actors) > 1:
        if getattr(view, "_part", None) is None:
            view._part = type(guide).from_config(guide.model, guide.get_config())
        for d in deltas:
            view._part.load_state(d["guide"])
            guide.merge(view._part)
        ref = ray.put(guide.state())
        ray.get([a.load_guide.remote(ref) for a in actors])
    elif guide is not None:                 # one worker: its own state is the whole state
        guide.load_state(deltas[0]["guide"] if deltas[0]["guide"] is not None else
                          ray.get(actors[0].guide_state.remote()))
    _share_faults(view, f0, actors, ray)
    view._record()
    write_rows(files, view.queue.rows.arrays(q0) if len(view.queue) > q0 else {},
               view.faults.rows.arrays(f0) if len(view.faults) > f0 else {}, durable=False)


def _share_faults(view: Campaign, f0: int, actors, ray) -> None:
    """The distinct faults found since row ``f0`` sent to every worker (several workers only),
    so none explores again what another found: the guide states are merged each round, and so
    are the fault keys."""
    if len(actors) < 2 or len(view.faults) <= f0:
        return
    rows = view.faults.rows.arrays(f0)
    ref = ray.put({k: rows[k] for k in ("label", "pred", "state", "valid") if k in rows})
    ray.get([a.learn.remote(ref) for a in actors])


def _worker_faults(view: Campaign, workers: int) -> list:
    """Every worker's own fault rows, kept by the driver from the rounds (for the
    checkpoint: a worker resumes with every fault it found)."""
    if getattr(view, "_own", None) is None:
        view._own = [Rows() for _ in range(workers)]
    return view._own


def _save(files, view: Campaign, actors, ray) -> None:
    """The driver's state and every worker's, in one atomic checkpoint (once a round;
    fsync'ed every ``record.DURABLE_EVERY`` seconds)."""
    states = ray.get([a.state.remote() for a in actors])
    own = _worker_faults(view, len(actors))
    arrays = {**view.state(), **{f"w{w}/{k}": v for w, st in enumerate(states)
                                 for k, v in st.items()},
              **{f"w{w}/faults/{k}": v for w, rows in enumerate(own)
                 for k, v in rows.arrays().items()}}
    durable = durable_now(files)
    if durable:
        sync_rows(files)
    save_checkpoint(files, arrays, durable)


def _resume(files, view: Campaign, old, actors, ray, read_rows) -> None:
    """The driver's view and every worker back to ``old``'s checkpoint."""
    state = load_checkpoint(old)
    queue, faults = read_rows(old, "queue"), read_rows(old, "faults") or {}
    view.restore({k: v for k, v in state.items() if not k.startswith("w")}, queue, faults,
                 warm=False)
    rows = view.queue.rows
    futures = []
    for w, actor in enumerate(actors):
        mine = rows["worker"] == w
        wq = {k: v[mine] for k, v in rows.arrays().items() if k != "worker"}
        ws = {k[len(f"w{w}/"):]: v for k, v in state.items() if k.startswith(f"w{w}/")}
        mine_f = {k[7:]: v for k, v in ws.items() if k.startswith("faults/")}
        if len(mine_f.get("label", ())):
            _worker_faults(view, len(actors))[w].append(**mine_f)
        futures.append(actor.restore.remote(ws, wq))
    ray.get(futures)
    _share_faults(view, 0, actors, ray)       # what each worker knew at the checkpoint
    write_rows(files, view.queue.rows.arrays(),
               view.faults.rows.arrays() if len(view.faults) else {})
    _save(files, view, actors, ray)
