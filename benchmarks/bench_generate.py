"""Throughput of test generation: adversarial inputs per second on a shipped model.

    .venv/bin/python benchmarks/bench_generate.py --model mnist-lstm --method rconc --seeds 256

Prints one JSON line per method: seeds, adversarial count and rate, wall seconds (after one
warm-up batch that pays TensorFlow's tracing), adversarial inputs per second, mean iterations,
the number of CPU threads TensorFlow was allowed, and the 1-minute load average (the machine
may be shared). With the minimal-perturbation stage (``--minimize true``, the default) it also
prints the mean L2 before the stage and the stage's share of the time. Issue 29's target:
>= 25 adv/s for mnist-lstm on 2 CPU cores.
"""
from __future__ import annotations

import argparse
import json
import os
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mnist-lstm")
    ap.add_argument("--methods", default="rconc", help="comma separated")
    ap.add_argument("--seeds", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2, help="TensorFlow intra/inter-op threads")
    ap.add_argument("--target", default="random")
    ap.add_argument("--minimize", default="true", choices=("true", "false"),
                    help="the minimal-perturbation stage (gradient methods)")
    ap.add_argument("--min-steps", type=int, default=None)
    ap.add_argument("--polish-steps", type=int, default=None,
                    help="the stage's polishing descents (gradient methods; default: the "
                         "generator's declared default, 30)")
    args = ap.parse_args()

    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    from rnncon_core.data import load_dataset
    from rnncon_core.generate import get_generator
    from rnncon_core.jobs.runner import model_dataset, select_seeds
    from rnncon_core.zoo import load_model

    model = load_model(args.model)
    ds = load_dataset(model_dataset(model, args.model))
    idx = select_seeds(model, ds.x_test, ds.y_test, args.seeds)
    x, y = ds.x_test[idx], ds.y_test[idx]
    for method in args.methods.split(","):
        params = {"target": args.target} if method in ("rconc", "nc", "rnntest") else {}
        if method not in ("noise",):
            params["minimize"] = args.minimize == "true"
            if args.min_steps is not None:
                params["min_steps"] = args.min_steps
            if args.polish_steps is not None:
                params["polish_steps"] = args.polish_steps
        gen = get_generator(method, model, batch_size=args.batch_size, **params)
        gen.generate(x[:8], y[:8])                      # warm-up: tracing, criterion build
        t0 = time.perf_counter()
        res = gen.generate(x, y)
        wall = time.perf_counter() - t0
        s = res.summary(args.model)
        print(json.dumps({"model": args.model, "method": method, "seeds": s["n_seeds"],
                          "n_adversarial": s["n_adversarial"], "adv_rate": s["adv_rate"],
                          "avg_l2": s["avg_l2"], "avg_l1": s["avg_l1"],
                          "avg_linf": s["avg_linf"],
                          "avg_l2_unminimized": s.get("avg_l2_unminimized"),
                          "mean_activated": s.get("mean_activated"),
                          "minimize_seconds": s.get("minimize_seconds"),
                          "config": {k: v for k, v in gen.get_config().items()
                                     if k in ("minimize", "min_steps", "polish_steps", "step",
                                              "iterations")},
                          "seconds": round(wall, 2),
                          "adv_per_second": round(s["n_adversarial"] / wall, 2),
                          "mean_iterations": s["mean_iterations"], "threads": args.threads,
                          "batch_size": args.batch_size,
                          "load_avg_1min": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main()
