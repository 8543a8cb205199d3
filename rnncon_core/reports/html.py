"""A report to share: one self-contained HTML file (interactive Plotly figures, the tables, the
model, data, settings and versions) that opens offline in any browser.

The pages' "Download report" buttons call the builders below with what they show; the same
files come from the command line:

    rnncon report html --model mnist-lstm [--n 200 --threshold 0.25 ...]   # coverage
    rnncon report html --run RUN_ID                  # a generation or retraining run

Plotly's JavaScript is embedded once per file (about 4.7 MB), so nothing is fetched.
"""
from __future__ import annotations

import html
import re
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from .. import data, zoo
from ..coverage import (CellStateCoverage, ContributionCoverage, HiddenStateCoverage,
                        NeuronCoverage, default_threshold)
from ..errors import UnsupportedModelError
from ..io import versions as core_versions
from ..trace import Tracer
from . import charts, results

PACKAGES = ("pandas", "plotly", "streamlit", "scikit-learn")   # beside the core's versions


@dataclass
class Section:
    heading: str
    text: str = ""
    figures: list = field(default_factory=list)           # plotly Figures
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)


def versions() -> dict[str, str]:
    return core_versions(extra=PACKAGES)


_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
       max-width: 1200px; color: #262730; padding: 0 1rem; }
h1 { margin-bottom: .2rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
.meta { color: #555; } table { border-collapse: collapse; margin: .6rem 0 1.2rem;
font-size: .9rem; } th, td { border: 1px solid #ddd; padding: .25rem .6rem; text-align: right; }
th { background: #f6f6f9; } td:first-child, th:first-child { text-align: left; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dt { font-weight: 600; } dd { margin: 0; } .caption { color: #666; font-size: .9rem; }
"""


_PATH = re.compile(r"(?<![\w:/.])(?:/[\w.+@-]+)+/([\w.+@-]+)")


def public(text) -> str:
    """A value as a report shows it: every absolute file path cut to its file name (a report
    is shared: the server's folders are nobody's business)."""
    return _PATH.sub(r"\1", _text(text))


def _public_frame(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col]):
            out[col] = [v if v is None or (isinstance(v, float) and np.isnan(v))
                        else public(v) if isinstance(v, str) else v for v in out[col]]
    return out


def render(title: str, facts: dict, sections: Sequence[Section],
           settings: dict | None = None) -> str:
    """The HTML document: title, facts (model, data, …), sections, settings, versions; no
    absolute path of the server anywhere (:func:`public`)."""
    title = public(title)
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>",
             f"<p class='meta'>RNNCon-Test report written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
             "</p>", _dl(facts)]
    js = True                                     # plotly.js inline with the first figure
    for s in sections:
        parts.append(f"<h2>{html.escape(s.heading)}</h2>")
        if s.text:
            parts.append(f"<p>{html.escape(public(s.text))}</p>")
        for name, df in s.tables:
            if name:
                parts.append(f"<p class='caption'>{html.escape(public(name))}</p>")
            parts.append(_public_frame(df).to_html(index=False, na_rep="—", border=0,
                                                   float_format=lambda v: f"{v:.4g}"))
        for fig in s.figures:
            parts.append(fig.to_html(full_html=False, include_plotlyjs=js,
                                     config={"displaylogo": False}))
            js = False
    if settings:                 # after the results: a reader comes for those first
        parts += ["<h2>Settings</h2>", _dl(settings)]
    parts += ["<h2>Versions</h2>", _dl(versions()), "</body></html>"]
    return "\n".join(parts)


def _dl(d: dict) -> str:
    rows = "".join(f"<dt>{html.escape(str(k))}</dt><dd>{html.escape(public(v))}</dd>"
                   for k, v in d.items())
    return f"<dl>{rows}</dl>"


def _text(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(map(_text, v))
    if isinstance(v, dict):
        return "; ".join(f"{k}={_text(x)}" for k, x in v.items())
    return str(v)


# ---------------------------------------------------------------- the three reports

def coverage(view: dict, sweep: pd.DataFrame, facts: dict, settings: dict) -> str:
    """The Coverage page at one threshold: headline figures, per layer, growth, the sweep.
    ``view`` is ``state.coverage_at(...)`` (or ``results.coverage_view(...)``)."""
    t = settings["threshold"]
    heads = pd.DataFrame([
        {"criterion": "RConC", "rate %": 100 * view["rconc"][0], "covered": view["rconc"][1],
         "total": view["rconc"][2]},
        {"criterion": "NC", "rate %": 100 * view["nc"][0], "covered": view["nc"][1],
         "total": view["nc"][2]},
        {"criterion": "HS_C (no threshold)", "rate %": 100 * view["hsc"]},
        {"criterion": "CS_C boundary (no threshold)",
         "rate %": None if view["csc_boundary"] is None else 100 * view["csc_boundary"]}])
    layer_rows = []
    for name, df in view["by_layer"].items():
        for r in charts.with_all(df).itertuples():
            layer_rows.append({"criterion": name, "layer": r.layer, "covered": r.covered,
                               "total": r.total, "rate %": 100 * r.rate})
    sections = [
        Section("Coverage at the threshold", f"{view['n_inputs']} test inputs, threshold {t:g}.",
                figures=[charts.coverage_by_layer(view["by_layer"], threshold=t),
                         charts.growth_curves(view["curves"],
                                              threshold=view["grid_threshold"])],
                tables=[("", heads), ("Per layer", pd.DataFrame(layer_rows))]),
        Section("Coverage vs threshold (Figures 7 and 8)",
                figures=[charts.threshold_sweep(sweep, chosen=t)]),
    ]
    if view.get("sections") is not None:
        sections.append(Section("RNN-Test's cell-state sections (CS_C)",
                                tables=[("", view["sections"])]))
    return render(f"Coverage of {facts.get('model', '')}", facts, sections, settings)


def generation(info, outputs: dict | None, pairs: int = 12) -> str:
    """A generation run: its Table 2 row, the per-input norms, the first pairs (adversarial
    first), configuration and summary."""
    facts = {"run": info.run_id, "status": info.status, "model": info.model,
             "method": info.method, "created": info.created}
    if not results.complete(info):
        facts["partial"] = results.partial_note(info)
    sections = [Section("Table 2", tables=[("", results.table2([info]))])]
    if outputs is not None and "x_seed" in outputs:
        rows = results.gallery_order(outputs, only_adversarial=False)[:pairs]
        x_seed = np.asarray(outputs["x_seed"])
        if np.issubdtype(x_seed.dtype, np.floating) and x_seed.ndim == 3 and len(rows):
            sections.append(Section(
                "Seeds and generated inputs (Figure 9)",
                f"The first {len(rows)} pairs, adversarial ones first.",
                figures=[charts.image_triplets(data.to_images(x_seed[rows]),
                                               data.to_images(outputs["x_gen"][rows]),
                                               results.captions(outputs, rows))]))
        sections.append(Section("Per input", tables=[("", results.per_input(outputs))]))
    sections.append(Section("Summary", tables=[("", _key_values(info.summary or {}))]))
    return render(f"Generation run {info.run_id}", facts, sections,
                  settings=flat_settings(info.config))


def retraining(info) -> str:
    """A retraining run: first the held-out result against the control arm (the page's
    headline), then Table 6 and the held-out table per method, the figures, and the run's
    own figures (no file paths)."""
    s = info.summary or {}
    facts = {"run": info.run_id, "status": info.status, "model": info.model,
             "source run": s.get("from_run"), "evaluated on": s.get("evaluated_on"),
             "adversarial inputs added": s.get("n_inputs"),
             "repeats": f"{s.get('repeats_done')} of {s.get('repeats')}",
             "epochs": s.get("epochs")}
    if trained := results.trained_on(s):
        facts["trained on"] = trained
    if not results.complete(info):
        facts["partial"] = results.partial_note(info)
    sections = []
    head = headline(s)
    if head is not None:
        sections.append(Section("Held-out result against the control arm", head[0],
                                tables=[("", head[1])]))
    if s.get("before"):
        transfer = results.transfer_table(s)
        sections += [Section("Table 6", tables=[("Clean metrics (evaluation part of the test "
                                                 "split)", results.table6(s))]
                             + ([("Held-out transfer per method (accuracy on adversarial "
                                  "inputs made against the original model; no model trained "
                                  "on them)", transfer)] if not transfer.empty else [])),
                     Section("Before and after retraining (Figure 13)",
                             figures=[charts.before_after(results.before_after_frame(s))]),
                     Section("Spread over the repeats (Figure 14)",
                             figures=[charts.repeats(results.repeats_frame(s))])]
    brief = {k: v for k, v in s.items() if not isinstance(v, (dict, list))
             and not str(k).endswith(("_model", "_path"))}
    sections.append(Section("The run's figures", tables=[("", _key_values(brief))]))
    return render(f"Retraining run {info.run_id}", facts, sections,
                  settings={k: v for k, v in flat_settings(info.config).items()
                            if not isinstance(v, (list, dict))})


def headline(s: dict) -> tuple[str, pd.DataFrame] | None:
    """The retraining's headline: accuracy on the held-out adversarial inputs of its main
    method, original / retrained / control, and the clean accuracy after minus control; None
    when the run measured no held-out set."""
    t = s.get("transfer") or {}
    if t.get("retrained") is None:
        return None
    rows = [{"model": "original", "held-out accuracy %": 100 * t["original"]},
            {"model": "retrained (mean over repeats)",
             "held-out accuracy %": 100 * t["retrained"]}]
    text = (f"Accuracy on {t.get('n')} held-out {t.get('method')} adversarial inputs, made "
            f"against the original model from evaluation seeds that no retraining saw.")
    if t.get("control") is not None:
        rows.append({"model": "control arm (clean inputs)",
                     "held-out accuracy %": 100 * t["control"]})
        text += (f" Retrained minus control: {100 * (t['retrained'] - t['control']):+.1f} "
                 f"points")
        if s.get("accuracy_after_minus_control") is not None:
            text += (f"; clean accuracy, retrained minus control: "
                     f"{100 * s['accuracy_after_minus_control']:+.2f} points")
        text += "."
    return text, pd.DataFrame(rows)


def for_run(info) -> str:
    if info.kind == "retrain":
        return retraining(info)
    if info.kind == "generate":
        return generation(info, info.load_npz("outputs"))
    return render(f"{info.kind} run {info.run_id}", {"run": info.run_id, "kind": info.kind,
                                                     "status": info.status},
                  [Section("Summary", tables=[("", _key_values(info.summary or {}))])],
                  settings=flat_settings(info.config))


def _key_values(d: dict) -> pd.DataFrame:
    flat = flat_settings(d)
    return pd.DataFrame({"key": list(flat), "value": [_text(v) for v in flat.values()]})


def flat_settings(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in (d or {}).items():
        if isinstance(v, dict):
            out.update(flat_settings(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


# ---------------------------------------------------------------- command line

def coverage_of_model(model: str, dataset: str | None = None, n_inputs: int = 200,
                      threshold: float | None = None, granularity: str = "unit",
                      normalize: str = "step", values: str = "abs") -> str:
    """The Coverage page's report for a model over the first ``n_inputs`` test inputs of a data
    set (default: the model's own), without a server (``rnncon report html --model``)."""
    dataset = dataset or (zoo.ARCHITECTURES[model].dataset if model in zoo.ARCHITECTURES
                          else data.default_dataset("image"))
    ds = data.load_dataset(dataset)
    x = ds.x_test[:n_inputs]
    grid = tuple(round(0.05 * i, 2) for i in range(20))
    tracer = Tracer(zoo.load_model(model))
    crits = {"RConC": ContributionCoverage(tracer, granularity=granularity,
                                           normalize=normalize, values=values,
                                           curve_thresholds=grid),
             "NC": NeuronCoverage(tracer, curve_thresholds=grid),
             "HS_C": HiddenStateCoverage(tracer)}
    try:
        crits["CS_C"] = CellStateCoverage(tracer)
    except UnsupportedModelError:
        crits["CS_C"] = None
    for c in crits.values():
        if c is not None:
            c.update(x)
    t = threshold if threshold is not None else default_threshold(dataset)
    view = results.coverage_view(crits, t, "layer", grid)
    sweep = results.coverage_sweep(crits, grid, "layer")
    facts = {"model": model, "data": f"{dataset}: the first {len(x)} test inputs",
             "data source": ds.source}
    settings = {"threshold": t, "granularity": granularity, "normalize": normalize,
                "values": values, "inputs": len(x)}
    return coverage(view, sweep, facts, settings)
