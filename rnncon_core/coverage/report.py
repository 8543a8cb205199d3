"""`rnncon report coverage`: Figures 6, 7/8 and 12 on the shipped models, as CSV + markdown."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from . import REPORT_THRESHOLDS, ContributionCoverage, NeuronCoverage
from ..paths import ensure_dir

# The paper's Figure 7 (MNIST-LSTM), quoted in its text (§5.3); shown beside ours, never as ours.
PAPER_FIGURE7 = {"mnist-lstm": {"threshold": 0.25,
                                "nc": {"input": 99.22, "lstm_1": 53.78, "dense_32": 90.00},
                                "rconc": {"input": 83.25, "lstm_1": 96.88, "dense_32": 90.0}}}


def _paper_threshold(dataset: str) -> float:
    return 0.25 if dataset == "mnist" else 0.5          # §5: MNIST 0.25, IMDB 0.5


def _layer_table(name: str, rconc: ContributionCoverage, nc: NeuronCoverage) -> pd.DataFrame:
    """Figure 7/8 rows: per source layer (input, each recurrent, each Dense but the output) and
    "All" (every layer except the output layer), RConC and NC at each report threshold."""
    out_layer = rconc.tracer.specs[-1].name
    rows = []
    for t in REPORT_THRESHOLDS:
        rc = rconc.by_layer(t, by="source").set_index("layer")
        ncl = nc.by_layer(t).set_index("layer")
        layers = [l for l in ncl.index if l != out_layer]
        for layer in layers + ["All"]:
            if layer == "All":
                r_cov, r_tot = rc["covered"].sum(), rc["total"].sum()
                n_cov, n_tot = ncl.loc[layers, "covered"].sum(), ncl.loc[layers, "total"].sum()
            else:
                r_cov, r_tot = (rc.loc[layer, "covered"], rc.loc[layer, "total"]) \
                    if layer in rc.index else (0, 0)
                n_cov, n_tot = ncl.loc[layer, "covered"], ncl.loc[layer, "total"]
            rows.append({"model": name, "threshold": t, "layer": layer,
                         "rconc_total": int(r_tot), "rconc_covered": int(r_cov),
                         "rconc_pct": 100 * r_cov / r_tot if r_tot else float("nan"),
                         "nc_total": int(n_tot), "nc_covered": int(n_cov),
                         "nc_pct": 100 * n_cov / n_tot if n_tot else float("nan")})
    return pd.DataFrame(rows)


def _gate_table(name: str, rconc: ContributionCoverage) -> pd.DataFrame:
    frames = []
    for spec in rconc.tracer.specs:
        if spec.kind == "dense":
            continue
        df = rconc.by_gate_step(spec.name)
        long = df.reset_index(names="gate_part").melt(id_vars="gate_part", var_name="step",
                                                      value_name="rate")
        long.insert(0, "layer", spec.name)
        long.insert(0, "model", name)
        frames.append(long)
    return pd.concat(frames, ignore_index=True)


def write_report(out: Path, names: list[str] | None = None, n_mnist: int = 0, n_imdb: int = 1000,
                 progress: Callable[[str], None] = lambda m: None) -> dict:
    from ..data import load_dataset
    from ..zoo import ARCHITECTURES, load_model, shipped_models

    out = ensure_dir(Path(out))
    shipped = [n for n in shipped_models() if n in ARCHITECTURES]
    wanted = names or list(ARCHITECTURES)
    done, skipped = [], []
    layers, curves, gates, notes = [], [], [], []
    datasets: dict = {}
    for name in wanted:
        if name not in ARCHITECTURES:
            skipped.append((name, "not a Table 1 architecture"))
            continue
        if name not in shipped:
            skipped.append((name, "model not shipped in assets/models yet"))
            continue
        arch = ARCHITECTURES[name]
        if arch.dataset not in datasets:
            datasets[arch.dataset] = load_dataset(arch.dataset)
        ds = datasets[arch.dataset]
        n = n_mnist if arch.dataset == "mnist" else n_imdb
        x = ds.x_test[:n] if n else ds.x_test
        t = _paper_threshold(arch.dataset)
        started = time.time()
        model = load_model(name)
        rconc = ContributionCoverage(model, threshold=t, granularity="unit")
        nc = NeuronCoverage(rconc.tracer, threshold=t, include_input=True)
        rconc.update(x)
        nc.update(x)
        seconds = time.time() - started
        progress(f"[report] {name}: {len(x):,} test inputs in {seconds:.1f}s; RConC "
                 f"{100 * rconc.rate():.2f} %, NC {100 * nc.rate():.2f} % at {t}")
        layers.append(_layer_table(name, rconc, nc))
        curves.append(pd.DataFrame({"model": name, "threshold": t,
                                    "n_inputs": np.arange(1, len(x) + 1),
                                    "rconc_pct": 100 * rconc.curve(t), "nc_pct": 100 * nc.curve(t)}))
        gates.append(_gate_table(name, rconc))
        notes.append({"model": name, "inputs": len(x), "source": ds.source, "threshold": t,
                      "seconds": round(seconds, 1)})
        done.append(name)
    files = []
    if done:
        for fname, frames in (("layers.csv", layers), ("curves.csv", curves),
                              ("gates.csv", gates)):
            pd.concat(frames, ignore_index=True).to_csv(out / fname, index=False,
                                                        float_format="%.4f")
            files.append(str(out / fname))
    summary = _markdown(pd.concat(layers) if layers else None, notes, skipped,
                        pd.concat(curves) if curves else None)
    (out / "summary.md").write_text(summary)
    files.append(str(out / "summary.md"))
    return {"models": done, "skipped": [{"model": m, "why": w} for m, w in skipped],
            "files": files, "runs": notes}


def _markdown(layers, notes, skipped, curves) -> str:
    lines = ["# Coverage report (RConC vs NC)", "",
             "Generated by `rnncon report coverage` from the shipped models in `assets/models`. "
             "RConC is unit granularity, normalized over the model (Eq. 3); rows group the "
             "contributions by the layer whose neurons emit them (the paper's Figure 7 layout: "
             "\"input\" = x^t times the first recurrent layer's kernel). NC (DeepXplore) scales each "
             "layer's outputs per input; its input row holds the pixels (or embedding vectors). "
             "\"All\" = every layer except the output layer. Conventions: docs/coverage.md.", ""]
    if notes:
        lines += ["| model | test inputs | threshold | seconds (RConC + NC) |", "|---|---|---|---|"]
        lines += [f"| {r['model']} | {r['inputs']:,} | {r['threshold']} | {r['seconds']} |"
                  for r in notes]
        lines += ["", f"Data: {notes[0]['source']}", ""]
    if layers is not None:
        for model, df in layers.groupby("model", sort=False):
            lines += [f"## {model}: coverage per layer (%), RConC / NC", ""]
            piv_r = df.pivot(index="layer", columns="threshold", values="rconc_pct")
            piv_n = df.pivot(index="layer", columns="threshold", values="nc_pct")
            order = list(dict.fromkeys(df["layer"]))
            lines.append("| layer | " + " | ".join(f"θ={t}" for t in piv_r.columns) + " |")
            lines.append("|---|" + "---|" * len(piv_r.columns))
            for layer in order:
                cells = [f"{piv_r.loc[layer, t]:.2f} / {piv_n.loc[layer, t]:.2f}"
                         for t in piv_r.columns]
                lines.append(f"| {layer} | " + " | ".join(cells) + " |")
            paper = PAPER_FIGURE7.get(model)
            if paper:
                t = paper["threshold"]
                lines += ["", f"Beside the paper's Figure 7 (the paper's numbers, quoted from its "
                              f"text, θ = {t}; ours measured here):", "",
                          "| layer | RConC ours | RConC paper | NC ours | NC paper |",
                          "|---|---|---|---|---|"]
                for layer in paper["nc"]:
                    lines.append(f"| {layer} | {piv_r.loc[layer, t]:.2f} | {paper['rconc'][layer]:.2f}"
                                 f" | {piv_n.loc[layer, t]:.2f} | {paper['nc'][layer]:.2f} |")
            if curves is not None:
                c = curves[curves["model"] == model]
                marks = [m for m in (1, 10, 100, 1000, len(c)) if m <= len(c)]
                lines += ["", "Growth (Figure 6): " + "; ".join(
                    f"{m} inputs: RConC {c['rconc_pct'].iloc[m - 1]:.2f} %, NC "
                    f"{c['nc_pct'].iloc[m - 1]:.2f} %" for m in dict.fromkeys(marks))]
            lines.append("")
    if skipped:
        lines += ["## Not in this report", ""]
        lines += [f"- {m}: {w}" for m, w in skipped]
        lines.append("")
    lines += ["Files: `layers.csv` (Figures 7/8), `curves.csv` (Figure 6), `gates.csv` "
              "(Figure 12: per gate part and step, share of covered unit contributions over the "
              "test inputs).", ""]
    return "\n".join(lines)
