"""The targets of "Faults a reader would accept", measured in one run:

    python benchmarks/bench_validity.py [--model mnist-lstm] [--calls 6000] [--seeds 200]

- a ``--guide faults`` campaign of ``--calls`` model calls from ``--seeds`` seeds, with the
  validity checks on and (same seed and budget) off: valid distinct faults, fault classes and
  the root seeds behind them; the share of the campaign's time spent on validity and on
  reading features (``validity_share``) and the ratio of the two campaigns' wall times;
- the share of the clean test split the oracle flags (each input checked as its own root);
- the share of valid (and of invalid) faults that ``mnist-features`` (the shipped FID/IS CNN,
  not part of the oracle) reads as the root seed's label (``benchmarks/judge_faults.py``
  adds an SVM and an augmented CNN trained on the spot).
"""
from __future__ import annotations

import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mnist-lstm")
    ap.add_argument("--dataset", default="mnist")
    ap.add_argument("--calls", type=int, default=6000)
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs-dir")
    a = ap.parse_args()
    from rnncon_core.campaign import load_campaign, run_campaign
    from rnncon_core.data import load_dataset
    from rnncon_core.runs import RunStore
    from rnncon_core.validity import oracle_for
    from rnncon_core.zoo import load_model
    store = RunStore(a.runs_dir or tempfile.mkdtemp(prefix="bench-validity-"))
    def campaign(validity):
        return run_campaign(a.model, a.dataset, guide="faults", budget=f"{a.calls}calls",
                            seeds=a.seeds, seed=a.seed, store=store,
                            validity_checks=validity)
    campaign("default")          # warm: the process's first campaign traces what it shares
    runs = {"off": [], "default": []}
    for _ in range(2):           # interleaved, so load changes hit both alike
        for validity in ("off", "default"):
            runs[validity].append(campaign(validity))
    on, off = runs["default"][-1], runs["off"][-1]
    wall = [r["seconds"] for r in runs["default"]], [r["seconds"] for r in runs["off"]]
    print(f"campaign {a.model}, guide faults, {a.calls:,} calls, {a.seeds} seeds "
          f"(run {on['run_id']}):")
    print(f"  validity on : {on['fault_classes']} fault classes of {on['valid_faults']} valid "
          f"distinct faults from {on['fault_roots']} seeds, {on['valid_pairs']} pairs; "
          f"{on['invalid_faults']} invalid set aside; {on['distinct_faults']} distinct by "
          f"abstract state; {on['seconds']:.1f} s")
    print(f"  validity off: {off['distinct_faults']} distinct faults, {off['distinct_pairs']} "
          f"pairs; {off['seconds']:.1f} s")
    print(f"  validity share of the campaign's time: {on['validity_share']:.3f} "
          f"(validity + features {on['validity_seconds']:.2f} s of {on['seconds']:.2f} s); "
          f"wall time on / off: {np.median(wall[0]) / np.median(wall[1]):.2f} (medians of "
          f"{len(wall[0])} interleaved runs each)")
    ds = load_dataset(a.dataset)
    oracle = oracle_for(a.dataset, ds.kind, train=False)
    v = oracle.check(ds.x_test, ds.y_test, ds.x_test)
    print(f"clean test inputs flagged: {np.mean(~v.valid):.2%} of {len(v.valid):,}")
    f = load_campaign(store.get(on["run_id"]))["faults"]
    judge = load_model("mnist-features")
    read = judge.predict(f["x"], verbose=0, batch_size=512).argmax(1)
    valid = f["valid"].astype(bool)
    for what, sel in (("valid", valid), ("invalid", ~valid)):
        if sel.any():
            print(f"mnist-features reads the seed's label on {np.mean(read[sel] == f['label'][sel]):.1%} "
                  f"of the {sel.sum()} {what} faults")


if __name__ == "__main__":
    main()
