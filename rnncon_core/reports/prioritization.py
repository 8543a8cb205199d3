"""`rnncon report prioritization`: which signal ranks the misclassified inputs first.

On each shipped model, two pools: its test split (the first ``n_test`` inputs) and a mixed
pool of those plus generated inputs (labels: their seeds'). The generated inputs are those of
the model's generation runs in the run store (the retraining report's runs) where there are
some; else ``n_gen`` are generated here from the next test inputs with the project's own
generator (rconc for the MNIST models, eda for IMDB), and config.json says which. Every signal
of ``rnncon_core.prioritize`` ranks each pool; reported per signal: APFD and the share of the
misclassified inputs found within the first 1 / 5 / 10 % inspected, as the mean over
``repeats`` random tie-breaks (the random order: ``repeats`` random orders) with the 2.5 and
97.5 percentiles, and the first 10 % against random order's. Coverage signals are read from
a few criteria (``CRITERIA_MNIST``, ``CRITERIA_IMDB``: a per-input item set of RConC over a
500-step review holds millions of items).
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from ..data import dataset_kind, load_dataset
from ..generate import get_generator
from ..paths import ensure_dir
from ..prioritize import prioritize
from ..zoo import load_model, model_datasets
from .results import generation_runs
from .writer import write_files

MODELS = ("mnist-lstm", "stacked-mnist-lstm", "mnist-gru", "stacked-mnist-gru",
          "imdb-lstm", "imdb-gru", "stacked-imdb-lstm", "stacked-imdb-gru")
UNCERTAIN = ("gini", "margin", "entropy", "lsa", "dsa", "deepstate")
CRITERIA_MNIST = ("rconc", "nc", "hsc", "state", "kmnc")
CRITERIA_IMDB = ("nc", "hsc", "state")
GENERATOR = {"image": "rconc", "text": "eda"}        # by the data set's kind


def signals_for(dataset: str) -> list[str]:
    crits = CRITERIA_IMDB if dataset_kind(dataset) == "text" else CRITERIA_MNIST
    return [*UNCERTAIN, *(f"{c}-{how}" for c in crits for how in ("total", "additional")),
            "random"]


def _generated(store, name, model, ds, n_test, n_gen, progress):
    """(x, y, where they come from): the model's stored generation runs' inputs, else n_gen
    generated here from test[n_test:n_test + n_gen]."""
    xs, ys, runs = [], [], []
    for info in generation_runs(store, name) if store is not None else []:
        out = info.load_npz("outputs")
        if out is None or "x_gen" not in out or "y_seed" not in out:
            continue
        xs.append(out["x_gen"])
        ys.append(out["y_seed"])
        runs.append(info.run_id)
        if sum(map(len, xs)) >= n_gen:
            break
    if xs:
        x, y = np.concatenate(xs)[:n_gen], np.concatenate(ys)[:n_gen]
        return x, y, f"{len(x)} inputs of stored generation runs {', '.join(runs)}"
    if not n_gen:
        return None, None, "none"
    method = GENERATOR.get(ds.kind, "rconc")
    x_test, y_test = ds.split("test")
    seeds, y_seeds = x_test[n_test:n_test + n_gen], y_test[n_test:n_test + n_gen]
    t0 = time.time()
    res = get_generator(method, model).generate(seeds, y_seeds)
    progress(f"{name}: {method} on {len(seeds)} seeds in {time.time() - t0:.0f}s "
             f"({int(res.adversarial.sum())} adversarial)")
    return (res.x_gen.astype(x_test.dtype), y_seeds,
            f"{len(seeds)} inputs generated here by {method} from test inputs "
            f"{n_test}..{n_test + len(seeds) - 1} (no generation run of this model in the run "
            f"store)")


def measure_model(name: str, n_test: int, n_gen: int, repeats: int, n_profile: int,
                  store=None, progress: Callable[[str], None] = print):
    """(metrics rows of both pools, pool facts) for one model."""
    model = load_model(name)
    ds_name = model_datasets(name, model)[0]
    ds = load_dataset(ds_name)
    x_test, y_test = ds.split("test")
    x_clean, y_clean = x_test[:n_test], y_test[:n_test]
    x_gen, y_gen, where = _generated(store, name, model, ds, n_test, n_gen, progress)
    by = signals_for(ds_name)
    pools = {"test": (x_clean, y_clean)}
    if x_gen is not None and len(x_gen):
        pools["mixed"] = (np.concatenate([x_clean, x_gen]), np.concatenate([y_clean, y_gen]))
    rows, facts = [], {"dataset": ds_name, "generated": where, "seconds": {}}
    reuse: dict = {}                 # the surprise model, profiled once for both pools
    for pool, (x, y) in pools.items():
        t0 = time.time()
        res = prioritize(model, x, y, by, x_train=ds.x_train, y_train=ds.y_train,
                         repeats=repeats, n_profile=n_profile, reuse=reuse,
                         progress=lambda m, p=pool: progress(f"{name} {p}: {m}"))
        m = res.metrics.assign(model=name, pool=pool,
                               seconds=[res.seconds[s] for s in res.metrics["signal"]])
        rows.append(m)
        facts["seconds"][pool] = round(time.time() - t0, 1)
        facts[f"{pool}_inputs"] = int(len(x))
        facts[f"{pool}_faults"] = int(res.misclassified.sum())
    return pd.concat(rows, ignore_index=True), facts


def build_prioritization(out: Path, names=MODELS, n_test_mnist: int = 1800,
                         n_test_imdb: int = 400, n_gen_mnist: int = 100, n_gen_imdb: int = 0,
                         repeats: int = 10, n_profile: int = 2000, store=None,
                         progress: Callable[[str], None] = print, resume: bool = False) -> dict:
    """Measure every model, writing the files after each one (``resume``: keep the models
    already in out's metrics.csv)."""
    out = ensure_dir(Path(out))
    settings = {"n_test_mnist": n_test_mnist, "n_test_imdb": n_test_imdb,
                "n_gen_mnist": n_gen_mnist, "n_gen_imdb": n_gen_imdb, "repeats": repeats,
                "n_profile": n_profile}
    tables, models = [], {}
    if resume and (out / "metrics.csv").is_file():
        old = json.loads((out / "config.json").read_text())
        if {k: old.get(k) for k in settings} == settings:
            tables.append(pd.read_csv(out / "metrics.csv"))
            models.update(old["models"])
    for name in names:
        if name in models:
            continue
        imdb = name.startswith(("imdb", "stacked-imdb"))
        t0 = time.time()
        table, facts = measure_model(name, n_test_imdb if imdb else n_test_mnist,
                                     n_gen_imdb if imdb else n_gen_mnist, repeats, n_profile,
                                     store, progress)
        facts["total_s"] = round(time.time() - t0, 1)
        tables.append(table)
        models[name] = facts
        write_files(out, {"metrics.csv": pd.concat(tables, ignore_index=True),
                          "config.json": {**settings, "models": models}},
                    report="prioritization")
        summarize(out)
    return {"files": [str(out / f) for f in ("summary.md", "metrics.csv", "config.json",
                                             "provenance.json")], "models": models}


def summarize(out: Path) -> None:
    """summary.md from metrics.csv and config.json."""
    out = Path(out)
    table = pd.read_csv(out / "metrics.csv")
    config = json.loads((out / "config.json").read_text())
    write_files(out, {"summary.md": markdown(table, config)}, report="prioritization")


def _cell(r, key: str, digits: int = 3) -> str:
    v, lo, hi = r[key], r[f"{key}_lo"], r[f"{key}_hi"]
    if not np.isfinite(v):
        return "n/a"
    if np.isfinite(lo) and hi - lo > 10 ** -digits:
        return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"
    return f"{v:.{digits}f}"


def best_signals(table: pd.DataFrame, pool: str) -> pd.DataFrame:
    """Per model: the signal of highest APFD (random excluded), its APFD, its share found in
    the first 10 % and that share over random order's."""
    rows = []
    for model, t in table[table["pool"] == pool].groupby("model", sort=False):
        t = t[t["apfd"].notna()]
        ranked = t[t["signal"] != "random"]
        if ranked.empty:
            continue
        best = ranked.loc[ranked["apfd"].idxmax()]
        rand = t[t["signal"] == "random"]
        r10 = float(rand["found_10pct"].iloc[0]) if len(rand) else float("nan")
        top10 = ranked.loc[ranked["found_10pct"].idxmax()]
        rows.append({"model": model, "best_apfd": best["signal"], "apfd": best["apfd"],
                     "best_first10": top10["signal"], "found_10pct": top10["found_10pct"],
                     "random_10pct": r10,
                     "ratio_vs_random": top10["found_10pct"] / r10 if r10 > 0 else float("nan")})
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame, config: dict) -> str:
    lines = ["# Which signal ranks the faults first", "",
             "Generated by `rnncon report prioritization` (rnncon_core/reports/"
             "prioritization.py; definitions and sources in docs/prioritize.md). A fault is a "
             "misclassified input. APFD = 1 - sum(TF_i) / (n m) + 1 / (2 n) (TF_i: the faults' "
             "positions in the ranking; 0.5 is random order on average, 1 all faults first). "
             "Where randomness enters (the random order; ties, which coverage rankings have "
             "many of) the figure is the mean over the repeats with the 2.5-97.5 percentile "
             "range in brackets; a figure without brackets did not vary.", "",
             "Settings: " + ", ".join(f"{k} = {v}" for k, v in config.items()
                                      if k != "models") + ".", "", "## Pools", "",
             "| model | test inputs (faults) | mixed pool (faults) | generated inputs | "
             "seconds (test / mixed) |", "|---|---|---|---|---|"]
    for m, f in config["models"].items():
        secs = f.get("seconds", {})
        lines.append(f"| {m} | {f.get('test_inputs')} ({f.get('test_faults')}) | "
                     f"{f.get('mixed_inputs', '-')} ({f.get('mixed_faults', '-')}) | "
                     f"{f.get('generated')} | {secs.get('test', '-')} / "
                     f"{secs.get('mixed', '-')} |")
    text = [m for m, f in config["models"].items() if "mixed_inputs" not in f]
    if text:
        lines += ["", f"No mixed pool for {', '.join(text)}: no generation run of these models "
                      f"in the run store, and none generated here (n_gen_imdb = "
                      f"{config.get('n_gen_imdb')}: EDA took about 25 s a review on this "
                      f"2-core machine, 0 of 5 adversarial in a trial)." if config.get(
                          "n_gen_imdb") == 0 else ""]
    lines += ["", "On a two-class (sigmoid) model gini, margin and entropy all decrease with "
                  "|p - 0.5|: they rank the inputs alike."]
    for pool, title in (("test", "test split"), ("mixed", "mixed pool (test + generated)")):
        sub = table[table["pool"] == pool]
        if sub.empty:
            continue
        models = list(dict.fromkeys(sub["model"]))
        for key, what in (("apfd", "APFD"), ("found_10pct", "share of faults in the first "
                                                           "10 % inspected")):
            lines += ["", f"## {what}, {title}", "",
                      "| signal | " + " | ".join(models) + " |", "|---|" + "---|" * len(models)]
            for sig in dict.fromkeys(sub["signal"]):
                cells = []
                for m in models:
                    r = sub[(sub["model"] == m) & (sub["signal"] == sig)]
                    cells.append(_cell(r.iloc[0], key) if len(r) else "n/a")
                lines.append(f"| {sig} | " + " | ".join(cells) + " |")
        best = best_signals(table, pool)
        lines += ["", f"## Best per model, {title}", "",
                  "| model | highest APFD | APFD | most faults in first 10 % | share | random's "
                  "share | × random |", "|---|---|---|---|---|---|---|"]
        for r in best.itertuples():
            lines.append(f"| {r.model} | {r.best_apfd} | {r.apfd:.3f} | {r.best_first10} | "
                         f"{r.found_10pct:.3f} | {r.random_10pct:.3f} | "
                         f"{r.ratio_vs_random:.1f} |")
    lines += ["", "## Reading", "", reading(table), ""]
    return "\n".join(lines)


def reading(table: pd.DataFrame) -> str:
    """Plain words: which signal has the highest APFD on how many models, per pool; where
    coverage and DeepState rank against uncertainty and surprise; the mnist-lstm target."""
    out = []
    for pool in ("test", "mixed"):
        best = best_signals(table, pool)
        if best.empty:
            continue
        counts = best["best_apfd"].value_counts()
        sub = table[(table["pool"] == pool) & table["apfd"].notna()]
        med = sub.groupby("signal", sort=False)["apfd"].median().sort_values(ascending=False)
        cov = med[[s for s in med.index if s.endswith(("-total", "-additional"))]]
        unc = med[[s for s in med.index if s in ("gini", "margin", "entropy", "lsa", "dsa")]]
        line = (f"- {pool}: highest APFD on {len(best)} models: "
                + ", ".join(f"{s} on {n}" for s, n in counts.items())
                + ". Median APFD over the models: "
                + ", ".join(f"{s} {v:.3f}" for s, v in med.head(5).items()))
        if "deepstate" in med:
            line += f"; deepstate {med['deepstate']:.3f}"
        if len(cov):
            line += f"; best coverage signal {cov.index[0]} {cov.iloc[0]:.3f}"
        if "random" in med:
            line += f"; random {med['random']:.3f}"
        if len(cov) and len(unc):
            low = (sub[sub["signal"].isin(unc.index)].groupby("model")["apfd"].min()
                   > sub[sub["signal"].isin(cov.index)].groupby("model")["apfd"].max())
            line += (f". On {int(low.sum())} of {len(low)} models every uncertainty and "
                     f"surprise signal (gini, margin, entropy, lsa, dsa) has a higher APFD "
                     f"than every coverage signal")
        three = sub[sub["signal"].isin(("gini", "margin", "entropy"))].groupby("model")["apfd"]
        if len(three):
            line += (f". gini, margin and entropy lie within "
                     f"{float((three.max() - three.min()).max()):.3f} APFD of each other on "
                     f"every model")
        out.append(line + ".")
        t = best[best["model"] == "mnist-lstm"]
        if pool == "test" and len(t):
            r = t.iloc[0]
            out.append(f"- Target (mnist-lstm test split, first 10 %, best signal vs random "
                       f"order): {r.best_first10} finds {r.found_10pct:.1%} of the faults, "
                       f"random order {r.random_10pct:.1%} (mean of the repeats; 10 % "
                       f"expected): {r.ratio_vs_random:.1f}× ({r.found_10pct / 0.1:.1f}× the "
                       f"expected 10 %): {'met' if r.ratio_vs_random >= 5 else 'not met'} "
                       f"(≥ 5×).")
    return "\n".join(out)
