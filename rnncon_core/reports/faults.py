"""The faults of one campaign run as a reader sees them: the headline counts, the groups of the
gallery (fault classes of valid faults, invalid faults by (true, predicted) with their reason)
and the curves of faults and coverage over time, each from zero.

Everything here is read from one snapshot of the run (``campaign.load_campaign``: the fault
rows, the curve and the summary of the same checkpoint), so the figures a page shows beside
each other agree. Runs stored before faults were checked for validity (no ``valid`` column)
count every fault as valid and group them by (true, predicted).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..campaign.classes import valid_counts

FILTERS = ("valid", "invalid", "all")


def checked(faults: dict) -> bool:
    """Whether the run's fault rows carry the validity oracle's verdicts (issue 37)."""
    return bool(faults) and "valid" in faults


def _n(faults: dict) -> int:
    return len(faults.get("label", ())) if faults else 0


def valid_mask(faults: dict) -> np.ndarray:
    if not checked(faults):
        return np.ones(_n(faults), bool)
    return np.asarray(faults["valid"], bool)


def headline(faults: dict, curve: dict) -> dict:
    """The counts a page shows, from the rows (and the curve's last row for coverage and
    calls): ``distinct_faults`` (all rows), and when the rows are checked ``valid_faults``,
    ``invalid_faults``, ``fault_classes``, ``fault_roots`` (root seeds behind a valid fault),
    ``valid_pairs``; else ``distinct_pairs``."""
    n = _n(faults)
    out = {"distinct_faults": n, "checked": checked(faults)}
    last = lambda c: (float(np.asarray(curve[c])[-1])                          # noqa: E731
                      if curve and c in curve and len(curve[c]) else None)
    cov, calls = last("coverage"), last("calls")
    out["coverage"] = cov if cov is not None and np.isfinite(cov) else None
    out["calls"] = None if calls is None else int(calls)
    if n == 0:
        pairs = set()
    else:
        pairs = set(zip(np.asarray(faults["label"]).tolist(), np.asarray(faults["pred"]).tolist()))
    if not out["checked"]:
        out["distinct_pairs"] = len(pairs)
        return out
    out.update(valid_counts(faults))
    out["fault_classes"] = None                 # rows without features: not measured
    if "fault_class" in faults or n == 0:
        cls = np.asarray(faults.get("fault_class", np.zeros(0, np.int64)))
        out["fault_classes"] = int(len(np.unique(cls[valid_mask(faults) & (cls >= 0)])))
    return out


def headline_text(h: dict) -> str:
    """One line of the headline (a job card's message, the CLI's line)."""
    tail = (f"coverage {h['coverage']:.4f}, " if h.get("coverage") is not None else "") + \
        f"{h.get('calls') or 0:,} model calls"
    if h["checked"] and h["fault_classes"] is not None:
        return (f"{h['fault_classes']:,} fault classes ({h['valid_faults']:,} valid of "
                f"{h['distinct_faults']:,} distinct faults), {tail}")
    if h["checked"]:
        return f"{h['valid_faults']:,} valid of {h['distinct_faults']:,} distinct faults, {tail}"
    return f"{h['distinct_faults']:,} distinct faults, {tail}"


def groups(faults: dict, which: str = "valid") -> pd.DataFrame:
    """The gallery's groups, most faults first: a fault class per row for valid faults (its
    (true, predicted) pair, members and root seeds), and for invalid ones a row per (true,
    predicted) pair. ``which``: "valid", "invalid" or "all". Columns: group (a stable name),
    class (-1 for invalid), true, predicted, faults, root seeds, valid."""
    cols = ["group", "class", "true", "predicted", "faults", "root seeds", "valid"]
    n = _n(faults)
    if n == 0:
        return pd.DataFrame(columns=cols)
    ok = valid_mask(faults)
    df = pd.DataFrame({"true": np.asarray(faults["label"]), "predicted": np.asarray(faults["pred"]),
                       "root": np.asarray(faults["root"]), "valid": ok})
    if checked(faults):
        df["class"] = np.where(ok, np.asarray(faults.get("fault_class", np.full(n, -1))), -1)
    else:                          # an older run: a group per (true, predicted)
        df["class"] = -1
    if which == "valid":
        df = df[df.valid]
    elif which == "invalid":
        df = df[~df.valid]
    if df.empty:
        return pd.DataFrame(columns=cols)
    by_class = df.valid & (df["class"] >= 0)
    df["group"] = np.where(by_class, "class " + df["class"].astype(str),
                           np.where(df.valid, "", "invalid ") + df["true"].astype(str) + " → "
                           + df["predicted"].astype(str))
    out = df.groupby("group", sort=False).agg(
        **{"class": ("class", "first"), "true": ("true", "first"),
           "predicted": ("predicted", "first"), "faults": ("root", "size"),
           "root seeds": ("root", "nunique"), "valid": ("valid", "first")}).reset_index()
    out = out.sort_values(["faults", "valid", "true", "predicted", "class"],
                          ascending=[False, False, True, True, True], kind="stable")
    return out[cols].reset_index(drop=True)


def members(faults: dict, group: str, which: str = "valid", limit: int = 16) -> list[int]:
    """The rows (indices into the fault rows) of one group of ``groups``, first found first."""
    n = _n(faults)
    if n == 0:
        return []
    ok = valid_mask(faults)
    label, pred = np.asarray(faults["label"]), np.asarray(faults["pred"])
    if group.startswith("class "):
        cls = np.asarray(faults.get("fault_class", np.full(n, -1)))
        hit = ok & (cls == int(group.split()[1]))
    else:
        valid = not group.startswith("invalid ")
        t, p = group.removeprefix("invalid ").split(" → ")
        hit = (label == int(t)) & (pred == int(p)) & (ok == valid)
        if which == "valid":
            hit &= ok
    return np.flatnonzero(hit)[:limit].tolist()


def caption(faults: dict, i: int) -> str:
    """What a gallery cell says about fault ``i``: its pair, its root seed, the mutation and,
    for an invalid fault, the oracle's reason."""
    text = (f"{int(faults['label'][i])} → {int(faults['pred'][i])} · seed "
            f"{int(faults['root'][i])} · {faults['op'][i]}")
    if checked(faults) and not bool(faults["valid"][i]):
        text += f" · invalid: {faults.get('reason', [''] * (i + 1))[i] or 'no reason given'}"
    return text


def over_time(faults: dict, curve: dict, axis: str = "seconds") -> dict[str, tuple]:
    """Cumulative counts against ``axis`` (seconds or calls) from the rows: distinct faults,
    valid faults and fault classes (each class at its first member), each starting at 0."""
    out = {}
    n = _n(faults)
    if n == 0 or axis not in faults:
        if curve and len(curve.get(axis, ())):
            out["distinct faults"] = (np.r_[0.0, np.asarray(curve[axis], float)],
                                      np.r_[0.0, np.asarray(curve["distinct_faults"], float)])
        return out
    at = np.asarray(faults[axis], float)
    order = np.argsort(at, kind="stable")
    t = at[order]
    out["distinct faults"] = (np.r_[0.0, t], np.r_[0.0, np.arange(1, n + 1, dtype=float)])
    if checked(faults):
        ok = valid_mask(faults)[order]
        out["valid faults"] = (np.r_[0.0, t], np.r_[0.0, np.cumsum(ok).astype(float)])
        cls = np.asarray(faults.get("fault_class", np.full(n, -1)))[order]
        first = np.zeros(n, bool)
        seen = set()
        for j, (k, v) in enumerate(zip(cls.tolist(), ok.tolist())):
            if v and k >= 0 and k not in seen:
                seen.add(k)
                first[j] = True
        out["fault classes"] = (np.r_[0.0, t], np.r_[0.0, np.cumsum(first).astype(float)])
    if curve and len(curve.get(axis, ())):         # the last batch's time: lines reach it
        end = float(np.asarray(curve[axis])[-1])
        for name, (x, y) in out.items():
            if end > x[-1]:
                out[name] = (np.r_[x, end], np.r_[y, y[-1]])
    return out


COLORS = {"fault classes": "#d62728", "valid faults": "#ff7f0e",
          "distinct faults": "#7f7f7f", "coverage": "#1f77b4"}
AXIS_TITLES = {"seconds": "wall time (s)", "calls": "model calls"}


def curves_figure(faults: dict, curve: dict, axis: str = "seconds"):
    """Two charts side by side, each with its own axes from zero: faults over time (fault
    classes, valid and all distinct faults) and the guide's coverage over time."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("Faults found", "Coverage of the guide's criterion"))
    for name, (x, y) in over_time(faults, curve, axis).items():
        fig.add_trace(go.Scatter(x=x, y=y, name=name, mode="lines", line_shape="hv",
                                 line=dict(color=COLORS[name],
                                           dash="dot" if name == "distinct faults" else None)),
                      row=1, col=1)
    cov = np.asarray(curve.get("coverage", ()), float) if curve else np.zeros(0)
    if len(cov) and np.isfinite(cov).any():
        fig.add_trace(go.Scatter(x=np.asarray(curve[axis], float), y=cov, name="coverage",
                                 mode="lines", line=dict(color=COLORS["coverage"])),
                      row=1, col=2)
        fig.update_yaxes(tickformat=".0%", row=1, col=2)
    fig.update_xaxes(title_text=AXIS_TITLES.get(axis, axis), rangemode="tozero")
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(title_text="count", row=1, col=1)
    fig.update_yaxes(title_text="coverage", row=1, col=2)
    fig.update_layout(height=360, template="plotly_white", margin=dict(l=10, r=10, t=50, b=10),
                      legend=dict(orientation="h", y=-0.25))
    return fig
