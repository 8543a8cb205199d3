"""`rnncon report criteria`: which coverage criteria find faults (after Harel-Canada et al.,
"Is neuron coverage a meaningful measure for testing deep neural networks?", FSE 2020).

On each MNIST model: a pool of clean test inputs and inputs generated from other test inputs by
several methods (labels: their seeds'); many random test suites drawn from the pool at a few
fixed sizes; per suite every registered criterion's coverage and its faults: the misclassified
inputs, and the distinct (true, predicted) label pairs among them. Reported: Kendall's τ_b of
each criterion with each fault count (i) within each suite size (size held fixed: the exact
control), (ii) "stratified": the mean of the per-size τ's on Fisher's z scale, and (iii)
"partial": Kendall's partial τ over all sizes, τ_xy·z = (τ_xy − τ_xz τ_yz) /
sqrt((1 − τ_xz²)(1 − τ_yz²)) (kept for comparison; it is not zero when coverage and faults are
independent given size, so verdicts read the stratified τ). Confidence intervals: Fisher's z
with Fieller's variance 0.437 / (n − 4). Suites drawn from one pool share inputs, so they are
not independent and the intervals are too narrow; read them as a rough guide.

Coverage of a suite is computed exactly from each pool input's own covered items (the union of
its inputs' item sets; weighted criteria sum the weights of the union), one forward pass per
criterion over the pool. suites.csv keeps every rate unrounded and τ is computed from it (tknp's
rates are its pattern counts over a constant, astronomically large number of possible patterns:
≈ 1e-100 and below, so a rounded file would lose them). The profile-based criteria (at their
originals' defaults: docs/criteria.md) build their training profiles from the first
``n_profile`` training digits.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from ..coverage import CRITERIA, default_threshold, needs_profile
from ..coverage.profile import ensure_profile
from ..data import default_dataset, load_dataset
from ..errors import InputError, UnsupportedModelError
from ..generate import get_generator
from ..generate.base import predict_proba
from ..paths import ensure_dir
from ..zoo import class_labels, load_model
from .writer import write_files

MNIST_MODELS = ("mnist-lstm", "stacked-mnist-lstm", "mnist-gru", "stacked-mnist-gru")
METHODS = ("pgd", "fgsm", "rconc", "nc", "noise")


def _fisher_ci(tau: float, n: int, z_crit: float = 1.959964) -> tuple[float, float]:
    if not np.isfinite(tau) or n <= 4:
        return float("nan"), float("nan")
    z = np.arctanh(np.clip(tau, -0.999999, 0.999999))
    se = np.sqrt(0.437 / (n - 4))
    return float(np.tanh(z - z_crit * se)), float(np.tanh(z + z_crit * se))


def _tau(a, b) -> float:
    from scipy.stats import kendalltau
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(kendalltau(a, b).statistic)


def stratified_tau(x, y, strata) -> tuple[float, float, float]:
    """(τ, CI low, CI high): the per-stratum τ's averaged on Fisher's z scale."""
    zs, var = [], []
    for s in np.unique(strata):
        t = _tau(x[strata == s], y[strata == s])
        n = int(np.sum(strata == s))
        if np.isfinite(t) and n > 4:
            zs.append(np.arctanh(np.clip(t, -0.999999, 0.999999)))
            var.append(0.437 / (n - 4))
    if not zs:
        return float("nan"), float("nan"), float("nan")
    z, se = float(np.mean(zs)), float(np.sqrt(np.sum(var)) / len(zs))
    return float(np.tanh(z)), float(np.tanh(z - 1.959964 * se)), float(np.tanh(z + 1.959964 * se))


def partial_tau(x, y, z) -> float:
    txy, txz, tyz = _tau(x, y), _tau(x, z), _tau(y, z)
    den = np.sqrt((1 - txz ** 2) * (1 - tyz ** 2))
    return float((txy - txz * tyz) / den) if den > 0 else float("nan")


def _pool(name, model, ds, n_clean, n_seeds, methods, progress):
    """(x, y_true, y_pred, source) of the pool: test[:n_clean] clean, and one generated input
    per seed test[n_clean:n_clean + n_seeds] per method."""
    x_test, y_test = ds.split("test")
    xs, ys, src, secs = [x_test[:n_clean]], [y_test[:n_clean]], ["clean"] * n_clean, {}
    seeds, y_seeds = x_test[n_clean:n_clean + n_seeds], y_test[n_clean:n_clean + n_seeds]
    for m in methods:
        t0 = time.time()
        res = get_generator(m, model).generate(seeds, y_seeds)
        secs[m] = round(time.time() - t0, 1)
        progress(f"{name}: {m} on {len(seeds)} seeds in {secs[m]}s "
                 f"({int(res.adversarial.sum())} adversarial)")
        xs.append(res.x_gen.astype(np.float32))
        ys.append(y_seeds)
        src += [m] * len(seeds)
    x, y = np.concatenate(xs), np.concatenate(ys)
    pred = class_labels(predict_proba(model, x))
    return x, y, pred, np.array(src), secs


def _item_masks(cov, x, batch: int = 64):
    """Per pool input its covered items, packed bits (P, ceil(total / 8)); for tknp its
    pattern ids."""
    if cov.name == "tknp":
        return cov.profile(x)
    cut = cov.cut(None)
    return np.concatenate([np.packbits(cov.profile(x[i:i + batch]) > cut, axis=1)
                           for i in range(0, len(x), batch)])


def _suite_rates(cov, masks, suites) -> np.ndarray:
    if cov.name == "tknp":
        return np.array([len(set(masks[s].tolist())) / cov.total for s in suites])
    w = getattr(cov, "_weights", None) if getattr(cov, "weighted", False) else None
    out = np.empty(len(suites))
    for i, s in enumerate(suites):
        u = np.bitwise_or.reduce(masks[s], axis=0)
        if w is None:
            out[i] = int(np.bitwise_count(u).sum()) / max(1, cov.total)
        else:
            out[i] = float(w[np.unpackbits(u)[:cov.total].astype(bool)].sum())
    return out


def _criteria(model, x_train=None, y_train=None):
    """Every registered criterion at its defaults (rconc also with Eq. 3 as written), but
    edge RConC (a per-input item set of millions of edges) and those the model does not have
    (csc on a GRU: its column stays empty, "n/a"). The profile-based ones build their
    profiles from (x_train, y_train) when these are given and the cached ones differ."""
    out = []
    for name, cls in CRITERIA.items():
        params = {"threshold": default_threshold("image")} if name in ("rconc", "nc") else {}
        if needs_profile(name) and x_train is not None:
            params.update(x_train=x_train, y_train=y_train)
        try:
            out.append((name, cls(model, **params)))
        except UnsupportedModelError:
            continue
        if name == "rconc":
            out.append(("rconc-eq3", cls(model, normalize="model", values="signed",
                                         threshold=default_threshold("image"))))
    return out


def measure_model(name: str, n_clean=500, n_seeds=100, sizes=(25, 50, 100, 200),
                  n_suites=200, n_profile=4000, methods=METHODS, seed=0,
                  progress: Callable[[str], None] = print):
    """(suites table, pool table, timings) for one MNIST model."""
    started = time.time()
    model = load_model(name)
    ds = load_dataset(default_dataset("image"))        # MNIST
    timings = {}
    x_train, y_train = ds.x_train[:n_profile], ds.y_train[:n_profile]
    t0 = time.time()
    for inputs in ("all", "correct"):
        ensure_profile(model, x_train, y_train, inputs, source=f"mnist train[:{n_profile}]")
    timings["profile_s"] = round(time.time() - t0, 1)
    progress(f"{name}: profiles of {n_profile} training inputs in {timings['profile_s']}s")
    x, y, pred, src, gen_s = _pool(name, model, ds, n_clean, n_seeds, methods, progress)
    timings["generation_s"] = gen_s
    wrong = pred != y
    rng = np.random.default_rng(seed)
    suites, sizes_col = [], []
    for size in sizes:
        for _ in range(n_suites):
            suites.append(np.sort(rng.choice(len(x), size=size, replace=False)))
            sizes_col.append(size)
    table = pd.DataFrame({"model": name, "suite": np.arange(len(suites)), "size": sizes_col})
    for source in dict.fromkeys(src):             # the suite's composition
        table[f"n_{source}"] = [int((src[s] == source).sum()) for s in suites]
    table["faults"] = [int(wrong[s].sum()) for s in suites]
    table["fault_pairs"] = [len({(int(a), int(b)) for a, b in zip(y[s][wrong[s]],
                                                                  pred[s][wrong[s]])})
                            for s in suites]
    timings["criteria_s"], timings["totals"] = {}, {}
    for cname, cov in _criteria(model, x_train, y_train):
        t0 = time.time()
        masks = _item_masks(cov, x)
        table[cname] = _suite_rates(cov, masks, suites)
        timings["criteria_s"][cname] = round(time.time() - t0, 1)
        timings["totals"][cname] = str(cov.total)        # tknp's exceeds a JSON number
        progress(f"{name}: {cname} ({cov.total:,} items) in {timings['criteria_s'][cname]}s")
    pool = pd.DataFrame({"model": name, "source": src, "misclassified": wrong})
    pool = pool.groupby(["model", "source"], sort=False).agg(
        inputs=("misclassified", "size"), misclassified=("misclassified", "sum")).reset_index()
    timings["total_s"] = round(time.time() - started, 1)
    return table, pool, timings


def _generated_controlled(t, crit, fault):
    """Within each suite size, Kendall's partial τ of coverage and faults given how many of the
    suite's inputs are generated (its composition), averaged over sizes on Fisher's z scale."""
    zs, var = [], []
    for _, ts in t.groupby("size"):
        tau = partial_tau(ts[crit].values, ts[fault].values, ts["size"].values - ts["n_clean"].values)
        if np.isfinite(tau) and len(ts) > 4:
            zs.append(np.arctanh(np.clip(tau, -0.999999, 0.999999)))
            var.append(0.437 / (len(ts) - 4))
    if not zs:
        return float("nan"), float("nan"), float("nan")
    z, se = float(np.mean(zs)), float(np.sqrt(np.sum(var)) / len(zs))
    return float(np.tanh(z)), float(np.tanh(z - 1.959964 * se)), float(np.tanh(z + 1.959964 * se))


def correlations(table: pd.DataFrame, criteria: list[str]) -> pd.DataFrame:
    rows = []
    for model, t in table.groupby("model", sort=False):
        for crit in criteria:
            if t[crit].isna().all():          # the model does not have it (csc on a GRU)
                continue
            for fault in ("faults", "fault_pairs"):
                extra = [("generated", t)] if "n_clean" in t and t["n_clean"].nunique() > 1 \
                    else []
                for size, ts in list(t.groupby("size")) + [("stratified", t), ("partial", t),
                                                           ("pooled", t)] + extra:
                    x, f, z = ts[crit].values, ts[fault].values, ts["size"].values
                    if size == "generated":    # per size, partial tau given the generated count
                        tau, lo, hi = _generated_controlled(ts, crit, fault)
                        rows.append({"model": model, "criterion": crit, "faults": fault,
                                     "size": size, "n_suites": len(ts), "tau": tau,
                                     "ci_low": lo, "ci_high": hi})
                        continue
                    if size == "stratified":
                        tau, lo, hi = stratified_tau(x, f, z)
                        rows.append({"model": model, "criterion": crit, "faults": fault,
                                     "size": size, "n_suites": len(ts), "tau": tau,
                                     "ci_low": lo, "ci_high": hi})
                        continue
                    tau = partial_tau(x, f, z) if size == "partial" else _tau(x, f)  # pooled:
                    # every size together, size not controlled (what size alone contributes)
                    lo, hi = _fisher_ci(tau, len(ts))
                    rows.append({"model": model, "criterion": crit, "faults": fault,
                                 "size": size, "n_suites": len(ts), "tau": tau,
                                 "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows)


def verdict(lo: float, hi: float, tau: float) -> str:
    if not np.isfinite(tau):
        return "constant"
    if lo > 0:
        return "strong +" if tau >= 0.5 else "moderate +" if tau >= 0.3 else "weak +"
    if hi < 0:
        return "negative"
    return "none"


def build_criteria(out: Path, names=MNIST_MODELS, progress: Callable[[str], None] = print,
                   resume: bool = False, **sizes) -> dict:
    """Measure every model and write the files after each one. ``resume``: keep the models
    already in out's suites.csv (measured with the same settings) and measure the others."""
    out = ensure_dir(Path(out))
    tables, pools, timings = [], [], {}
    if resume and (out / "suites.csv").is_file():
        done = pd.read_csv(out / "suites.csv")
        old = json.loads((out / "config.json").read_text())
        if any(old.get(k) != (list(v) if isinstance(v, tuple) else v) for k, v in sizes.items()):
            raise InputError(f"{out} was measured with other settings; run without resume")
        tables.append(done)
        pools.append(pd.read_csv(out / "pool.csv"))
        timings.update(old["timings"])
        names = list(dict.fromkeys(done["model"])) + [n for n in names if n not in
                                                        set(done["model"])]
    for name in names:
        if name in timings:
            continue
        t, p, tm = measure_model(name, progress=progress, **sizes)
        tables.append(t)
        pools.append(p)
        timings[name] = tm
        config = {"models": list(timings), **{k: (list(v) if isinstance(v, tuple)
                                                                 else v)
                                                            for k, v in sizes.items()},
                  "timings": timings}
        write_files(out, {"suites.csv": pd.concat(tables, ignore_index=True),
                          "pool.csv": pd.concat(pools, ignore_index=True),
                          "config.json": config}, report="criteria")
        summarize(out)
    return {"files": [str(out / f) for f in ("summary.md", "tau.csv", "suites.csv", "pool.csv",
                                             "config.json", "provenance.json")],
            "timings": timings}


def summarize(out: Path) -> pd.DataFrame:
    """tau.csv and summary.md from the measured suites.csv, pool.csv and config.json."""
    out = Path(out)
    table = pd.read_csv(out / "suites.csv")
    crit = [c for c in table.columns if c not in ("model", "suite", "size", "faults",
                                                  "fault_pairs") and not c.startswith("n_")]
    corr = correlations(table, crit)
    config = json.loads((out / "config.json").read_text())
    write_files(out, {"tau.csv": corr.round(4),
                      "summary.md": _markdown(corr, pd.read_csv(out / "pool.csv"), config,
                                                table)},
                report="criteria")
    return corr


def _markdown(corr: pd.DataFrame, pool: pd.DataFrame, config: dict,
              table: pd.DataFrame | None = None) -> str:
    lines = ["# Which coverage criteria find faults", "",
             "Generated by `rnncon report criteria` (rnncon_core/reports/criteria.py); "
             "method after Harel-Canada et al., FSE 2020. Kendall τ_b of each criterion's "
             "coverage of a random test suite with the suite's faults (misclassified inputs; "
             "distinct (true, predicted) pairs), with the suite size held fixed; \"stratified\" "
             "averages the per-size τ's on Fisher's z scale (tau.csv also has each size and "
             "Kendall's partial τ controlling for size). 95 % intervals by Fisher's z "
             "(Fieller's variance); suites share pool inputs, so the intervals are too narrow: "
             "a rough guide only.", "",
             "Settings: " + ", ".join(f"{k} = {v}" for k, v in config.items()
                                      if k not in ("timings", "models")) + ".", "",
             "Criteria at their originals' definitions (docs/criteria.md): testRNN's bc / sc / "
             "tc on the last recurrent layer with one training range, DeepStellar's from the "
             "correctly classified training digits, DeepGauge's with NeuraL-Coverage's rules "
             "(top-k per step). nc is DeepXplore's NC over layer outputs without the input "
             "pixels (the coverage report's NC counts them too); csc is RNN-Test's "
             "(cell, section) pairs (the dashboard's CS_C boundary counts the cells driven into "
             "an outer section).", "",
             "## Pools", "", "| model | source | inputs | misclassified |", "|---|---|---|---|"]
    for r in pool.itertuples():
        lines.append(f"| {r.model} | {r.source} | {r.inputs} | {r.misclassified} |")
    sizes = sorted(s for s in corr["size"].unique() if not isinstance(s, str))
    main = max(sizes) if sizes else None
    for fault, title in (("faults", "misclassified inputs"),
                         ("fault_pairs", "distinct (true, predicted) pairs")):
        lines += ["", f"## τ with {title}", "",
                  f"Per model: τ at suite size {main} [95 % CI] / stratified τ over all sizes "
                  f"and its verdict (its interval above 0: weak < 0.3 <= moderate < 0.5 <= "
                  f"strong; below 0: negative).", ""]
        models = list(dict.fromkeys(corr["model"]))
        lines.append("| criterion | " + " | ".join(models) + " |")
        lines.append("|---|" + "---|" * len(models))
        sub = corr[corr["faults"] == fault]
        for crit in dict.fromkeys(sub["criterion"]):
            cells = []
            for m in models:
                a = sub[(sub["model"] == m) & (sub["criterion"] == crit)]
                if a.empty:
                    cells.append("n/a")
                    continue
                one = a[a["size"] == main].iloc[0]
                allr = a[a["size"] == "stratified"].iloc[0]
                left = f"{one.tau:+.2f} [{one.ci_low:+.2f}, {one.ci_high:+.2f}]" \
                    if np.isfinite(one.tau) else "constant"
                right = f"{allr.tau:+.2f} {verdict(allr.ci_low, allr.ci_high, allr.tau)}" \
                    if np.isfinite(allr.tau) else "constant"
                cells.append(f"{left} / {right}")
            lines.append(f"| {crit} | " + " | ".join(cells) + " |")
    lines += ["", "## Reading", "", _reading(corr, config, table), "",
              "## Timings (seconds)", "", "```",
              json.dumps({m: {k: v for k, v in t.items() if k != "totals"}
                          for m, t in config["timings"].items()}, indent=1), "```",
              ""]
    return "\n".join(lines)


def _own_patterns(t: pd.DataFrame, config: dict, models: list) -> bool:
    """Whether tknp's count of patterns (rate × possible patterns) is the suite size in every
    suite of these models."""
    for m in models:
        total = config["timings"].get(m, {}).get("totals", {}).get("tknp")
        if total is None:
            return False
        tm = t[t["model"] == m]
        try:
            counts = np.round(tm["tknp"].to_numpy() * float(int(total)))
        except OverflowError:
            return False
        if not (counts == tm["size"].to_numpy()).all():
            return False
    return True


def _constants(corr: pd.DataFrame, config: dict, table: pd.DataFrame | None) -> list[str]:
    """Why each criterion that is constant within every suite size is: a phrase each, from
    the suites themselves."""
    sub = corr[(corr["faults"] == "faults") & (corr["size"] == "stratified")]
    const = sorted({r.criterion for r in sub.itertuples() if not np.isfinite(r.tau)})
    if not const:
        return []
    words = []
    for crit in const:
        models = [m for m in sub[sub["criterion"] == crit]["model"]
                  if not np.isfinite(sub[(sub["criterion"] == crit) &
                                         (sub["model"] == m)]["tau"].iloc[0])]
        why = "one value in every suite of a size"
        if table is not None and crit in table:
            t = table[table["model"].isin(models)]
            top = t.groupby("size")[crit].max()
            if crit == "tknp" and _own_patterns(t, config, models):
                why = "every input of every suite has a top-k pattern of its own"
            elif np.allclose(top.values, 1.0):
                why = "it is at 100 % in every suite (saturated)"
        words.append(f"{crit} on {', '.join(models)}: {why}")
    return words


def _reading(corr: pd.DataFrame, config: dict | None = None,
             table: pd.DataFrame | None = None) -> str:
    """Plain words: per criterion, on how many models the stratified τ with faults is positive
    with its interval above 0."""
    sub = corr[(corr["faults"] == "faults") & (corr["size"] == "stratified")]
    pooled = corr[(corr["faults"] == "faults") & (corr["size"] == "pooled")]
    groups: dict[str, list] = {"signal": [], "mixed": [], "none": []}
    for crit, a in sub.groupby("criterion", sort=False):
        pos, n_models = int((a["ci_low"] > 0).sum()), len(a)
        med = float(np.nanmedian(a["tau"])) if a["tau"].notna().any() else float("nan")
        key = "signal" if pos == n_models else "mixed" if pos > 0 else "none"
        groups[key].append(f"{crit} (median τ {med:+.2f}, positive on {pos}/{n_models})")
    gen = corr[(corr["faults"] == "faults") & (corr["size"] == "generated")]
    every = [c for c, a in gen.groupby("criterion", sort=False) if (a["ci_low"] > 0).all()]
    composition = (f" Holding the number of generated inputs in the suite fixed too (partial τ "
                   f"within each size), it is {np.nanmedian(gen['tau']):+.2f}; positive with "
                   f"its interval above 0 on every model for {', '.join(every) or 'none'}."
                   if gen["tau"].notna().any() else "")
    const = _constants(corr, config or {"timings": {}}, table)
    out = [f"Suite size alone: pooling every size, the median τ of a criterion with "
           f"misclassified inputs is {np.nanmedian(pooled['tau']):+.2f} (size not controlled); "
           f"with size held fixed it is {np.nanmedian(sub['tau']):+.2f}.{composition} "
           f"\"constant\": the criterion takes one value in every suite of a size, so it "
           f"says nothing about faults"
           + (" (" + "; ".join(const) + ")." if const else ".")
           + " τ is computed from the unrounded rates of suites.csv.", ""]
    for key, words in (("signal", "Positive with faults on every model, controlling for size"),
                       ("mixed", "Positive on some models only"),
                       ("none", "No positive signal on any model (or constant)")):
        if groups[key]:
            out.append(f"- {words}: " + "; ".join(groups[key]) + ".")
    return "\n".join(out)
