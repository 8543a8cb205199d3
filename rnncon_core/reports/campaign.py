"""`rnncon report campaign`: does guidance by a criterion find more distinct faults in a fixed
budget than no guidance?

For each model, each guide (a registered criterion, or an unguided baseline,
``campaign.BASELINES``: ``none`` keeps every mutant predicted right, ``faults`` only the new
distinct faults) and each repeat r (random seed r), one campaign of the same budget from the
same seeds (``rnncon_core.campaign.run_campaign``). Reported per (model, guide): the mean number
of distinct faults (distinct (true, predicted, abstract state) triples) and of distinct (true,
predicted) pairs at the budget, with 95 % t intervals over the repeats; per guide and
baseline, the difference with Welch's 95 % interval, and the verdict "beats B" only where that
interval lies above 0 (``none`` against every other guide, ``faults`` against the criteria:
does a criterion add anything beyond keeping few mutants?). The curves (mean distinct faults
against wall time or model calls) are drawn in ``curves.svg``.

Rows are written to ``runs.csv`` after every campaign, and a rerun with the same settings skips
the campaigns already there, so a long report can be stopped and continued. Each row carries
its loop's yield options (column ``loop``, ``campaign.loop.loop_label``; rows without it ran the
loop before those options existed), and the summary reads only the rows of the current loop,
so campaigns of two loop versions are never mixed.
"""
from __future__ import annotations

import platform
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import campaign
from ..campaign import (BASELINES, BASELINE_TEXT, CAMPAIGN_PARAMS, GUIDE_NONE, load_campaign,
                        make_guide, parse_budget)
from ..campaign.loop import YIELD_BEFORE, loop_label
from ..campaign.record import read_rows
from ..coverage import CRITERIA
from ..data import load_dataset, to_images
from ..errors import InputError
from ..params import split_list
from ..runs import RunStore
from .charts import image_grid
from .faults import caption, curves_figure, groups, members
from .html import Section, flat_settings, render
from .writer import write_files

MODELS = ("mnist-lstm", "stacked-mnist-lstm", "mnist-gru", "stacked-mnist-gru", "imdb-lstm")
GUIDES = ("rconc", "nc", "kmnc", "state", "bc", "none", "faults")   # baselines last
GRID_POINTS = 24
# the measure guides are judged on: valid distinct faults (a reader would still give each its
# seed's label; campaign.classes, validity); campaigns before validity have no such column
MEASURE = "valid_faults"
MEASURE_WORDS = {"valid_faults": "valid distinct faults", "distinct_faults": "distinct faults"}


def measure_of(rows) -> str:
    """The column guides are judged on: valid distinct faults, or (rows of campaigns before
    validity, which lack it) distinct faults."""
    return MEASURE if MEASURE in rows and not pd.isna(rows[MEASURE]).any() else \
        "distinct_faults"
VALIDITY_LABEL = ",validity=default"     # in the loop label: rows before validity are apart
COLORS = {"rconc": "#d62728", "nc": "#1f77b4", "kmnc": "#2ca02c", "state": "#9467bd",
          "bc": "#8c564b", "none": "#111111", "faults": "#7f7f7f"}


def t_interval(v) -> tuple[float, float, float]:
    """(mean, low, high): the mean with its 95 % t interval (nan interval below 2 values)."""
    from scipy.stats import t
    v = np.asarray(v, np.float64)
    m = float(v.mean()) if len(v) else float("nan")
    if len(v) < 2:
        return m, float("nan"), float("nan")
    h = float(t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))
    return m, m - h, m + h


def welch(a, b) -> tuple[float, float, float]:
    """(mean(a) - mean(b), low, high): Welch's 95 % interval of the difference."""
    from scipy.stats import t
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    d = float(a.mean() - b.mean())
    if len(a) < 2 or len(b) < 2:
        return d, float("nan"), float("nan")
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = np.sqrt(va + vb)
    if se == 0:
        return d, d, d
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    h = float(t.ppf(0.975, df) * se)
    return d, d - h, d + h


def _grid_values(curve: dict, grid: np.ndarray, axis: str = "seconds") -> np.ndarray:
    """Distinct faults at each grid point of ``axis`` (seconds or calls: the last value
    recorded at or before it)."""
    col = MEASURE if MEASURE in curve and np.isfinite(np.asarray(curve[MEASURE], float)).all() \
        else "distinct_faults"
    at, faults = np.asarray(curve[axis]), np.asarray(curve[col])
    pos = np.searchsorted(at, grid, side="right") - 1
    return np.where(pos >= 0, faults[np.maximum(pos, 0)], 0.0)


def budgets_of(budget: str, models) -> dict:
    """Each model's budget from "8000calls" or "8000calls,imdb-lstm=1500calls" (one for all,
    then per-model exceptions; a model's data set decides how fast a model call is)."""
    parts = [p.strip() for p in str(budget).split(",") if p.strip()]
    default = next((p for p in parts if "=" not in p), None)
    out = {}
    for p in parts:
        if "=" in p:
            name, b = (v.strip() for v in p.split("=", 1))
            if name not in models:
                raise InputError(f"budget {p!r}: {name} is not one of the report's models "
                                 f"({', '.join(models)})")
            out[name] = b
    for m in models:
        if m not in out:
            if default is None:
                raise InputError(f"budget {budget!r}: give a budget for {m} (or one for all)")
            out[m] = default
    for b in out.values():
        parse_budget(b)                 # a clear error now, not after hours of campaigns
    return out


def _grid(budget: str) -> tuple[str, np.ndarray]:
    """The curve's axis (seconds, or calls for a budget in model calls) and its points."""
    b = parse_budget(budget)
    axis, end = ("calls", b.calls) if b.calls is not None else ("seconds", b.seconds)
    return axis, np.linspace(0, end, GRID_POINTS + 1)


def summarize(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (model, guide) means with intervals; per guide and baseline (``against``) the
    difference, one row each (column ``baseline``); judged on ``measure_of(rows)``."""
    table, verdicts = [], []
    measure = measure_of(rows)
    for (model, guide), g in rows.groupby(["model", "guide"], sort=False):
        f, fl, fh = t_interval(g[measure])
        p, pl, ph = t_interval(g["distinct_pairs"])
        k, kl, kh = t_interval(1000 * g[measure] / g["calls"])
        table.append({"model": model, "guide": guide, "repeats": len(g), "faults": f,
                      "faults_low": fl, "faults_high": fh, "pairs": p, "pairs_low": pl,
                      "pairs_high": ph, "per_kcall": k, "per_kcall_low": kl,
                      "per_kcall_high": kh, "coverage": g["coverage"].mean(),
                      "classes": g["fault_classes"].mean() if "fault_classes" in g else np.nan,
                      "invalid": g["invalid_faults"].mean() if "invalid_faults" in g
                      else np.nan, "all_faults": g["distinct_faults"].mean(),
                      "calls": g["calls"].mean(), "overhead": g["overhead"].mean()})
        for baseline in against(guide):
            base = rows[(rows.model == model) & (rows.guide == baseline)]
            if len(base):
                verdicts.append({"model": model, "guide": guide, "baseline": baseline,
                                 **_difference(g, base, baseline, measure)})
    return pd.DataFrame(table), pd.DataFrame(verdicts)


def against(guide: str) -> tuple[str, ...]:
    """The baselines a guide is compared with: none for every other guide, faults for the
    criteria (faults against none is none's row)."""
    if guide in BASELINES:
        return () if guide == GUIDE_NONE else (GUIDE_NONE,)
    return BASELINES


def _difference(g: pd.DataFrame, base: pd.DataFrame, baseline: str,
                measure: str = MEASURE) -> dict:
    """Welch's 95 % intervals of guide rows ``g`` minus ``base`` (faults, pairs, per 1000
    calls) and the verdict on faults."""
    d, lo, hi = welch(g[measure], base[measure])
    dp, plo, phi = welch(g["distinct_pairs"], base["distinct_pairs"])
    dk, klo, khi = welch(1000 * g[measure] / g["calls"],
                         1000 * base[measure] / base["calls"])
    return {"faults_diff": d, "low": lo, "high": hi, "pairs_diff": dp, "pairs_low": plo,
            "pairs_high": phi, "per_kcall_diff": dk, "per_kcall_low": klo,
            "per_kcall_high": khi, "verdict": f"beats {baseline}" if lo > 0 else
            (f"worse than {baseline}" if hi < 0 else "no difference shown")}


def curves_svg(curves: pd.DataFrame, width: int = 760, panel_h: int = 220) -> str:
    """Mean distinct faults against seconds or model calls (column ``axis``, points ``at``),
    one panel per model, one line per guide."""
    models = list(dict.fromkeys(curves["model"]))
    pad, h = 48, panel_h
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{len(models) * (h + 30) + 30}" font-family="sans-serif" font-size="11">']
    for k, model in enumerate(models):
        c = curves[curves.model == model]
        top = 20 + k * (h + 30)
        axis = str(c["axis"].iloc[0]) if "axis" in c else "seconds"
        at = c["at"] if "at" in c else c["seconds"]
        tmax, fmax = max(1e-9, at.max()), max(1.0, c["faults"].max())
        x = lambda t: pad + (width - pad - 110) * t / tmax                       # noqa: E731
        y = lambda f: top + h - 20 - (h - 40) * f / fmax                         # noqa: E731
        out.append(f'<text x="{pad}" y="{top}" font-weight="bold">{model}: mean distinct '
                   f'faults against {"model calls" if axis == "calls" else "seconds"}</text>')
        out.append(f'<line x1="{pad}" y1="{y(0)}" x2="{x(tmax)}" y2="{y(0)}" stroke="#999"/>')
        out.append(f'<line x1="{pad}" y1="{y(0)}" x2="{pad}" y2="{y(fmax)}" stroke="#999"/>')
        out.append(f'<text x="{pad - 4}" y="{y(fmax) + 4}" text-anchor="end">{fmax:.0f}</text>')
        unit = " calls" if axis == "calls" else " s"
        out.append(f'<text x="{x(tmax)}" y="{y(0) + 14}" text-anchor="end">{tmax:.0f}{unit}'
                   f'</text>')
        for j, (guide, g) in enumerate(c.groupby("guide", sort=False)):
            pts = " ".join(f"{x(t):.1f},{y(f):.1f}" for t, f in zip(
                g["at"] if "at" in g else g["seconds"], g["faults"]))
            color = COLORS.get(guide, "#777")
            out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.6" '
                       f'points="{pts}"/>')
            out.append(f'<text x="{width - 100}" y="{top + 16 + 14 * j}" fill="{color}">'
                       f'{guide}</text>')
    out.append("</svg>")
    return "\n".join(out)


def markdown(table: pd.DataFrame, verdicts: pd.DataFrame, settings: dict) -> str:
    budgets = settings.get("budgets") or {}
    common = next((p.strip() for p in str(settings["budget"]).split(",") if "=" not in p),
                  settings["budget"])
    others = [f"{m}: {b}" for m, b in budgets.items() if b != common]
    per = common + (f" ({'; '.join(others)})" if others else "")
    source = f", from {settings['dataset']}" if settings.get("dataset") else ""
    words = MEASURE_WORDS[settings.get("measure", MEASURE)]
    lines = [f"# Campaigns: {words} in a fixed budget, by guide", "",
             f"Budget {per} per campaign, {settings['seeds']} seeds (the first "
             f"test inputs each model predicts right{source}), repeats = random seeds 0..r-1; "
             f"measured on this machine ({settings.get('machine', '')}). Valid distinct faults "
             "(the measure): distinct (true, predicted, DeepStellar abstract state) triples "
             "among the faults that pass the data set's validity checks (docs/validity.md: "
             "an autoencoder of the training split and an independent reference classifier "
             "for images, the reader checks of every edit for reviews); fault classes: valid "
             "faults grouped per (true, predicted) pair by HDBSCAN in the model's penultimate "
             "features; invalid: distinct faults set aside; pairs: distinct (true, "
             "predicted), valid or not. Intervals: 95 % t over the repeats. Loop: "
             f"{_loop_of(settings.get('loop'))} (campaign parameters explore_faults and "
             "stale_picks).", "",
             *([settings["note"], ""] if settings.get("note") else []),
             "| model | guide | n | valid distinct faults [95 % CI] | fault classes | invalid "
             "| pairs [95 % CI] | per 1000 calls [95 % CI] | final coverage | model calls | "
             "loop / model time |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        lines.append(f"| {r.model} | {r.guide} | {r.repeats} | {r.faults:.1f} "
                     f"[{r.faults_low:.1f}, {r.faults_high:.1f}] | {r.classes:.1f} | "
                     f"{r.invalid:.1f} | {r.pairs:.1f} "
                     f"[{r.pairs_low:.1f}, {r.pairs_high:.1f}] | {r.per_kcall:.2f} "
                     f"[{r.per_kcall_low:.2f}, {r.per_kcall_high:.2f}] | {r.coverage:.4f} | "
                     f"{r.calls:.0f} | {r.overhead:.2f} |")
    timed = any(parse_budget(b).calls is None
                for b in (settings.get("budgets") or {"": settings["budget"]}).values())
    lines += ["", ("Wall-clock budgets on a shared machine: the load varied between campaigns, "
                   "so a campaign ran more or fewer model calls (column 'model calls'); the "
                   "rate per 1000 model calls is less affected by the load." if timed else
                   "Budgets in model calls: every campaign of a model ran the same number of "
                   "model calls whatever the machine's load, so guides are compared on the "
                   "same work; seconds and loop / model time depend on the load.")]
    for baseline in _baselines(verdicts):
        lines += _against_markdown(verdicts[verdicts.baseline == baseline], baseline)
    verdict = " ".join(_verdict(verdicts, b) for b in _baselines(verdicts))
    lines += ["", f"**Verdict:** {verdict or 'no baseline to compare with.'}", ""]
    return "\n".join(lines)


def _baselines(verdicts: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(verdicts["baseline"])) if len(verdicts) else []


def _verdict(verdicts: pd.DataFrame, baseline: str) -> str:
    """One sentence: which guides beat ``baseline`` (95 % interval of the difference above 0)
    on which models, and which find fewer."""
    v = verdicts[verdicts.baseline == baseline]

    def who(verdict: str) -> list[str]:
        out = []
        for guide, g in v.groupby("guide", sort=False):
            hit = list(g.model[g.verdict == verdict])
            if hit:
                out.append(f"{guide} on " + ("every model" if len(hit) == len(g) and len(g) > 1
                                             else ", ".join(hit)))
        return out
    won, lost = who(f"beats {baseline}"), who(f"worse than {baseline}")
    text = (f"Against {baseline}: " + ("; ".join(won) + f" beat{'s' if len(won) == 1 else ''}"
                                       f" it" if won else "no guide beats it on any model") +
            " (95 % interval of the difference above 0)")
    return text + (f"; fewer valid distinct faults than {baseline}: " + "; ".join(lost) if lost
                   else "") + "."


def _against_markdown(v: pd.DataFrame, baseline: str) -> list[str]:
    """The section of one baseline: the differences, then where pairs and the rate differ."""
    what = BASELINE_TEXT.get(baseline, "")
    lines = ["", f"## Against the unguided baseline {baseline}" + (f" ({what})" if what
                                                                      else ""), "",
             f"Each column: the guide's mean minus the mean of {baseline}, with Welch's 95 % "
             f"interval.", "",
             "| model | guide | valid distinct faults | pairs | per 1000 calls | verdict (valid "
             "distinct faults at the budget) |", "|---|---|---|---|---|---|"]
    for r in v.itertuples():
        lines.append(f"| {r.model} | {r.guide} | {r.faults_diff:+.1f} [{r.low:+.1f}, "
                     f"{r.high:+.1f}] | {r.pairs_diff:+.1f} [{r.pairs_low:+.1f}, "
                     f"{r.pairs_high:+.1f}] | {r.per_kcall_diff:+.2f} "
                     f"[{r.per_kcall_low:+.2f}, {r.per_kcall_high:+.2f}] | {r.verdict} |")

    def where(col_low, col_high, above: bool) -> str:
        hit = v[v[col_low] > 0] if above else v[v[col_high] < 0]
        return ", ".join(f"{r.guide} on {r.model}" for r in hit.itertuples()) or "no guide"
    return lines + [
        "", f"- More distinct (true, predicted) pairs than {baseline} (95 % interval above "
            f"0): {where('pairs_low', 'pairs_high', True)}; fewer: "
            f"{where('pairs_low', 'pairs_high', False)}.",
        f"- More distinct faults per 1000 model calls than {baseline}: "
        f"{where('per_kcall_low', 'per_kcall_high', True)}; fewer: "
        f"{where('per_kcall_low', 'per_kcall_high', False)}."]


def _loop_of(value) -> str:
    """A row's loop label (rows written before the column: the loop without yield options)."""
    return value if isinstance(value, str) and value else loop_label(YIELD_BEFORE)


def build_campaign(models=None, guides=None, repeats: int = 5, budget: str = "30s",
                   seeds: int = 100, dataset: str | None = None,
                   out_dir: str = "reports/campaign", store=None,
                   log: Callable[[str], None] = print, **params) -> dict:
    """Run the campaigns not yet in ``out_dir/runs.csv`` and write the report files (seeds
    from ``dataset``'s test split: a name or an .npz path; default: each model's own)."""
    models, guides = list(models or MODELS), list(guides or GUIDES)
    store = store if store is not None else RunStore()
    out = Path(out_dir)
    csv = out / "runs.csv"
    rows = pd.read_csv(csv).to_dict("records") if csv.exists() else []
    curve_rows = pd.read_csv(out / "curves.csv").to_dict("records") \
        if (out / "curves.csv").exists() else []
    for x in rows + curve_rows:              # rows of a report written before the column
        x["loop"] = _loop_of(x.get("loop"))
    per_model = budgets_of(budget, models)
    loop = loop_label(CAMPAIGN_PARAMS.check("the report's campaigns", params)) + VALIDITY_LABEL
    settings = {"budget": budget, "budgets": per_model, "seeds": seeds, "repeats": repeats,
                "models": models, "guides": guides, "params": params, "loop": loop,
                **({"dataset": str(dataset)} if dataset else {})}
    for model in models:
        mb = per_model[model]
        axis, grid = _grid(mb)
        for r in range(repeats):
            for guide in guides:
                if any(x["model"] == model and x["guide"] == guide and x["repeat"] == r
                       and x["budget"] == mb and x["seeds"] == seeds and x["loop"] == loop
                       for x in rows):
                    continue
                s = campaign.run_campaign(model, dataset, guide=guide, budget=mb, seeds=seeds,
                                          seed=r, store=store, **params)
                rows.append({"model": model, "guide": guide, "repeat": r, "budget": mb,
                             "seeds": seeds, "loop": loop, **{k: s[k] for k in (
                                 "run_id", "valid_faults", "invalid_faults", "fault_classes",
                                 "fault_roots", "valid_pairs", "distinct_faults",
                                 "distinct_pairs", "faults_total",
                                 "coverage_start", "coverage", "calls", "seconds", "overhead",
                                 "queue", "memory_mb")},
                             "load_avg_1min": round(__import__("os").getloadavg()[0], 2)})
                curve = campaign.load_campaign(store.get(s["run_id"]))["curve"]
                curve_rows += [{"model": model, "guide": guide, "repeat": r, "budget": mb,
                                "loop": loop, "axis": axis, "at": t, "faults": f}
                               for t, f in zip(grid, _grid_values(curve, grid, axis))]
                log(f"[campaign] {model} {guide} repeat {r}: {s['valid_faults']} valid "
                    f"distinct faults ({s['fault_classes']} classes, {s['invalid_faults']} "
                    f"invalid), coverage {s['coverage']:.4f}")
                write_files(out, {"runs.csv": rows, "curves.csv": curve_rows}, "campaign")
    return write_report(out, settings)


def _ordered(rows: pd.DataFrame, settings: dict) -> pd.DataFrame:
    """Rows in the report's order of models, then of guides (others after them)."""
    def rank(names, order):
        order = list(order or [])
        return [order.index(n) if n in order else len(order) for n in names]
    key = pd.DataFrame({"m": rank(rows.model, settings.get("models")),
                        "g": rank(rows.guide, settings.get("guides"))}, index=rows.index)
    return rows.loc[key.sort_values(["m", "g"], kind="stable").index]


def write_report(out: Path, settings: dict) -> dict:
    rows = pd.read_csv(out / "runs.csv")
    budgets = settings.get("budgets") or {}
    loop = _loop_of(settings.get("loop"))

    def mine(df):       # this report's budgets and loop version only
        loops = df["loop"] if "loop" in df else [None] * len(df)
        return df[[budgets.get(m, settings["budget"]) == b and _loop_of(v) == loop
                   for m, b, v in zip(df.model, df.budget, loops)]]
    rows = _ordered(mine(rows), settings)
    table, verdicts = summarize(rows)
    settings["measure"] = measure_of(rows)
    curves = pd.read_csv(out / "curves.csv")
    curves = mine(curves)
    mean = curves.groupby(["model", "guide", "axis", "at"], sort=False)["faults"].mean() \
        .reset_index()
    report = {"settings": settings, "table": table.to_dict("records"),
              "against_baselines": verdicts.to_dict("records")}
    settings["machine"] = f"{platform.machine()}, {__import__('os').cpu_count()} cores shared"
    files = write_files(out, {"summary.md": markdown(table, verdicts, settings),
                              "campaign.json": report, "curves.svg": curves_svg(mean)},
                        "campaign")
    return {**report, "files": files}


# ---------------------------------------------------------------- one campaign run

def pair_table(faults: dict) -> pd.DataFrame:
    """Per (true, predicted) pair, most valid faults first: fault classes of valid faults,
    valid faults, the root seeds behind them, and invalid faults (runs before validity: every
    fault valid, classes unknown)."""
    cols = ["true", "predicted", "fault classes", "valid faults", "seeds", "invalid faults"]
    n = len(faults.get("label", ())) if faults else 0
    if not n:
        return pd.DataFrame(columns=cols)
    valid = np.asarray(faults.get("valid", np.ones(n, bool)), bool)
    cls = np.asarray(faults.get("fault_class", np.full(n, -1)))
    df = pd.DataFrame({"true": faults["label"], "predicted": faults["pred"], "valid": valid,
                       "cls": np.where(valid & (cls >= 0), cls, -1),
                       "root": np.where(valid, faults["root"], -1)})
    out = df.groupby(["true", "predicted"]).agg(
        **{"fault classes": ("cls", lambda c: int(len(set(c) - {-1}))),
           "valid faults": ("valid", "sum"), "seeds": ("root", lambda r: len(set(r) - {-1})),
           "invalid faults": ("valid", lambda v: int((~v.astype(bool)).sum()))}).reset_index()
    if "fault_class" not in faults:
        out["fault classes"] = np.nan
    return out.sort_values(["valid faults", "true", "predicted"],
                           ascending=[False, True, True])[cols]


def curve_figure(curve: dict, title: str = "Coverage and distinct faults"):
    """Coverage and distinct faults against wall time (top) and model calls (bottom)."""
    fig = make_subplots(rows=2, cols=1, specs=[[{"secondary_y": True}], [{"secondary_y": True}]],
                        subplot_titles=("against wall time (s)", "against model calls"),
                        vertical_spacing=0.14)
    for row, axis in ((1, "seconds"), (2, "calls")):
        x = np.asarray(curve[axis])
        fig.add_trace(go.Scatter(x=x, y=curve["distinct_faults"], name="distinct faults",
                                 line=dict(color="#d62728"), showlegend=row == 1),
                      row=row, col=1, secondary_y=False)
        valid = np.asarray(curve.get("valid_faults", []), np.float64)
        if len(valid) == len(x) and np.isfinite(valid).any():
            fig.add_trace(go.Scatter(x=x, y=valid, name="valid distinct faults",
                                     line=dict(color="#2ca02c"), showlegend=row == 1),
                          row=row, col=1, secondary_y=False)
        fig.add_trace(go.Scatter(x=x, y=curve["distinct_pairs"], name="distinct pairs",
                                 line=dict(color="#ff7f0e", dash="dot"), showlegend=row == 1),
                      row=row, col=1, secondary_y=False)
        cov = np.asarray(curve["coverage"], np.float64)
        if np.isfinite(cov).any():
            fig.add_trace(go.Scatter(x=x, y=cov, name="coverage", line=dict(color="#1f77b4"),
                                     showlegend=row == 1), row=row, col=1, secondary_y=True)
    fig.update_yaxes(title_text="faults", secondary_y=False)
    fig.update_yaxes(title_text="coverage", secondary_y=True)
    fig.update_layout(title=title, height=560, template="plotly_white",
                      margin=dict(l=10, r=10, t=60, b=10))
    return fig


def gallery_rows(faults: dict, per_pair: int = 2, limit: int = 24) -> list[int]:
    """Up to ``per_pair`` faults of each (true, predicted) pair, the most frequent pairs
    first."""
    out = []
    for r in pair_table(faults).itertuples():
        hit = np.flatnonzero((faults["label"] == r.true) & (faults["pred"] == r.predicted))
        out += hit[:per_pair].tolist()
        if len(out) >= limit:
            break
    return out[:limit]


def fault_gallery(faults: dict, seeds: dict | None = None, per_group: int = 2,
                  limit: int = 12):
    """Image campaigns: one or two faults of each fault class (valid faults, the largest
    classes first; then invalid ones with their reason), each beside its root seed."""
    rows = []
    for which in ("valid", "invalid"):
        for g in groups(faults, which).group:
            rows += members(faults, g, which, per_group)
    rows = rows[:limit]
    if seeds is None or not len(seeds.get("x", ())):
        return image_grid(to_images(faults["x"][rows]), [caption(faults, i) for i in rows],
                          cols=8, title="Faults")
    cls = np.asarray(faults.get("fault_class", np.full(len(faults["label"]), -1)))
    images, caps = [], []
    for i in rows:
        images += [seeds["x"][int(faults["root"][i])], faults["x"][i]]
        head = f"class {cls[i]}" if cls[i] >= 0 else "invalid"
        caps += [f"seed {int(faults['root'][i])} ({int(faults['label'][i])})",
                 f"{head}: {caption(faults, i)}"[:60]]
    return image_grid(to_images(np.stack(images)), caps, cols=6,
                      title="Each fault beside its root seed, by fault class")


def fault_table(faults: dict, seeds: dict, vocab=None, per_pair: int = 2,
                limit: int = 24) -> pd.DataFrame:
    """A few faults of each (true, predicted) pair beside their campaign seed: the words the
    mutations replaced (text, given the data set's ``vocab``) or the distance from the seed
    (L2 and L∞, other inputs)."""
    rows = gallery_rows(faults, per_pair, limit)
    out = []
    for i in rows:
        root = int(faults["root"][i])
        seed, x = np.asarray(seeds["x"][root]), np.asarray(faults["x"][i])
        row = {"true": int(faults["label"][i]), "predicted": int(faults["pred"][i]),
               "seed": root, "mutation": str(faults["op"][i])}
        if vocab is not None:
            at = np.flatnonzero(seed != x)
            word = lambda i: " ".join(vocab.decode([i])) or "<pad>"   # noqa: E731
            row["words replaced"] = "; ".join(f"{word(seed[j])} → {word(x[j])}" for j in at)
        else:
            d = (x - seed).ravel().astype(float)
            row["L2"], row["L∞"] = float(np.sqrt(d @ d)), float(np.abs(d).max(initial=0))
        out.append(row)
    return pd.DataFrame(out)


def campaign_html(info, bounds: pd.DataFrame | None = None) -> str:
    """One campaign run as a self-contained HTML page (summary, curves, pairs, gallery;
    with ``bounds``, the CI gate's checks first)."""
    c = load_campaign(info)
    s = c["summary"]
    facts = {"run": info.run_id, "status": info.status, "model": s.get("model", info.model),
             "guide": s.get("guide", info.method), "budget": s.get("budget"),
             "fault classes (valid faults)": s.get("fault_classes"),
             "root seeds with a valid fault": s.get("fault_roots"),
             "valid distinct faults": s.get("valid_faults"),
             "invalid faults set aside": s.get("invalid_faults"),
             "distinct faults (valid or not)": s.get("distinct_faults"),
             "distinct (true, predicted) pairs": s.get("distinct_pairs"),
             "coverage": s.get("coverage"), "model calls": s.get("calls")}
    sections = [Section("Checks", tables=[("", bounds)])] if bounds is not None else []
    sections += [Section("Curves", figures=[curves_figure(c["faults"], c["curve"], "seconds"),
                                            curves_figure(c["faults"], c["curve"], "calls")]),
                 Section("Fault classes of valid faults", tables=[("", groups(c["faults"]))]),
                 Section("Faults by (true, predicted)",
                         tables=[("", pair_table(c["faults"]))])]
    kind = c["config"].get("kind")
    if kind == "image" and len(c["faults"].get("label", ())):
        sections.append(Section("Fault gallery: each fault beside its root seed",
                                figures=[fault_gallery(c["faults"], c["seeds"])]))
    elif len(c["faults"].get("label", ())) and len(c["seeds"].get("x", ())):
        vocab = None
        if kind == "text":
            vocab = load_dataset(c["config"]["dataset"]).vocab
        sections.append(Section("Faults beside their seeds",
                                tables=[("", fault_table(c["faults"], c["seeds"], vocab))]))
    return render(f"Campaign {info.run_id}", facts, sections, settings=flat_settings(c["config"]))


# ---------------------------------------------------------------- the CI gate

def parse_bounds(items) -> dict[str, float]:
    """["rconc=0.8", "nc=0.5,kmnc=0.3"] -> {"rconc": 0.8, ...} (criteria checked by name)."""
    out = {}
    for item in items or []:
        for pair in split_list(item, "--min-coverage"):
            name, eq, value = pair.partition("=")
            name = name.strip()
            try:
                bound = float(value)
            except ValueError:
                bound = -1.0
            if not eq or name not in CRITERIA or not 0.0 <= bound <= 1.0:
                raise InputError(f"--min-coverage {pair!r}: give CRITERION=RATE with a "
                                 f"criterion of {', '.join(CRITERIA)} and a rate in [0, 1]")
            out[name] = bound
    return out


# what `rnncon check --max-faults` counts (--count): summary key and the words of its check
FAULT_COUNTS = {"classes": ("fault_classes", "fault classes of valid faults"),
                "valid": ("valid_faults", "valid distinct faults"),
                "all": ("distinct_faults", "distinct faults (valid or not)")}


def check_bounds(info, model, min_coverage: dict, max_faults: int | None,
                 count: str = "classes") -> pd.DataFrame:
    """One row per bound: check, measured, bound, passed. Coverage of a criterion that did not
    guide the campaign is measured over the campaign's queue (its seeds and every kept
    input). ``count``: what ``max_faults`` bounds (``FAULT_COUNTS``)."""
    s = info.summary or {}
    rows = []
    queue = None
    for name, bound in min_coverage.items():
        if name == s.get("guide"):
            rate = float(s["coverage"])
        else:
            if queue is None:
                queue = read_rows(info, "queue")["x"]
            crit = make_guide(name, model, {})
            for i in range(0, len(queue), 256):
                crit.update(queue[i:i + 256])
            rate = float(crit.rate())
        rows.append({"check": f"coverage {name} >= {bound:g}", "measured": rate,
                     "bound": bound, "passed": rate >= bound})
    if max_faults is not None:
        key, words = FAULT_COUNTS[count]
        n = int(s.get(key) if s.get(key) is not None else s.get("distinct_faults", 0))
        rows.append({"check": f"{words} <= {max_faults}", "measured": n,
                     "bound": max_faults, "passed": n <= max_faults})
    return pd.DataFrame(rows, columns=["check", "measured", "bound", "passed"])


def junit_xml(bounds: pd.DataFrame, info, seconds: float) -> str:
    """JUnit XML: one test case per bound (a failure element where it failed); the property
    ``exit_code`` is the command's (0 every bound passed, 1 one failed)."""
    s = info.summary or {}
    suites = ET.Element("testsuites")
    failures = int((~bounds["passed"].astype(bool)).sum())
    suite = ET.SubElement(suites, "testsuite", name="rnncon check", tests=str(len(bounds)),
                          failures=str(failures), errors="0", time=f"{seconds:.3f}")
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="exit_code", value=str(1 if failures else 0))
    for k in ("model", "guide", "budget", "fault_classes", "fault_roots", "valid_faults",
              "invalid_faults", "distinct_faults", "distinct_pairs", "coverage", "calls"):
        ET.SubElement(props, "property", name=k, value=str(s.get(k)))
    ET.SubElement(props, "property", name="run_id", value=info.run_id)
    for r in bounds.itertuples():
        case = ET.SubElement(suite, "testcase", classname=f"rnncon.check.{s.get('model')}",
                             name=r.check, time="0")
        if not r.passed:
            f = ET.SubElement(case, "failure", message=f"measured {r.measured:.4g}, bound "
                                                       f"{r.bound:g}")
            f.text = (f"{r.check} failed on {s.get('model')}: measured {r.measured:.4g} "
                      f"(campaign {info.run_id}, guide {s.get('guide')}, budget "
                      f"{s.get('budget')})")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, "unicode") + "\n"


def junit_error_xml(message: str, exit_code: int, seconds: float, model=None) -> str:
    """JUnit XML of a check that could not run: one test case with an error element (the
    one-line message) and the property ``exit_code`` (2 a usage or input error, 3 an internal
    error), so that a CI job tells a typo from a failing model."""
    suites = ET.Element("testsuites")
    suite = ET.SubElement(suites, "testsuite", name="rnncon check", tests="1", failures="0",
                          errors="1", time=f"{seconds:.3f}")
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="exit_code", value=str(exit_code))
    kind = "input error" if exit_code == 2 else "internal error"
    case = ET.SubElement(suite, "testcase", classname=f"rnncon.check.{model}",
                         name=f"rnncon check ({kind})", time="0")
    error = ET.SubElement(case, "error", type=kind, message=message)
    error.text = f"error: {message} (exit code {exit_code})"
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, "unicode") + "\n"
