"""Every criterion's figures on fixed inputs, as one JSON: what a refactor of the coverage
engine must leave identical to the last digit (issue 40: "coverage, generation and campaign
figures identical"). A script, not a test.

    .venv/bin/python benchmarks/criteria_figures.py --out FILE.json [--quick]

For every registered criterion (rnncon_core.registry.CRITERIA) at its defaults on the shipped
mnist-lstm (profile from the first 400 training digits, coverage of the first 120 test digits
given in two updates, then a state merged in), on the shipped imdb-lstm (50 reviews, profile
from 200), and on a Bidirectional + stacked model built here with a fixed seed: rate at the
criterion's threshold and at 0.1 / 0.5 / 0.9 where it has one, covered, total, the by_layer
table, the curve, the uncovered count, summary(), new_items(N / 2), the saved state's arrays
(sha256) and update_with_outputs' outputs (sha256). Then `rnncon generate` (rconc, nc: 4
seeds) and `rnncon campaign --budget 600calls` (seed 0) with their JSON, wall times removed.
Floats are written with repr (every digit); two runs compare with `diff`.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("PYTHONHASHSEED", "0")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

THRESHOLDS = (0.1, 0.5, 0.9)
TIMING = ("seconds", "elapsed", "time", "wall", "per_input", "started", "finished", "created",
          "id", "path", "dir", "per_s", "per_second", "per_minute", "memory", "overhead",
          "updated")


def digest(a) -> str:
    a = np.ascontiguousarray(np.asarray(a))
    return hashlib.sha256(str((a.shape, a.dtype.str)).encode() + a.tobytes()).hexdigest()[:20]


def plain(v):
    """JSON-able with every digit (floats by repr)."""
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return plain(v.tolist())
    if isinstance(v, (np.floating, float)):
        return repr(float(v))
    if isinstance(v, np.integer):
        return int(v)
    return v


def view(crit, what: str, name: str):
    """A method by its place in this version: on ``crit.report`` / ``crit.targets`` (issue 40)
    or on the criterion itself (before)."""
    return getattr(getattr(crit, what, crit), name)


def save_load(crit, path: Path):
    try:
        from rnncon_core.coverage import statefile
    except ImportError:                                    # before issue 40
        return type(crit).load(crit.model, crit.save(path))
    return statefile.load(crit.model, statefile.save(crit, path), type(crit))


def figures(crit, tmp: Path) -> dict:
    out = {"total": int(crit.total), "covered": int(crit.covered), "n_inputs": crit.n_inputs,
           "rate": crit.rate(), "by_layer": crit.by_layer().to_dict(orient="records"),
           "curve": digest(np.asarray(crit.curve(), np.float64)),
           "curve_last": crit.curve()[-1] if len(crit.curve()) else None,
           "summary": view(crit, "report", "summary")(), "repr": repr(crit)}
    if crit.uses_threshold:
        out["rates"] = {t: crit.rate(t) for t in THRESHOLDS}
        out["covered_at"] = {t: view(crit, "report", "covered_at")(t) for t in THRESHOLDS}
    try:
        out["uncovered"] = int(len(view(crit, "report", "uncovered")()))
    except Exception as e:              # tknp: too many patterns to list
        out["uncovered"] = type(e).__name__
    out["new_items"] = digest(np.asarray(crit.new_items(crit.n_inputs // 2), np.float64))
    out["dead_items"] = digest(view(crit, "targets", "dead_items")())
    out["state"] = {k: digest(v) for k, v in sorted(crit.state().items())}
    back = save_load(crit, tmp / f"{crit.name}.state")
    out["loaded_rate"] = back.rate()
    return out


def run_model(model, x_train, y_train, x, tmp: Path, names) -> dict:
    from rnncon_core.coverage import get_criterion, needs_profile
    res = {}
    half = len(x) // 2
    for name in names:
        kw = {"x_train": x_train, "y_train": y_train} if needs_profile(name) else {}
        try:
            crit = get_criterion(name, model, **kw)
        except Exception as e:
            res[name] = f"{type(e).__name__}: {str(e)[:100]}"
            print(name, res[name], flush=True)
            continue
        crit.update(x[:half])
        other = get_criterion(name, model, **kw)
        other.update(x[half:])
        crit.merge(other)
        res[name] = figures(crit, tmp)
        fused = get_criterion(name, model, **kw)
        got = fused.update_with_outputs(x)
        res[name]["outputs"] = None if got is None else [digest(a) for a in got]
        res[name]["fused_rate"] = fused.rate()
        if name in ("rconc", "nc", "hsc"):
            idx = np.arange(0, crit.total, max(1, crit.total // 50))
            vals = view(crit, "targets", "item_values")(x[:3], idx)
            res[name]["item_values"] = digest(np.asarray(vals))
        print(name, res[name]["covered"], "/", res[name]["total"], flush=True)
    if "rconc" in names:                   # edge granularity and its by_gate_step
        from rnncon_core.coverage import ContributionCoverage
        for g in ("unit", "edge"):
            c = ContributionCoverage(model, granularity=g)
            c.update(x)
            layer = next(s.name for s in c.tracer.specs if s.kind != "dense")
            res[f"rconc-{g}"] = {**figures(c, tmp), "by_gate_step": digest(
                c.by_gate_step(layer).to_numpy()), "by_source": c.by_layer(
                by="source").to_dict(orient="records")}
    return res


def tiny_model():
    import tensorflow as tf
    tf.keras.utils.set_random_seed(7)
    inp = tf.keras.Input((6, 5))
    h = tf.keras.layers.Bidirectional(tf.keras.layers.LSTM(4, return_sequences=True))(inp)
    h = tf.keras.layers.GRU(3, return_sequences=True)(h)
    h = tf.keras.layers.SimpleRNN(3)(h)
    out = tf.keras.layers.Dense(3, activation="softmax")(h)
    return tf.keras.Model(inp, out)


def cli(args, runs: Path) -> dict:
    """The command's JSON and a digest of every array its run stored (the generated inputs,
    a campaign's faults, queue and guide state), wall times left out."""
    before = set(runs.iterdir()) if runs.is_dir() else set()
    env = {**os.environ, "RNNCON_RUNS": str(runs)}
    p = subprocess.run([sys.executable, "-m", "rnncon_core", *args, "--json",
                        "--runs-dir", str(runs)], capture_output=True, text=True, env=env,
                       cwd=ROOT)
    if p.returncode:
        return {"rc": p.returncode, "stderr": p.stderr[-500:]}
    out = json.loads(p.stdout)
    new = [d for d in runs.iterdir() if d.is_dir() and d not in before]
    for run in new:
        for f in sorted(run.glob("*.npz")):
            with np.load(f, allow_pickle=False) as z:
                out[f"npz:{f.name}"] = {k: digest(z[k]) if k != "counters" else strip(
                    json.loads(str(z[k]))) for k in sorted(z.files)}   # (counters: JSON)
    return strip(out)


def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if not any(w in k.lower() for w in TIMING)
                and not (isinstance(x, str) and "criteria-figures-" in x)}    # (file paths)
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="mnist-lstm only, no CLI runs")
    a = ap.parse_args()
    from rnncon_core import paths
    from rnncon_core.data import load_dataset
    from rnncon_core.coverage import CRITERIA       # (declares the built-ins)
    from rnncon_core.zoo import load_model
    tmp = Path(tempfile.mkdtemp(prefix="criteria-figures-"))
    names = sorted(CRITERIA.names())
    res = {}
    ds = load_dataset("mnist")
    imdb = None if a.quick else load_dataset("imdb")
    paths.CACHE_DIR = tmp / "cache"           # profiles built here, from the inputs below
    res["mnist-lstm"] = run_model(load_model("mnist-lstm"), ds.x_train[:400], ds.y_train[:400],
                                  ds.x_test[:120], tmp, names)
    if not a.quick:
        res["imdb-lstm"] = run_model(load_model("imdb-lstm"), imdb.x_train[:200],
                                     imdb.y_train[:200], imdb.x_test[:50], tmp, names)
        rng = np.random.default_rng(3)
        xt = rng.normal(size=(120, 6, 5)).astype(np.float32)
        m = tiny_model()
        yt = np.asarray(m(xt[:80])).argmax(1)
        res["tiny-bidir-stacked"] = run_model(m, xt[:80], yt, xt[80:], tmp, names)
        runs = tmp / "runs"
        for method in ("rconc", "nc"):
            res[f"generate-{method}"] = cli(["generate", "--model", "mnist-lstm", "--method",
                                             method, "--seeds", "4", "--seed", "0"], runs)
        res["campaign"] = cli(["campaign", "--model", "mnist-lstm", "--budget", "600calls",
                               "--seeds", "20", "--seed", "0"], runs)
    Path(a.out).write_text(json.dumps(plain(res), indent=1, sort_keys=True, default=str))
    print("written", a.out)


if __name__ == "__main__":
    main()
