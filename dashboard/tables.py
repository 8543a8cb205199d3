"""The dashboard's tables: pure functions from engine outputs to display DataFrames."""
from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np
import pandas as pd

TABLE2_KEYS = [("n_seeds", "seeds"), ("n_adversarial", "adversarial"),
               ("adv_rate", "adv. rate"), ("avg_l1", "avg L1"), ("avg_l2", "avg L2"),
               ("avg_linf", "avg L∞"), ("avg_words_changed", "avg words changed"),
               ("seconds", "seconds")]


def table1(rows: Iterable[dict]) -> pd.DataFrame:
    """zoo.models_table() rows: our measured figures beside the paper's."""
    out = []
    for r in rows:
        p = r["paper"]
        out.append({
            "model": r["name"], "architecture": r["architecture"],
            "params": r["params"], "params (paper)": p["params"],
            "#neurons": r["neurons"], "#neurons (paper)": p["neurons"],
            "#cons / step": r["contributions_per_step"],
            "#cons (paper's convention)": r["cons_paper_convention"],
            "#cons (paper)": p["cons"],
            "#cons (real structure)": r["contributions_total"],
            "test acc. % (ours)": None if r["test_accuracy"] is None
            else round(100 * r["test_accuracy"], 2),
            "test acc. % (paper)": p["accuracy"],
        })
    return pd.DataFrame(out)


def table2(runs: Iterable) -> pd.DataFrame:
    """Table 2 rows from generation runs (``RunInfo`` with a summary): one row per run."""
    out = []
    for info in runs:
        s = info.summary or {}
        row = {"run": info.run_id, "status": info.status, "model": s.get("model", info.model),
               "method": s.get("method", info.method), **generator_settings(info.config)}
        for key, label in TABLE2_KEYS:
            v = s.get(key)
            if v is None:
                continue
            row[label] = round(100 * v, 1) if key == "adv_rate" else v
        if "adv. rate" in row:
            row["adv. rate %"] = row.pop("adv. rate")
        out.append(row)
    return pd.DataFrame(out)


def generator_settings(config: dict) -> dict:
    """Target layer and constraint of a generation run (its config's generator part)."""
    gen = config.get("generator") or {}
    target = gen.get("target", gen.get("layer"))
    constraint = gen.get("constraint") or "none"
    if isinstance(constraint, dict):
        constraint = constraint.get("name", "none")
    return {"layer": "Random" if target in (None, "random") else str(target),
            "constraint": str(constraint)}


def runs_history(runs: Iterable) -> pd.DataFrame:
    """The run store's history: one row per run, the headline of its summary."""
    out = []
    for info in runs:
        s = info.summary or {}
        headline = ", ".join(f"{k}={_fmt(v)}" for k, v in s.items()
                             if isinstance(v, (int, float)) and not isinstance(v, bool))[:160]
        out.append({"run": info.run_id, "kind": info.kind, "status": info.status,
                    "model": info.model, "method": info.method, "created": info.created,
                    "summary": headline, "error": info.error or ""})
    return pd.DataFrame(out, columns=["run", "kind", "status", "model", "method", "created",
                                      "summary", "error"])


def compare(summaries: Mapping[str, Mapping]) -> pd.DataFrame:
    """Summaries of several runs side by side: one row per key, one column per run."""
    keys: list[str] = []
    for s in summaries.values():
        keys += [k for k in s if k not in keys and not isinstance(s[k], (dict, list))]
    return pd.DataFrame({run: [_fmt(s.get(k)) for k in keys] for run, s in summaries.items()},
                        index=keys)


def _fmt(v):
    if isinstance(v, float):
        return float(f"{v:.4g}")
    if isinstance(v, np.generic):
        return v.item()
    return v


def per_input(outputs: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """One row per seed of a generation run's outputs.npz: its 1-D arrays, and the L1/L2/L∞
    norms of each perturbation when the inputs are there."""
    n = len(outputs["y_seed"]) if "y_seed" in outputs else len(next(iter(outputs.values())))
    cols = {k: np.asarray(v) for k, v in outputs.items()
            if np.asarray(v).ndim == 1 and len(v) == n}
    if "x_seed" in outputs and "x_gen" in outputs \
            and np.issubdtype(np.asarray(outputs["x_seed"]).dtype, np.floating):
        p = (np.asarray(outputs["x_gen"], dtype=np.float64)
             - np.asarray(outputs["x_seed"], dtype=np.float64)).reshape(n, -1)
        cols.update(l1=np.abs(p).sum(1), l2=np.sqrt((p ** 2).sum(1)),
                    linf=np.abs(p).max(1, initial=0.0))
    elif "x_seed" in outputs and "x_gen" in outputs:
        cols["ids_changed"] = (np.asarray(outputs["x_seed"]) != np.asarray(outputs["x_gen"])
                               ).reshape(n, -1).sum(1)
    return pd.DataFrame(cols)
