"""Coverage speed on stacked-mnist-lstm (and edge memory on stacked-imdb-lstm). A script, not a test.

    .venv/bin/python benchmarks/bench_coverage.py [--n 10000] [--naive 20] [--imdb-memory]
                                                  [--ray]

Prints, each measured in this one run: a *new* criterion object updating 2,000 inputs against
model.predict on them (the graphs are compiled once per model and configuration), unit and edge
RConC on N inputs against predict, the naive per-input implementations, the peak memory of edge
RConC on stacked-imdb-lstm (--imdb-memory, in a child process) and the speed-up of 2 Ray workers
over 1 (--ray).

Inputs: our MNIST split has 8,000 train + 2,000 test digits; 10,000 inputs = both splits
(said in the output). Ratios are measured in this one run, against model.predict on the same
inputs; the naive per-input implementation runs on a sample and is scaled to N.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np


def _model(name):
    from rnncon_core.zoo import build_model, load_model, shipped_models
    if name in shipped_models():
        return load_model(name), "shipped (trained)"
    return build_model(name, seed=0), "untrained build_model (timings do not depend on training)"


def naive_unit(tracer, x):
    """Per input: trace, then NumPy min-max over all unit contributions and a running max."""
    best = None
    for i in range(len(x)):
        tr = tracer(x[i:i + 1])
        vals = []
        for spec in tracer.specs:
            lt = tr.layers[spec.name]
            if spec.kind == "dense":
                vals.append(lt.pre.numpy().ravel())
            else:
                vals += [np.concatenate([lt.xU[g].numpy() for g in spec.gates], 2).ravel(),
                         np.concatenate([lt.hW[g].numpy() for g in spec.gates], 2).ravel()]
        v = np.concatenate(vals)
        v = (v - v.min()) / (v.max() - v.min())
        best = v if best is None else np.maximum(best, v)
    return best


def naive_edge(tracer, x):
    """Per input: every product source x weight materialized, min-max, running max."""
    best = None
    for i in range(len(x)):
        tr = tracer(x[i:i + 1])
        vals = []
        for spec in tracer.specs:
            lt = tr.layers[spec.name]
            w = tracer._weights[spec.name]
            if spec.kind == "dense":
                vals.append((lt.x.numpy()[0][:, None] * w["kernel"].numpy()).ravel())
            else:
                vals.append((lt.x.numpy()[0][:, :, None] * w["kernel"].numpy()[None]).ravel())
                vals.append((lt.h_prev.numpy()[0][:, :, None] * w["recurrent_kernel"].numpy()[None]).ravel())
        v = np.concatenate(vals)
        v = (v - v.min()) / (v.max() - v.min())
        best = v if best is None else np.maximum(best, v)
    return best


def imdb_memory(n: int) -> None:
    from rnncon_core.coverage import ContributionCoverage
    model, how = _model("stacked-imdb-lstm")
    x = np.random.default_rng(0).integers(3, 50_000, (n, 500)).astype("int32")
    try:
        from rnncon_core.data import load_dataset
        x = load_dataset("imdb").x_test[:n]
        what = f"the first {n} IMDB test reviews"
    except Exception as e:  # data not installed: random ids of the same shape
        what = f"{n} random id sequences ({type(e).__name__})"
    t0 = time.time()
    cov = ContributionCoverage(model, threshold=0.5, granularity="edge")
    cov.update(x)
    rate = cov.rate()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
    print(f"edge RConC on stacked-imdb-lstm ({how}), {what}: {cov.total:,} edges, "
          f"rate {rate:.4f} at 0.5, {time.time() - t0:.1f}s, peak RSS {peak:.2f} GB")


def ray_speedup(x) -> None:
    """Unit RConC over x on a local Ray runtime with 1 and with 2 workers (same result): the
    first call (the runtime and its actors start, load the model, compile) and a second one
    on the same actors (the work itself)."""
    from rnncon_core.jobs.distributed import coverage, runtime
    cold, warm = {}, {}
    for workers in (1, 2):
        t0 = time.perf_counter()
        with runtime(workers=workers):
            coverage("stacked-mnist-lstm", x, workers=workers)
            cold[workers] = time.perf_counter() - t0
            runs = []
            for _ in range(3):
                t0 = time.perf_counter()
                cov = coverage("stacked-mnist-lstm", x, workers=workers)
                runs.append(time.perf_counter() - t0)
            warm[workers] = min(runs)
        print(f"Ray, {workers} worker(s) of 1 CPU each, unit RConC over {len(x):,} inputs: "
              f"{warm[workers]:.2f} s on started actors (best of 3), {cold[workers]:.2f} s from "
              f"a cold start (rate {cov.rate():.4f})")
    print(f"Ray speed-up of 2 workers over 1 on {os.cpu_count()} cores: "
          f"{warm[1] / warm[2]:.2f} x on started actors (the work), {cold[1] / cold[2]:.2f} x "
          f"from a cold start (runtime, actors, model loading and compiling included)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--naive", type=int, default=20)
    ap.add_argument("--imdb-memory", action="store_true")
    ap.add_argument("--imdb-n", type=int, default=1000)
    ap.add_argument("--ray", action="store_true")
    ap.add_argument("--_imdb-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._imdb_child:
        imdb_memory(args.imdb_n)
        return
    from rnncon_core.coverage import ContributionCoverage
    from rnncon_core.data import load_dataset
    from rnncon_core.trace import Tracer

    ds = load_dataset("mnist")
    x = np.concatenate([ds.x_test, ds.x_train])[:args.n]
    print(f"inputs: {len(x):,} MNIST digits (our test split of {len(ds.x_test):,} first, then "
          f"train digits; the split holds {len(ds.x_test) + len(ds.x_train):,} in all)")
    model, how = _model("stacked-mnist-lstm")
    print(f"model: stacked-mnist-lstm, {how}")
    model.predict(x[:64], batch_size=512, verbose=0)               # warm up
    t0 = time.perf_counter()
    model.predict(x, batch_size=512, verbose=0)
    t_pred = time.perf_counter() - t0
    print(f"model.predict:            {t_pred:7.2f} s")

    x2k = x[:2000]
    for gran in ("unit", "edge"):
        first = ContributionCoverage(model, granularity=gran)
        first.update(x2k).rate()                                    # the model's first use
        t_new, t_reused, t_p = [], [], []
        for _ in range(3):                                          # interleaved, medians
            t0 = time.perf_counter()
            model.predict(x2k, batch_size=512, verbose=0)
            t_p.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            ContributionCoverage(model, threshold=0.3, granularity=gran).update(x2k).rate()
            t_new.append(time.perf_counter() - t0)
            first.reset()
            t0 = time.perf_counter()
            first.update(x2k).rate()
            t_reused.append(time.perf_counter() - t0)
        tn, tr, tp = (float(np.median(v)) for v in (t_new, t_reused, t_p))
        print(f"new {gran:4s} criterion object, 2,000 inputs: {tn:6.2f} s = {tn / tp:5.2f} x "
              f"predict ({tp:.2f} s); the same update on a reused object {tr:.2f} s = "
              f"{tr / tp:5.2f} x (medians of 3; targets for a new object: unit 1.3 x, edge 3 x)")

    results = {}
    for gran in ("unit", "edge"):
        cov = ContributionCoverage(model, threshold=0.25, granularity=gran)
        cov.update(x[:8]); cov.rate()                               # compile the TF functions
        cov.reset()
        t0 = time.perf_counter()
        cov.update(x)
        rate = cov.rate()
        t = time.perf_counter() - t0
        t1 = time.perf_counter()
        reads = [cov.rate(th) for th in np.linspace(0.05, 0.95, 19)]
        t_read = (time.perf_counter() - t1) / 19
        results[gran] = (cov, t)
        print(f"{gran:5s} RConC update+rate:  {t:7.2f} s  = {t / t_pred:5.2f} x predict  "
              f"({cov.total:,} contributions, rate {rate:.4f} at 0.25; reading a new threshold "
              f"{1000 * t_read:.2f} ms; by_layer {1000 * _timed(cov.by_layer, 0.6):.1f} ms)")
    tracer = Tracer(model)
    k = args.naive
    for gran, fn in (("unit", naive_unit), ("edge", naive_edge)):
        fn(tracer, x[:1])
        t0 = time.perf_counter()
        best = fn(tracer, x[:k])
        t = (time.perf_counter() - t0) * len(x) / k
        cov = ContributionCoverage(model, granularity=gran, normalize="model",
                                   values="signed").update(x[:k])          # Eq. 3 as written
        err = float(np.abs(best - cov._state.max_values()).max())
        print(f"naive {gran} (per input, {k} inputs scaled to {len(x):,}): {t:8.1f} s = "
              f"{t / t_pred:6.1f} x predict; fast/naive {results[gran][1] / t:.3f}; "
              f"max |fast - naive| on the sample {err:.1e}")
    if args.ray:
        ray_speedup(x[:min(len(x), 4000)])
    if args.imdb_memory:
        subprocess.run([sys.executable, __file__, "--_imdb-child", "--imdb-n", str(args.imdb_n)],
                       check=False)


def _timed(fn, *a):
    t0 = time.perf_counter()
    fn(*a)
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
