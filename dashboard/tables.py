"""The dashboard's tables: pure functions from engine outputs to display DataFrames."""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from streamlit import column_config as cc

from dashboard.uploads import public
from rnncon_core.reports.results import (TABLE2_KEYS, generator_settings,  # noqa: F401
                                         per_input, table2)
from rnncon_core.runs import display_name

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
            "test acc. % (ours)": np.nan if r["test_accuracy"] is None
            else round(100 * r["test_accuracy"], 2),
            "test acc. % (paper)": np.nan if p["accuracy"] is None else float(p["accuracy"]),
        })
    return pd.DataFrame(out)


TABLE1_SHORT = {"architecture": "architecture", "params": "params",
               "params (paper)": "params (paper)", "#neurons": "neurons",
               "#neurons (paper)": "neurons (paper)", "#cons / step": "cons per step",
               "#cons (paper's convention)": "cons (paper's count)",
               "#cons (paper)": "cons (paper)", "#cons (real structure)": "cons (all steps)",
               "test acc. % (ours)": "acc. % (ours)", "test acc. % (paper)": "acc. % (paper)"}


def table1_text(df: pd.DataFrame) -> pd.DataFrame:
    """Table 1 for a static table that wraps instead of cutting off: one row per model (the
    index), short headers, numbers as text with thousands separators."""
    out = pd.DataFrame(index=pd.Index(df["model"], name="model"))
    for col, short in TABLE1_SHORT.items():
        v = df[col].to_numpy()
        if col == "architecture":
            out[short] = [str(a).replace(" -> ", " → ") for a in v]
        elif col.startswith("test acc."):
            out[short] = ["—" if pd.isna(a) else f"{a:.2f}" for a in v]
        else:
            out[short] = ["—" if pd.isna(a) else f"{int(a):,}" for a in v]
    return out


CHAR_PX, CELL_PAD_PX = 8, 28     # a wide character of the grid's 14 px font; padding + menu


def fit_width(label: str, widest_value: str = "") -> int:
    """A column width in pixels that shows its header and its widest value whole."""
    return CELL_PAD_PX + CHAR_PX * max(len(label), len(widest_value))


RUN_ID_EXAMPLE = "rconc · 12-02 04:15 · a1b2c3"      # runs.display_name of an unnamed run
TABLE2_SHORT = {"image": ["run", "status", "seeds", "adversarial", "adv. rate %", "avg L2",
                          "seconds"],          # the run's name says its method
                "text": ["run", "status", "seeds", "adversarial", "adv. rate %",
                         "valid adv. rate %", "words changed", "s / seed"]}


def table2_order(df: pd.DataFrame, kind: str) -> list[str]:
    """Table 2's default columns (they fit 1,280 px); the others are one toggle away."""
    return [c for c in TABLE2_SHORT[kind] if c in df.columns]
TABLE2_COLUMNS = {
    "run": cc.TextColumn("run", width=fit_width("run", RUN_ID_EXAMPLE), pinned=True),
    "status": cc.TextColumn("status", width=fit_width("status", "cancelled")),
    "model": None,                                   # the page's own model: said above it
    "method": cc.TextColumn("method", width=fit_width("method", "differential")),
    "layer": cc.TextColumn("target layer", width=fit_width("target layer", "Random")),
    "constraint": cc.TextColumn("constraint", width=fit_width("constraint", "occlusion")),
    "seeds": cc.NumberColumn("seeds", format="%d", width=fit_width("seeds", "2000")),
    "adversarial": cc.NumberColumn("adversarial", format="%d", width=fit_width("adversarial"),
                                   help="seeds whose generated input the model gets wrong"),
    "adv. rate %": cc.ProgressColumn("adv. rate", format="%.1f %%", min_value=0,
                                     max_value=100, width=fit_width("adv. rate", "100.0 %"),
                                     help="adversarial inputs / seeds"),
    "avg L1": cc.NumberColumn("avg L1", format="%.3f", width=fit_width("avg L1", "123.456")),
    "avg L2": cc.NumberColumn("avg L2", format="%.3f", width=fit_width("avg L2", "12.345")),
    "avg L∞": cc.NumberColumn("avg L∞", format="%.3f", width=fit_width("avg L∞", "1.000")),
    "avg words changed": cc.NumberColumn("avg words changed", format="%.1f",
                                         width=fit_width("avg words changed")),
    "seconds": cc.NumberColumn("seconds", format="%.1f", width=fit_width("seconds", "1234.5"),
                               help="wall time of the run"),
}

def under_parents(runs: Sequence) -> list[tuple]:
    """(run, depth) with each run's children right under it (a retraining's held-out sets
    under the retraining), newest first otherwise; a child whose parent is not in ``runs``
    stands on its own."""
    ids = {r.run_id for r in runs}
    kids: dict[str, list] = {}
    for r in runs:
        if r.parent in ids:
            kids.setdefault(r.parent, []).append(r)
    out = []

    def add(r, depth):
        out.append((r, depth))
        for k in kids.get(r.run_id, []):
            add(k, depth + 1)
    for r in runs:
        if r.parent not in ids:
            add(r, 0)
    return out


def runs_history(runs: Iterable) -> pd.DataFrame:
    """The run store's history: one row per run (its name, or what it did and when; a
    retraining's held-out sets under it, marked ↳), the headline of its summary (text) and
    its full id last."""
    out = []
    for info, depth in under_parents(list(runs)):
        s = info.summary or {}
        headline = ", ".join(f"{k}={_fmt(v)}" for k, v in s.items()
                             if isinstance(v, (int, float)) and not isinstance(v, bool))
        name = display_name(info)
        if depth:
            name = "  " * (depth - 1) + "↳ held-out set: " + name
        out.append({"run": name, "kind": info.kind, "status": info.status,
                    "model": public(str(info.model or "")), "method": str(info.method or ""),
                    "created": info.created, "summary": headline, "error": info.error or "",
                    "id": info.run_id})
    return pd.DataFrame(out, columns=["run", "kind", "status", "model", "method", "created",
                                      "summary", "error", "id"])


HISTORY_SHORT = ["run", "status", "model", "created", "summary"]
HISTORY_COLUMNS = {
    "run": cc.TextColumn("run", width="large", pinned=True,
                         help="its name, or what it did and when; the short id last"),
    "kind": cc.TextColumn("kind", width="small"),
    "status": cc.TextColumn("status", width="small"),
    "model": cc.TextColumn("model", width="small"),
    "method": cc.TextColumn("method", width="small"),
    "created": cc.TextColumn("created (UTC)", width="medium"),
    "summary": cc.TextColumn("summary", width="large", help="the run's headline figures "
                                                             "(hover a cell for all of it)"),
    "error": cc.TextColumn("error", width="medium"),
    "id": cc.TextColumn("full id", width="medium"),
}

SUMMARY_NAMES = {
    "n_seeds": "seeds", "n_adversarial": "adversarial inputs", "adv_rate": "adversarial rate",
    "avg_l1": "mean L1 distance", "avg_l2": "mean L2 distance", "avg_linf": "mean L∞ distance",
    "avg_words_changed": "mean words changed", "seconds": "seconds", "model": "model",
    "method": "method", "n_inputs": "inputs added", "epochs": "epochs", "repeats": "repeats",
    "repeats_done": "repeats done", "accuracy_after": "accuracy after retraining",
    "rconc_after": "RConC after retraining", "accuracy": "accuracy",
    "accuracy_after_minus_control": "accuracy: retrained − control", "from_run": "source run",
    "valid_adv_rate": "valid adversarial rate", "partial": "partial",
}


def summary_name(key: str) -> str:
    """A summary key in words (the key itself beside, for the ones not named here)."""
    return SUMMARY_NAMES.get(key, key.replace("_", " "))


def compare(summaries: Mapping[str, Mapping], labels: Mapping[str, str] | None = None
            ) -> pd.DataFrame:
    """Summaries of several runs side by side: one row per key (in words), one column per run
    (its label: name, or what it did and when). Values are shown as text ("—" where a run
    lacks the key), so a column never mixes types."""
    labels = labels or {}
    keys: list[str] = []
    for s in summaries.values():
        keys += [k for k in s if k not in keys and not isinstance(s[k], (dict, list))]
    return pd.DataFrame({labels.get(run, run): [_text(s.get(k)) for k in keys]
                         for run, s in summaries.items()},
                        index=pd.Index([summary_name(k) for k in keys], name="figure"))


def _text(v) -> str:
    v = _fmt(v)
    if v is None:
        return "—"
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)


def same_kind_default(runs: Sequence, n: int = 2) -> list[str]:
    """The runs a comparison starts with: the newest finished run and the next finished ones of
    the same kind (and model), so the rows line up; fewer when there are none."""
    finished = [r for r in runs if r.status == "finished" and r.parent is None]
    if not finished:
        return []
    first = finished[0]
    same = [r.run_id for r in finished if r.kind == first.kind and r.model == first.model]
    return same[:n] if len(same) >= 2 else []


def _fmt(v):
    if isinstance(v, float):
        return float(f"{v:.4g}")
    if isinstance(v, np.generic):
        return v.item()
    return v
