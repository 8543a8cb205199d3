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

import struct
import time
import zipfile
import zlib
from typing import Callable

from ..errors import InputError, JobCancelled, RNNConError
from .distributed import run_on_ray
from .loop import CAMPAIGN_PARAMS, YIELD_BEFORE, Campaign
from .mutations import families, input_kind
from .prepare import (ValiditySpec, ensure_profile, guide_names, load_seeds, make_campaign,
                      validity_spec)
from .record import (Budget, CampaignFiles, campaign_budget, checkpoint, finish, load_checkpoint,
                     read_rows, report_progress, save_state, write_rows)


def run_campaign(model, dataset: str | None = None, *, guide: str = "rconc", budget=None,
                 seeds: int | None = None, seed: int = 0, inputs=None, labels=None,
                 guide_params: dict | None = None, store=None,
                 progress: Callable[[int, int], None] | None = None,
                 should_stop: Callable[[], bool] | None = None, resume: str | None = None,
                 workers: int = 0, ray_address: str | None = None, ray_runtime=None,
                 log=None, validity_checks: str | None = None, reference_model=None,
                 **params) -> dict:
    """Run a campaign on ``model`` (a shipped name, a .keras path or a Keras model) from the
    first ``seeds`` test inputs it predicts right (None: ``prepare.DEFAULT_SEEDS``, 1,000
    for images and sequences, 100 for text), until ``budget`` is spent, guided by the
    criterion ``guide`` (any of ``coverage.CRITERIA``, or a baseline: "none", "faults");
    ``budget``: a ``Budget`` or its text (None: ``record.campaign_budget``'s default).
    ``params``: the declared mutation and loop parameters (``CAMPAIGN_PARAMS``). Stored in the
    run store (kind "campaign"); returns the summary with ``run_id``. ``resume``: a campaign
    run's id to go on from (its settings are taken; ``budget`` is the total, including what it
    spent).
    ``workers``/``ray_address``: one queue per Ray worker (``campaign.distributed``; give
    ``ray_runtime=rnncon_core.jobs.distributed.runtime``).
    ``store``: the run store to write to (``rnncon_core.runs.RunStore``; given by the caller,
    since the store is a layer above campaigns).
    ``validity_checks``: the checks each fault passes before it counts as valid ("default": the data
    set's, ``validity.DEFAULT_CHECKS``; "off"; or check names, comma-separated);
    ``reference_model``: a classifier of the user's own used as the reference."""
    if store is None:     # the run store is a layer above this one: the caller opens it
        raise InputError("run_campaign needs a run store: store=rnncon_core.runs.RunStore() "
                         "(or RunStore(DIR))")
    old, stored_validity = None, None
    if resume is not None:
        old = _resumable(store, resume)
        cfg = old.config
        model = cfg["model"] if isinstance(model, str) or model is None else model
        dataset, guide, seeds, seed = cfg["dataset"], cfg["guide"], cfg["seeds"], cfg["seed"]
        guide_params, params = cfg["guide_params"], {**YIELD_BEFORE, **cfg["params"]}
        workers = cfg.get("workers", 0) if not workers else workers
        stored_validity = cfg.get("validity")
        if dataset == "inputs":            # the user's own seeds: the ones it stored
            stored = old.load_npz("seeds")
            dataset, inputs, labels = None, stored["x"], stored["y"]
    budget = campaign_budget(budget, old)
    values = CAMPAIGN_PARAMS.check("a campaign", params)
    if guide not in guide_names():
        raise InputError(f"unknown guide {guide!r}; choose one of {', '.join(guide_names())}")
    if workers or ray_address:
        if old is not None:
            validity_checks = ValiditySpec.of(stored_validity, dataset)
        return run_on_ray(model, dataset, guide=guide, budget=budget, seeds=seeds, seed=seed,
                          inputs=inputs, labels=labels, guide_params=guide_params,
                          store=store, progress=progress,
                          should_stop=should_stop, old=old, workers=workers or 1,
                          ray_address=ray_address, values=values, log=log,
                          ray_runtime=ray_runtime, validity_checks=validity_checks,
                          reference_model=reference_model)
    keras_model, x, y, x_train, ds_name = load_seeds(model, dataset, seeds, inputs, labels)
    seeds = len(x) if seeds is None else seeds
    kind = input_kind(keras_model)
    families(kind, values.get("mutations"))        # before the profile is built
    ensure_profile(keras_model, x_train, kind, log)
    spec = ValiditySpec.of(stored_validity, ds_name) if old is not None else \
        validity_spec(validity_checks, ds_name, reference_model, kind, log, should_stop)
    camp = make_campaign(keras_model, x, y, guide, guide_params, values, seed, kind, spec)
    config = {"model": str(model) if isinstance(model, str) else "in-memory model",
              "dataset": ds_name, "guide": guide, "guide_params": guide_params or {},
              "budget": budget.text(), "seeds": int(seeds), "seed": int(seed),
              "params": {k: values[k] for k in values}, "kind": kind, "workers": 0,
              "validity": None if spec is None else spec.config(),
              "resumed_from": resume}
    with store.start("campaign", model=config["model"], method=guide, config=config) as run:
        summary = _in_run(CampaignFiles(run), camp, old, x, y, config, budget, progress,
                          should_stop)
    return {"run_id": run.run_id, **summary}


def _resumable(store, resume: str):
    """The stored campaign run ``resume``, or an InputError saying why it cannot go on."""
    old = store.get(resume)
    if old.kind != "campaign":
        raise InputError(f"run {resume} is a {old.kind} run, not a campaign")
    if old.status == "running":
        raise InputError(f"run {resume} is still running: cancel it first (`rnncon runs "
                         f"--cancel {resume}`)")
    check_resumable(store, resume)
    return old


def _in_run(files: CampaignFiles, camp: Campaign, old, x, y, config: dict, budget: Budget,
            progress, should_stop) -> dict:
    """The campaign inside its started run: seeds, start or restore, the loop, the end."""
    run = files.run
    run.save_npz("seeds", x=x, y=y)
    if old is not None:
        _restore(camp, old, files)
    else:
        camp.start()
        checkpoint(files, camp, {"queue": (0, len(camp.queue)), "faults": (0, 0)})
    cancelled = every(0.5, run.cancel_requested)
    stop = (lambda: bool(should_stop and should_stop()) or cancelled())
    loop(camp, budget, lambda added: checkpoint(files, camp, added),
         lambda: report_progress(run, camp, budget, progress), stop)
    summary = finish(files, camp, config, budget, stopped=not budget.done(camp))
    if summary["stopped"]:
        raise JobCancelled(f"campaign {run.run_id} was stopped after {camp.batches} "
                           f"batches; resume it with --resume {run.run_id}")
    return summary


# what a damaged checkpoint, rows log or config raises when read (numpy, zipfile, zlib,
# struct, json): reading it is all that is done with it
_DAMAGED = (RNNConError, ValueError, OSError, EOFError, KeyError, IndexError, TypeError,
            struct.error, zipfile.BadZipFile, zlib.error)


def _unreadable(info) -> str | None:
    """Why campaign run ``info`` cannot be resumed from (its checkpoint or rows missing or
    damaged), or None: everything a resume reads is read once, before any work."""
    try:
        if load_checkpoint(info) is None:
            return "it has no checkpoint (checkpoint.npz)"
        read_rows(info, "queue")
        read_rows(info, "faults")
        info.config["guide"], info.config["params"]
    except _DAMAGED as e:
        return f"its checkpoint is damaged ({' '.join(str(e).split())[:160] or type(e).__name__})"
    return None


def _config(info) -> dict:
    try:
        cfg = info.config
    except _DAMAGED:
        return {}
    return cfg if isinstance(cfg, dict) else {}


def check_resumable(store, run_id: str) -> None:
    """An InputError (one line saying what to do) unless campaign ``run_id`` of ``store`` can be
    resumed: its checkpoint and rows read whole. A damaged one points to the last good
    checkpoint (the run it was itself resumed from, and so on) or to starting afresh."""
    info = store.get(run_id)
    if info.kind != "campaign":
        raise InputError(f"run {run_id} is a {info.kind} run, not a campaign")
    why = _unreadable(info)
    if why is None:
        return
    cfg = _config(info)
    earlier, seen = cfg.get("resumed_from"), {run_id}
    while earlier and earlier not in seen:
        seen.add(earlier)
        try:
            before = store.get(earlier)
        except RNNConError:
            break
        if _unreadable(before) is None:
            raise InputError(f"run {run_id} cannot be resumed: {why}; resume from the last good "
                             f"checkpoint, run {earlier}'s (it was resumed from there): "
                             f"rnncon campaign --resume {earlier}")
        earlier = _config(before).get("resumed_from")
    again = (f"rnncon campaign --model {cfg['model']} --guide {cfg.get('guide', 'rconc')} "
             f"--budget {cfg.get('budget', '10m')} --seed {cfg.get('seed', 0)}"
             if cfg.get("model") else "rnncon campaign --model MODEL ...")
    raise InputError(f"run {run_id} cannot be resumed: {why} and no earlier checkpoint of it "
                     f"is good; start afresh: {again}")


def loop(camp: Campaign, budget: Budget, on_batch, on_progress, stop) -> None:
    last = 0.0
    while not budget.done(camp):
        if stop():
            break                   # the last progress below: a stopped run shows its counts
        on_batch(camp.step())
        if time.monotonic() - last > 0.5:
            on_progress()
            last = time.monotonic()
    on_progress()


def every(seconds: float, ask: Callable[[], bool]) -> Callable[[], bool]:
    """``ask`` (a query of the run store) at most every ``seconds``; False in between."""
    last = [float("-inf")]

    def check() -> bool:
        now = time.monotonic()
        if now - last[0] < seconds:
            return False
        last[0] = now
        return ask()
    return check


def _restore(camp: Campaign, old, files: CampaignFiles) -> None:
    """Continue from ``old``'s checkpoint; its rows are copied into the new run first."""
    state = load_checkpoint(old)
    camp.restore(state, read_rows(old, "queue"), read_rows(old, "faults") or {})
    write_rows(files, camp.queue.rows.arrays(),
               camp.faults.rows.arrays() if len(camp.faults) else {})
    save_state(files, camp)


