"""Issue 29: the two Table 2 rows of the paper's size (500 seeds: RNNCon-Test (Random) and
RNN-Test) with the polishing descents on (``polish_steps``), same seeds, settings and target
draws as the report's rows (``rnncon report generation --seeds 500``), one JSON line per run.

    nohup nice -n 10 .venv/bin/python reports/generation/polish_run.py 30 > reports/generation/polish.jsonl
"""
import json
import os
import sys
import time

from rnncon_core.jobs import run_generation

MODELS = ("mnist-lstm", "mnist-gru", "stacked-mnist-lstm", "stacked-mnist-gru")
ORDER = ("mnist-gru", "stacked-mnist-gru", "mnist-lstm", "stacked-mnist-lstm")   # tightest first


def main(steps: int, n_seeds: int = 500, models=MODELS) -> None:
    for model in models:
        for method in ("rconc", "rnntest"):
            t0 = time.time()
            s = run_generation(model, method, n_seeds, target="random", iterations=50,
                               polish_steps=steps)
            print(json.dumps({"model": model, "method": method, "polish_steps": steps,
                              "n_seeds": s["n_seeds"], "adv_rate": s["adv_rate"],
                              "avg_l2": s["avg_l2"], "avg_l1": s["avg_l1"],
                              "avg_linf": s["avg_linf"],
                              "avg_l2_unminimized": s.get("avg_l2_unminimized"),
                              "mean_activated": s.get("mean_activated"),
                              "minimize_seconds": s.get("minimize_seconds"),
                              "seconds": s["seconds"], "wall": round(time.time() - t0, 1),
                              "load_avg_1min": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 500,
         sys.argv[3].split(",") if len(sys.argv) > 3 else MODELS)
