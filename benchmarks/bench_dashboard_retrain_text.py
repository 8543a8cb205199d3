"""An IMDB retraining at the Retrain form's smallest setting, timed by stage.

Makes a small synonym-gradient run on imdb-lstm (its adversarial inputs are the extra
training data; a fresh temporary run store), then retrains as the form's smallest setting asks
(1 epoch, 1 repeat, control arm, 50 inputs for RConC, no held-out sets) with the samples the
form offers for text models (--evaluation-inputs, default 2000, and --fit-inputs, clean
training inputs per epoch, default 4000; 0: all, as before) and prints the progress as it
comes, the time of each stage the run recorded (loading, evaluating the original, each arm's
training and evaluation) and the total, beside the issue's bound (2 minutes).

    .venv/bin/python benchmarks/bench_dashboard_retrain_text.py [--evaluation-inputs 2000]
        [--fit-inputs 4000]

A measurement on this machine (nothing asserted).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--evaluation-inputs", type=int, default=2000)
    ap.add_argument("--fit-inputs", type=int, default=4000)
    ap.add_argument("--seeds", type=int, default=8)
    args = ap.parse_args()
    from rnncon_core.jobs import run_generation
    from rnncon_core.jobs.retraining import run_retraining
    from rnncon_core.runs import RunStore
    store = RunStore(Path(tempfile.mkdtemp(prefix="rnncon-bench-")) / "runs")
    t = time.perf_counter()
    src = run_generation("imdb-lstm", "synonym-gradient", args.seeds, store=store)
    print(f"source: {src['n_adversarial']} adversarial of {src['n_seeds']} reviews "
          f"({time.perf_counter() - t:.1f} s, not part of the retraining)", flush=True)
    if not src["n_adversarial"]:
        sys.exit("the source run found no adversarial review: nothing to retrain with")
    marks: list[tuple[float, str]] = []
    start = time.perf_counter()

    def progress(event: dict) -> None:
        msg = event.get("message", "")
        if "batch" in event and event["batch"] > 1:   # the first batch of an epoch only
            return
        if not marks or marks[-1][1] != msg:
            marks.append((time.perf_counter() - start, msg))
            print(f"{marks[-1][0]:7.1f} s  {event.get('done')}/{event.get('total')}  {msg}",
                  flush=True)
    s = run_retraining("imdb-lstm", src["run_id"], epochs=1, repeats=1, control=True,
                       coverage_inputs=50, transfer_seeds=0, store=store, progress=progress,
                       evaluation_inputs=args.evaluation_inputs or None,
                       fit_inputs=args.fit_inputs or None)
    total = time.perf_counter() - start
    print(f"\nstages: {s.get('stage_seconds')}")
    print(f"retraining at the smallest setting: {total:.1f} s (bound 120 s: "
          f"{'within' if total <= 120 else 'OVER'}); {s.get('trained_on')}; "
          f"evaluated on {s['evaluated_on']}")


if __name__ == "__main__":
    main()
