"""Issue 38's speed targets for ``rnncon_core.prioritize``, measured (not a timed test):

    nice -n 0 .venv/bin/python benchmarks/bench_prioritize.py [--n 10000] [--repeats 3]

On mnist-lstm, ``--n`` inputs (MNIST's 2,000 test digits then its training digits: the
offline MNIST has 10,000 in all), after one warm-up of each call (graphs traced):

- ``predict``: one ``model.predict(x, batch_size=512)`` (the reference; 512 is the batch
  ``prioritize`` uses);
- ``uncertainty``: ``prioritize(model, x, by=gini,margin,entropy, repeats=1)``: target
  <= 1.5 x predict;
- ``lsa`` / ``dsa``: ``prioritize(model, x, by=lsa | dsa)`` with the surprise model already
  profiled (``reuse``: the 2,000 training inputs' traces are read once per model): target
  <= 10 x predict; ``surprise_profile``: the profiling itself (once per model), apart.

Each time is the median of ``--repeats`` runs; prints one JSON line per measurement with
the ratios and the 1-minute load average (the machine is shared: read the load beside them).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np


def _line(**kw) -> None:
    kw["load_avg_1min"] = round(os.getloadavg()[0], 2)
    print(json.dumps(kw), flush=True)


def _median_seconds(fn, repeats: int) -> float:
    fn()                                                   # warm-up: graphs traced
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--model", default="mnist-lstm")
    args = ap.parse_args()
    from rnncon_core.data import load_dataset
    from rnncon_core.prioritize import prioritize, signals
    from rnncon_core.zoo import load_model
    model = load_model(args.model)
    ds = load_dataset("mnist")
    x = np.concatenate([ds.x_test, ds.x_train])[:args.n].astype(np.float32)
    base = _median_seconds(lambda: model.predict(x, batch_size=512, verbose=0), args.repeats)
    _line(measure="predict", model=args.model, inputs=len(x), seconds=round(base, 3))
    unc = _median_seconds(lambda: prioritize(model, x, by=list(signals.UNCERTAINTY),
                                             repeats=1), args.repeats)
    _line(measure="uncertainty", signals=list(signals.UNCERTAINTY), inputs=len(x),
          seconds=round(unc, 3), ratio_to_predict=round(unc / base, 2), target="<= 1.5")
    reuse: dict = {}
    t0 = time.perf_counter()
    prioritize(model, x[:1], by=["lsa"], x_train=ds.x_train, reuse=reuse)
    _line(measure="surprise_profile", training_inputs=2000,
          seconds=round(time.perf_counter() - t0, 3), note="once per model (includes one "
          "input's LSA and the traced graphs' first call)")
    for sig in signals.SURPRISE:
        s = _median_seconds(lambda sig=sig: prioritize(model, x, by=[sig], x_train=ds.x_train,
                                                       reuse=reuse, repeats=1), args.repeats)
        _line(measure=sig, inputs=len(x), seconds=round(s, 3),
              ratio_to_predict=round(s / base, 2), target="<= 10")


if __name__ == "__main__":
    main()
