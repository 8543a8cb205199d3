"""The issue's campaign targets, measured (not a timed test):

    .venv/bin/python benchmarks/bench_campaign.py --model mnist-lstm --minutes 5 --ray-seconds 60

Prints one JSON line per measurement:

- ``campaign``: a campaign of ``--minutes`` (target: 5 minutes on mnist-lstm, 2 cores: >= 200
  distinct faulty inputs with >= 15 distinct (true, predicted) pairs); ``overhead`` is the
  loop's wall time over the time the model's own forward and backward passes took
  (target <= 1.5);
- ``memory``: the queue's and faults' bytes and the process's peak RSS after it, and the
  queue's growth per minute extrapolated to 30 minutes (target <= 2 GB);
- ``ray``: ``--ray-seconds`` campaigns with 1 and with 2 Ray workers (target: 2 workers >= 1.6
  x the distinct faults per minute of one), when ``--ray-seconds`` > 0.

Shorter than the targets' budgets where the machine is shared: the line says what ran.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time


def _line(**kw) -> None:
    kw["load_avg_1min"] = os.getloadavg()[0]
    print(json.dumps(kw), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mnist-lstm")
    ap.add_argument("--guide", default="rconc")
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--ray-seconds", type=float, default=0.0)
    args = ap.parse_args()

    from rnncon_core.campaign import run_campaign
    from rnncon_core.runs import RunStore
    store = RunStore(tempfile.mkdtemp(prefix="bench-campaign-"))
    budget = f"{args.minutes * 60:g}s"
    s = run_campaign(args.model, guide=args.guide, budget=budget, seeds=args.seeds,
                     store=store)
    _line(measure="campaign", model=args.model, guide=args.guide, budget=budget,
          distinct_faults=s["distinct_faults"], distinct_pairs=s["distinct_pairs"],
          faults_total=s["faults_total"], calls=s["calls"], coverage=s["coverage"],
          overhead=s["overhead"], model_seconds=s["model_seconds"],
          targets={"faults>=200 in 5 min": s["distinct_faults"] >= 200,
                   "pairs>=15": s["distinct_pairs"] >= 15, "overhead<=1.5": (
                       s["overhead"] or 99) <= 1.5})
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    per_min = s["memory_mb"] / max(1e-9, s["seconds"] / 60)
    _line(measure="memory", queue_and_faults_mb=s["memory_mb"], peak_rss_mb=round(rss, 1),
          queue=s["queue"], mb_per_minute=round(per_min, 2),
          projected_30min_mb=round(rss + per_min * max(0.0, 30 - s["seconds"] / 60), 1),
          note="the queue is capped (max_queue entries); RSS includes TensorFlow")
    if args.ray_seconds > 0:
        from rnncon_core.jobs.distributed import runtime
        rates = {}
        for workers in (1, 2):
            t0 = time.perf_counter()
            r = run_campaign(args.model, guide=args.guide, budget=f"{args.ray_seconds:g}s",
                             seeds=args.seeds, store=store, workers=workers,
                             ray_runtime=runtime)
            rates[workers] = 60 * r["distinct_faults"] / r["seconds"]
            _line(measure="ray", workers=workers, budget=f"{args.ray_seconds:g}s",
                  distinct_faults=r["distinct_faults"], calls=r["calls"],
                  faults_per_minute=round(rates[workers], 1),
                  wall_with_startup=round(time.perf_counter() - t0, 1))
        _line(measure="ray-speedup", speedup=round(rates[2] / max(1e-9, rates[1]), 3),
              target=">= 1.6")


if __name__ == "__main__":
    main()
