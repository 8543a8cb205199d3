"""Reading runs for display: pure functions from run-store records to frames and arrays."""
from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from rnncon_core.runs import display_name
from ..errors import RNNConError
from ..retrain import generator_params
from .charts import with_all

METRIC_NAMES = {"accuracy": "Accuracy", "precision": "Precision", "recall": "Recall",
                "f1": "F1", "auc": "AUC", "rconc": "RConC"}


def complete(info) -> bool:
    """A run that finished all it was asked to do (a cancelled or failed run, or a retraining
    that stopped before its last repeat, is partial)."""
    if info.status != "finished":
        return False
    s = info.summary or {}
    if info.kind == "retrain" and s.get("repeats_done", s.get("repeats")) != s.get("repeats"):
        return False
    return True


def partial_note(info) -> str:
    """Why a run is partial, in one sentence (for the warning when it is picked)."""
    s = info.summary or {}
    progress = info.progress() or {}
    done, total = progress.get("done"), progress.get("total")
    what = f" after {done} of {total}" if done is not None and total else ""
    if info.kind == "retrain" and info.status == "finished":
        return (f"Run {info.run_id} is partial: {s.get('repeats_done')} of {s.get('repeats')} "
                "repeats finished.")
    return (f"Run {info.run_id} is partial: it was {info.status}{what}; what it shows is only "
            "what it had finished.")


def run_label(info) -> str:
    """A run as a person reads it: its name (or what it did and when, the id's short tail
    beside), its state, and its headline."""
    s = info.summary or {}
    bits = [display_name(info), "finished" if complete(info) else f"{info.status} (partial)"]
    if "n_adversarial" in s:
        bits.append(f"{s.get('n_adversarial', 0)}/{s.get('n_seeds', 0)} adversarial")
    if "accuracy" in s and info.kind == "retrain":
        bits.append(f"accuracy {100 * s['accuracy']:.2f} %")
    return " · ".join(str(b) for b in bits)


def default_run(runs: list) -> str | None:
    """The run a results section starts on: the newest complete one (never a partial one)."""
    return next((r.run_id for r in runs if complete(r)), None)


def generation_runs(store, model: str | None = None, with_outputs: bool = True) -> list:
    """Generation runs (newest first) that have outputs to show: finished, or cancelled /
    failed ones that kept the seeds they had finished."""
    out = []     # a retraining's held-out sets (its children) are shown under it, on Runs
    for info in store.list(kind="generate", model=model, children=False):
        if info.status == "running":
            continue
        if with_outputs and not (info.path / "outputs.npz").exists():
            continue
        out.append(info)
    return out


def retrain_sources(store, model: str) -> list:
    """This model's generation runs (newest first) that found adversarial inputs."""
    return [r for r in generation_runs(store, model)
            if (r.summary or {}).get("n_adversarial", 0) > 0]


def trained_on(summary: dict) -> str:
    """What each epoch of a retraining trained on, and how long its stages took (runs stored
    before these were recorded: an empty note for either)."""
    t = summary.get("trained_on")
    out = ""
    if t:
        clean = (f"all {t['of']:,}" if t["clean"] == t["of"]
                 else f"a fresh sample of {t['clean']:,} of the {t['of']:,}")
        out = (f"each epoch trained on {clean} clean training inputs + {t['extra']:,} "
               f"generated ones mixed in")
    stages = summary.get("stage_seconds") or {}
    if stages:
        out += ("; " if out else "") + "took " + ", ".join(
            f"{k} {v:.0f} s" for k, v in stages.items())
    return out


def metric_keys(summary: dict) -> list[tuple[str, str]]:
    """(key, name) of the metrics a retraining summary holds: Table 6's, then RConC at the
    thresholds it was measured at (``rconc_0.5`` -> "RConC (θ=0.5)")."""
    before = summary.get("before", {})
    keys = [(k, n) for k, n in METRIC_NAMES.items() if k in before]
    keys += [(k, f"RConC (θ={k.split('_', 1)[1]})") for k in sorted(before)
             if k.startswith("rconc_") and k in summary.get("after", {})]
    return keys


def table6(summary: dict) -> pd.DataFrame:
    """Table 6: each metric before, after (mean ± std over repeats), control, and the gains."""
    rows = []
    for key, name in metric_keys(summary):
        after = summary["after"][key]
        row = {"metric": name, "before": round(summary["before"][key], 4),
               "after (mean)": round(after["mean"], 4), "after (std)": round(after["std"], 4),
               "gain": round(summary["gain"][key]["mean"], 4)}
        if "control" in summary:
            row["control (mean)"] = round(summary["control"][key]["mean"], 4)
            row["gain over control"] = round(summary["gain_over_control"][key]["mean"], 4)
        rows.append(row)
    return pd.DataFrame(rows)


def transfer_table(summary: dict) -> pd.DataFrame:
    """Held-out transfer: per method, accuracy (%) of the original, retrained and control
    models on adversarial inputs generated against the original model from evaluation seeds
    that no retraining saw; mean ± std over the repeats, and the paired test against the
    control arm. Empty when the run measured none."""
    rows = []
    for method, t in (summary.get("transfer_by_method") or {}).items():
        if not t.get("n"):
            continue
        row = {"method": method, "inputs": t["n"], "original %": round(100 * t["original"], 1),
               "retrained %": _mean_std(t["retrained"])}
        if "control" in t:
            d = t["retrained_minus_control"]
            row["control %"] = _mean_std(t["control"])
            row["retrained − control (points)"] = round(100 * d["mean"], 1)
            row["p (paired t-test)"] = None if d.get("p_value") is None else \
                float(f"{d['p_value']:.2g}")
        rows.append(row)
    return pd.DataFrame(rows)


def _mean_std(spread: dict) -> str:
    return f"{100 * spread['mean']:.1f} ± {100 * spread['std']:.1f}"


def before_after_frame(summary: dict) -> pd.DataFrame:
    """metric, before, after (mean over repeats) and control (the control arm's mean, None
    without one): the input of charts.before_after."""
    keys = metric_keys(summary)
    control = summary.get("control") or {}
    return pd.DataFrame({"metric": [name for _, name in keys],
                         "before": [summary["before"][k] for k, _ in keys],
                         "after": [summary["after"][k]["mean"] for k, _ in keys],
                         "control": [(control.get(k) or {}).get("mean") for k, _ in keys]})


def repeats_frame(summary: dict, keys=("accuracy", "rconc")) -> pd.DataFrame:
    """metric, stage, value: one row per repeat after retraining (and the control arm), plus
    the value before: the input of charts.repeats (Figure 14)."""
    rows = []
    for key in keys:
        if key not in summary.get("before", {}):
            continue
        rows.append({"metric": METRIC_NAMES[key], "stage": "before",
                     "value": summary["before"][key]})
        for v in summary["after"][key]["values"]:
            rows.append({"metric": METRIC_NAMES[key], "stage": "after", "value": v})
        for v in summary.get("control", {}).get(key, {}).get("values", []):
            rows.append({"metric": METRIC_NAMES[key], "stage": "control", "value": v})
    return pd.DataFrame(rows, columns=["metric", "stage", "value"])


def gallery_order(outputs: dict, only_adversarial: bool) -> np.ndarray:
    """Row numbers of a run's outputs to show: adversarial first (or only), seed order."""
    adv = np.asarray(outputs["adversarial"]).astype(bool)
    rows = np.arange(len(adv))
    if only_adversarial:
        return rows[adv]
    return np.concatenate([rows[adv], rows[~adv]])


def captions(outputs: dict, rows: np.ndarray) -> list[tuple[str, str]]:
    """(seed caption, generated caption) per row: label, prediction and its confidence."""
    out = []
    for i in rows:
        seed = f"label {int(outputs['y_seed'][i])}"
        if "pred_seed" in outputs:
            seed += f", predicted {int(outputs['pred_seed'][i])}"
        gen = f"predicted {int(outputs['pred_gen'][i])}" if "pred_gen" in outputs else ""
        if "conf_gen" in outputs:
            gen += f" ({float(outputs['conf_gen'][i]):.0%})"
        if bool(outputs["adversarial"][i]):
            gen += " ✗ adversarial"
        out.append((seed, gen))
    return out


# ---------------------------------------------------------------- coverage views

def nearest(grid: tuple, threshold: float) -> float:
    return min(grid, key=lambda t: abs(t - threshold))


def coverage_view(crits: dict, threshold: float, by: str, grid: tuple) -> dict:
    """What the Coverage page shows at one threshold, read from the criteria's kept maxima:
    the headline figures (rate, covered, total), RConC and NC per layer, the growth curves
    (at the nearest grid threshold) and CS_C's sections. Small tables only."""
    rconc, nc, hsc, csc = (crits[k] for k in ("RConC", "NC", "HS_C", "CS_C"))
    g = nearest(grid, threshold)
    out = {"n_inputs": rconc.n_inputs, "grid_threshold": g,
           "rconc": (rconc.rate(threshold), rconc.report.covered_at(threshold), rconc.total),
           "nc": (nc.rate(threshold), nc.report.covered_at(threshold), nc.total),
           "hsc": hsc.rate(),
           "by_layer": {"RConC": rconc.by_layer(threshold, by=by), "NC": nc.by_layer(threshold)},
           "curves": {"RConC": np.asarray(rconc.curve(g)), "NC": np.asarray(nc.curve(g))},
           "sections": None, "csc_boundary": None}
    if csc is not None:
        sections = csc.sections()
        out["sections"] = sections
        out["csc_boundary"] = float(sections[sections["boundary"]]["rate"].mean())
    return out


def coverage_sweep(crits: dict, grid: tuple, by: str = "layer") -> pd.DataFrame:
    """RConC and NC per layer (and "All") at every threshold of the grid."""
    rows = []
    for t in grid:
        for name in ("RConC", "NC"):
            df = with_all(crits[name].by_layer(t, by=by) if name == "RConC"
                          else crits[name].by_layer(t))
            rows += [{"threshold": t, "criterion": name, "layer": r.layer, "rate": r.rate}
                     for r in df.itertuples()]
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- generation tables

TABLE2_KEYS = [("n_seeds", "seeds"), ("n_adversarial", "adversarial"),
               ("adv_rate", "adv. rate"), ("avg_l1", "avg L1"), ("avg_l2", "avg L2"),
               ("avg_linf", "avg L∞"), ("avg_words_changed", "avg words changed"),
               ("seconds", "seconds")]


def table2(runs: Iterable) -> pd.DataFrame:
    """Table 2 rows from generation runs (``RunInfo`` with a summary): one row per run, every
    column of one type (numbers as floats with NaN where a run lacks one)."""
    out = []
    for info in runs:
        s = info.summary or {}
        n_seeds, n_adv = s.get("n_seeds"), s.get("n_adversarial")
        rate = s.get("adv_rate")
        if rate is None and n_seeds:
            rate = (n_adv or 0) / n_seeds
        row = {"run": info.run_id, "status": info.status,
               "model": str(s.get("model", info.model) or ""),
               "method": str(s.get("method", info.method) or ""),
               **generator_settings(info.config),
               "seeds": n_seeds, "adversarial": n_adv,
               "adv. rate %": None if rate is None else 100 * float(rate)}
        for key, label in TABLE2_KEYS[3:]:
            row[label] = s.get(key)
        out.append(row)
    df = pd.DataFrame(out, columns=["run", "status", "model", "method", "layer", "constraint",
                                    "seeds", "adversarial", "adv. rate %",
                                    *[label for _, label in TABLE2_KEYS[3:]]])
    numeric = df.columns[6:]
    df[numeric] = df[numeric].apply(pd.to_numeric, errors="coerce").astype(float)
    return df.dropna(axis=1, how="all")


def generator_settings(config: dict) -> dict:
    """Target layer and constraint of a generation run: its stored settings read through its
    method's declaration (retrain.generator_params; older runs' layout too)."""
    try:
        params = generator_params(config)
    except RNNConError:                     # a method this checkout does not register
        params = {}
    target = params.get("target", params.get("layer"))
    return {"layer": "Random" if target in (None, "random") else str(target),
            "constraint": str(params.get("constraint") or "none")}


def per_input(outputs: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """One row per seed of a generation run's outputs.npz: its 1-D arrays, and the L1/L2/L∞
    norms of each perturbation when the inputs are there."""
    n = len(outputs["y_seed"]) if "y_seed" in outputs else len(next(iter(outputs.values())))
    cols = {k: np.asarray(v) for k, v in outputs.items()
            if np.asarray(v).ndim == 1 and len(v) == n}
    if "x_seed" in outputs and "x_gen" in outputs \
            and np.issubdtype(np.asarray(outputs["x_seed"]).dtype, np.floating):
        p = (np.asarray(outputs["x_gen"], dtype=np.float64)
             - np.asarray(outputs["x_seed"], dtype=np.float64))
        p = p.reshape(n, int(np.prod(p.shape[1:])))          # (also for a run of 0 seeds)
        cols.update(l1=np.abs(p).sum(1), l2=np.sqrt((p ** 2).sum(1)),
                    linf=np.abs(p).max(1, initial=0.0))
    elif "x_seed" in outputs and "x_gen" in outputs:
        changed = np.asarray(outputs["x_seed"]) != np.asarray(outputs["x_gen"])
        cols["ids_changed"] = changed.reshape(n, int(np.prod(changed.shape[1:]))).sum(1)
    return pd.DataFrame(cols)
