"""The issue's campaign targets, measured (not a timed test). Run under the bench lock:

    flock /tmp/rnncon-bench.lock nice -n 0 .venv/bin/python benchmarks/bench_campaign.py \
        --overhead-calls 20000 --minutes 5 --ray-seconds 60

Prints one JSON line per measurement, each with the 1-minute load average:

- ``overhead`` (per guide of ``--guides``, default rconc, nc, none): a campaign of
  ``--overhead-calls`` model calls; every model call it made (the batch's forward pass, the
  gradient steps, the re-prediction of new faults) is recorded with its inputs, and after the
  campaign the model's OWN forward (its compiled Keras call, ``generate.base.compiled_forward``)
  and backward (the gradient the mutations use) passes are run again on the same inputs with
  the same batch sizes, in the same process. The loop's wall time (dry run, mutations,
  coverage, faults, checkpoints) over: ``overhead_fwd_bwd_every_input``, a forward and a
  backward pass of every input the loop ran through the model (the target's reading: <= 1.5);
  ``overhead_passes_made``, only the passes the loop needed (a forward of each, a backward of
  the gradient mutations' parents; stricter).
- ``campaign``: a campaign of ``--minutes`` (target: 5 minutes on mnist-lstm, 2 cores: >= 200
  distinct faulty inputs with >= 15 distinct (true, predicted) pairs).
- ``memory``: the process's peak RSS after it, the queue's and faults' bytes, and (with
  ``--memory-calls``) a campaign of that many model calls with its peak RSS growth (target:
  <= 2 GB for a 30-minute campaign).
- ``yield``: one process, budget ``--yield-calls`` model calls (counts that do not depend on
  the load): f@N, the distinct faults, and p@N, the distinct (true, predicted) pairs, after
  N = 1/8, 1/4, 1/2 and all of the budget, read from the run's curve (per guide of
  ``--guides``).
- ``ray``: ``--ray-seconds`` campaigns with 1 and with 2 Ray workers (one CPU each, one TF
  thread each); the speed-up in model calls per second, in distinct faults per minute at the
  same wall time, and in the time to reach the distinct faults one worker found (target: 2
  workers >= 1.6 x the distinct faults per minute of one).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time

import numpy as np


def _line(**kw) -> None:
    kw["load_avg_1min"] = round(os.getloadavg()[0], 2)
    print(json.dumps(kw), flush=True)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Recorder:
    """Records every model call a campaign makes (its inputs), outside the warm-up."""

    def __init__(self):
        from rnncon_core.campaign import loop
        self.loop, self.calls, self.camp, self.on = loop, [], None, True
        C = loop.Campaign
        self.saved = {k: getattr(C, k) for k in ("__init__", "warm_up", "predict", "gradient",
                                                  "run") if hasattr(C, k)}
        rec = self

        def init(camp, *a, **kw):
            rec.saved["__init__"](camp, *a, **kw)
            rec.camp = camp

        def warm_up(camp):
            rec.on = False
            try:
                rec.saved["warm_up"](camp)
            finally:
                rec.on = True

        def forward(name):
            def call(camp, x, *a):
                if rec.on:
                    rec.calls.append(("forward", np.array(x), None))
                return rec.saved[name](camp, x, *a)
            return call

        def gradient(camp, x, y):
            if rec.on:
                rec.calls.append(("backward", np.array(x), np.array(y)))
            return rec.saved["gradient"](camp, x, y)
        C.__init__, C.warm_up, C.gradient = init, warm_up, gradient
        C.predict = forward("predict")
        if "run" in self.saved:
            C.run = forward("run")

    def close(self):
        for k, v in self.saved.items():
            setattr(self.loop.Campaign, k, v)

    def replay(self) -> dict:
        """The model's own forward and backward passes on the recorded inputs, timed."""
        import tensorflow as tf

        from rnncon_core.generate.base import compiled_forward
        from rnncon_core.zoo import class_labels
        model = self.camp.model
        fwd = compiled_forward(model)
        grad = self.loop._grad_fn(model) if any(k == "backward" for k, _, _ in self.calls) \
            else None
        dtype = tf.int32 if self.camp.kind == "text" else tf.float32
        for kind, x, y in self.calls[:4]:           # graphs traced before the clock
            class_labels(np.asarray(fwd(tf.constant(x[:2], dtype))))
            if grad is not None:
                grad(x[:2].astype(np.float32), np.zeros(min(2, len(x)), np.int64))
        secs = {"forward": 0.0, "backward": 0.0, "backward_all": 0.0}
        n = {"forward": 0, "backward": 0}
        for kind, x, y in self.calls:
            t0 = time.perf_counter()
            if kind == "forward":
                for i in range(0, len(x), 512):
                    pred = class_labels(np.asarray(fwd(tf.constant(x[i:i + 512], dtype))))
            else:
                grad(x, y)
            secs[kind] += time.perf_counter() - t0
            n[kind] += len(x)
            if kind == "forward" and grad is not None:      # a backward of every input too
                t0 = time.perf_counter()
                grad(x.astype(np.float32), pred)
                secs["backward_all"] += time.perf_counter() - t0
        return {"forward_seconds": round(secs["forward"], 3), "forward_inputs": n["forward"],
                "backward_seconds": round(secs["backward"], 3),
                "backward_inputs": n["backward"],
                "backward_every_input_seconds": round(secs["backward_all"], 3),
                "calls": len(self.calls)}


def overhead(model, guide, calls, seeds, store) -> None:
    from rnncon_core.campaign import run_campaign
    run_campaign(model, guide=guide, budget="200calls", seeds=seeds, store=store)  # warm
    rec = Recorder()
    try:
        s = run_campaign(model, guide=guide, budget=f"{calls}calls", seeds=seeds,
                         store=store)
        r = rec.replay()
    finally:
        rec.close()
    own = r["forward_seconds"] + r["backward_seconds"]
    every = r["forward_seconds"] + r["backward_every_input_seconds"]
    _line(measure="overhead", model=model, guide=guide, budget=f"{calls}calls",
          loop_seconds=s["seconds"], **r, batches=s["batches"],
          overhead_fwd_bwd_every_input=round(s["seconds"] / every, 3) if every else None,
          overhead_passes_made=round(s["seconds"] / own, 3),
          target="<= 1.5")


def campaign(model, guide, minutes, seeds, store, params) -> None:
    from rnncon_core.campaign import run_campaign
    rss0 = _rss_mb()
    s = run_campaign(model, guide=guide, budget=f"{minutes * 60:g}s", seeds=seeds,
                     store=store, **params)
    _line(measure="campaign", model=model, guide=guide, budget=f"{minutes * 60:g}s",
          params=params,
          distinct_faults=s["distinct_faults"], distinct_pairs=s["distinct_pairs"],
          fault_classes=s.get("fault_classes"), valid_faults=s.get("valid_faults"),
          invalid_faults=s.get("invalid_faults"), fault_roots=s.get("fault_roots"),
          valid_pairs=s.get("valid_pairs"), validity_share=s.get("validity_share"),
          faults_total=s["faults_total"], calls=s["calls"], batches=s["batches"],
          coverage=s["coverage"], queue=s["queue"], loop_over_model_calls=s["overhead"],
          met={"faults>=200": s["distinct_faults"] >= 200,
               "pairs>=15": s["distinct_pairs"] >= 15})
    _line(measure="memory", after=f"{minutes:g}-minute campaign", peak_rss_mb=round(_rss_mb(), 1),
          rss_before_mb=round(rss0, 1), queue_and_faults_mb=s["memory_mb"], queue=s["queue"],
          calls=s["calls"])


def memory(model, guide, calls, seeds, store) -> None:
    from rnncon_core.campaign import run_campaign
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    s = run_campaign(model, guide=guide, budget=f"{calls}calls", seeds=seeds, store=store)
    _line(measure="memory", model=model, guide=guide, budget=f"{calls}calls",
          seconds=round(time.perf_counter() - t0, 1), peak_rss_mb=round(_rss_mb(), 1),
          rss_before_mb=round(rss0, 1), queue_and_faults_mb=s["memory_mb"], queue=s["queue"],
          distinct_faults=s["distinct_faults"], target="<= 2048 MB")


def yield_curve(model, guide, calls, seeds, store, params, pool) -> None:
    from rnncon_core.campaign import load_campaign, run_campaign
    t0 = time.perf_counter()
    r = run_campaign(model, guide=guide, budget=f"{calls}calls", seeds=seeds, store=store,
                     **_pool(model, pool), **params)
    c = load_campaign(store.get(r["run_id"]))["curve"]
    out = {}
    for n in (calls // 8, calls // 4, calls // 2, calls):
        i = min(int(np.searchsorted(c["calls"], n)), len(c["calls"]) - 1)
        out[f"f@{n}"] = int(c["distinct_faults"][i])
        out[f"p@{n}"] = int(c["distinct_pairs"][i])
    _line(measure="yield", model=model, guide=guide, seeds=_n_seeds(store, r), pool=pool, params=params,
          **out,
          faults_total=r["faults_total"], queue=r["queue"],
          seconds=round(time.perf_counter() - t0, 1))


def _params(text: str) -> dict:
    """"explore_faults=true,stale_picks=4": the declared campaign parameters."""
    from rnncon_core.campaign import CAMPAIGN_PARAMS
    out = {}
    for item in filter(None, (text or "").split(",")):
        k, _, v = item.partition("=")
        out[k] = CAMPAIGN_PARAMS[k].parse(v)
    return out


def _n_seeds(store, r) -> int:
    """The seeds a campaign ran from (fewer than asked when the model gets fewer right)."""
    return len(store.get(r["run_id"]).load_npz("seeds")["y"])


def _pool(model: str, pool: str) -> dict:
    """run_campaign's seed arguments: "test", the data set's test split (its first --seeds
    inputs the model predicts right); "all", its training and test splits together, given as
    the user's own inputs (a larger pool for campaigns that outgrow one process)."""
    if pool == "test":
        return {}
    from rnncon_core.data import load_dataset
    from rnncon_core.zoo import model_datasets
    ds = load_dataset(model_datasets(model, None)[0])
    return {"inputs": np.concatenate([ds.x_test, ds.x_train]),
            "labels": np.concatenate([ds.y_test, ds.y_train])}


def ray(model, guide, seconds, seeds, store, params, pool) -> None:
    from rnncon_core.campaign import load_campaign, run_campaign
    from rnncon_core.jobs.distributed import runtime
    out = {}
    for workers in (1, 2):
        t0 = time.perf_counter()
        r = run_campaign(model, guide=guide, budget=f"{seconds:g}s", seeds=seeds,
                         store=store, workers=workers, ray_runtime=runtime,
                         **_pool(model, pool), **params)
        curve = load_campaign(store.get(r["run_id"]))["curve"]
        out[workers] = (r, curve)
        _line(measure="ray", workers=workers, seeds=_n_seeds(store, r), pool=pool,
              budget=f"{seconds:g}s",
              seconds=r["seconds"], distinct_faults=r["distinct_faults"],
              distinct_pairs=r["distinct_pairs"], worker_faults=r.get("worker_faults"),
              duplicate_faults=r.get("duplicate_faults"), calls=r["calls"],
              calls_per_second=round(r["calls"] / r["seconds"], 1),
              faults_per_minute=round(60 * r["distinct_faults"] / r["seconds"], 1),
              wall_with_startup=round(time.perf_counter() - t0, 1))
    (r1, c1), (r2, c2) = out[1], out[2]
    reach = np.flatnonzero(np.asarray(c2["distinct_faults"]) >= r1["distinct_faults"])
    t_reach = float(np.asarray(c2["seconds"])[reach[0]]) if len(reach) else None

    def at(curve, t):               # distinct faults found by wall time t (s)
        i = int(np.searchsorted(np.asarray(curve["seconds"]), t, side="right")) - 1
        return int(np.asarray(curve["distinct_faults"])[i]) if i >= 0 else 0
    windows = [t for t in (10, 15, 20, 30, 45, 60, 90, 120) if t <= seconds]
    _line(measure="ray-curves", pool=pool, seconds=windows,
          one_worker=[at(c1, t) for t in windows], two_workers=[at(c2, t) for t in windows],
          ratio=[round(at(c2, t) / max(1, at(c1, t)), 3) for t in windows])
    _line(measure="ray-speedup", seeds=_n_seeds(store, r1), pool=pool, params=params,
          calls_per_second=round((r2["calls"] / r2["seconds"]) / (r1["calls"] / r1["seconds"]),
                                 3),
          faults_per_minute_same_wall=round((r2["distinct_faults"] / r2["seconds"]) /
                                            max(1e-9, r1["distinct_faults"] / r1["seconds"]), 3),
          faults_per_minute_to_reach_one_workers_faults=(
              round(r1["seconds"] / t_reach, 3) if t_reach else None),
          target=">= 1.6")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mnist-lstm")
    ap.add_argument("--guide", default="rconc", help="guide of --minutes/--memory/--ray")
    ap.add_argument("--guides", default="rconc,nc,none", help="guides of --overhead-calls")
    ap.add_argument("--overhead-calls", type=int, default=0)
    ap.add_argument("--minutes", type=float, default=0.0)
    ap.add_argument("--memory-calls", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--ray-seconds", type=float, default=0.0)
    ap.add_argument("--yield-calls", type=int, default=0)
    ap.add_argument("--pool", choices=("test", "all"), default="test",
                    help="seeds of --yield-calls and --ray-seconds: the first --seeds test "
                         "inputs, or of the training and test splits together")
    ap.add_argument("--params", default="", help="campaign parameters of --minutes, "
                    "--yield-calls and --ray-seconds, e.g. explore_faults=true,stale_picks=4")
    args = ap.parse_args()
    params = _params(args.params)

    from rnncon_core.runs import RunStore
    store = RunStore(tempfile.mkdtemp(prefix="bench-campaign-"))
    if args.overhead_calls:
        for guide in args.guides.split(","):
            overhead(args.model, guide, args.overhead_calls, args.seeds, store)
    if args.minutes:
        campaign(args.model, args.guide, args.minutes, args.seeds, store, params)
    if args.memory_calls:
        memory(args.model, args.guide, args.memory_calls, args.seeds, store)
    if args.yield_calls:
        for guide in args.guides.split(","):
            yield_curve(args.model, guide, args.yield_calls, args.seeds, store, params,
                        args.pool)
    if args.ray_seconds:
        ray(args.model, args.guide, args.ray_seconds, args.seeds, store, params, args.pool)


if __name__ == "__main__":
    main()
