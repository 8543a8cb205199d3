"""`rnncon report text`: EDA vs gradient-guided synonym substitution on the IMDB models.

For each shipped IMDB model and each method, one stored generation run on the same seeds (the
first N test reviews the model predicts right), then: adversarial rate, words changed (mean
count and mean share of the review), RConC and NC (threshold 0.5, the paper's for IMDB) of the
seeds before and after adding the generated reviews, and seconds per input.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..paths import REPO_ROOT, ensure_dir
from .generators import IMDB_THRESHOLD

METHODS = ("eda", "synonym-gradient")
IMDB_MODELS = ("imdb-lstm", "imdb-gru", "stacked-imdb-lstm", "stacked-imdb-gru")
DEFAULT_OUT = REPO_ROOT / "reports" / "text"


def _coverage_before_after(model, x_seed, x_gen, criterion: str) -> tuple[float, float]:
    from ..coverage import get_criterion
    cov = get_criterion(criterion, model, threshold=IMDB_THRESHOLD)
    cov.update(x_seed)
    before = cov.rate()
    cov.update(x_gen)
    return before, cov.rate()


def _mean(v) -> float | None:
    return float(np.mean(v)) if len(v) else None


def method_row(model_name: str, keras_model, out: dict) -> dict:
    """The report's figures for one stored run (``out``: what run_generation returned)."""
    with np.load(out["outputs"]) as f:
        a = {k: f[k] for k in f.files}
    adv = a["adversarial"].astype(bool)
    share = a["words_changed"] / np.maximum(a["n_words"], 1)
    rconc = _coverage_before_after(keras_model, a["x_seed"], a["x_gen"], "rconc")
    nc = _coverage_before_after(keras_model, a["x_seed"], a["x_gen"], "nc")
    n = len(adv)
    return {"model": model_name, "method": out["method"], "run_id": out["run_id"],
            "n_seeds": n, "n_adversarial": int(adv.sum()), "adv_rate": float(adv.mean()),
            "avg_words_changed": _mean(a["words_changed"]),
            "avg_words_changed_adv": _mean(a["words_changed"][adv]),
            "avg_share_changed": _mean(share), "avg_share_changed_adv": _mean(share[adv]),
            "avg_review_words": _mean(a["n_words"]),
            "rconc_before": rconc[0], "rconc_after": rconc[1],
            "nc_before": nc[0], "nc_after": nc[1],
            "seconds": out["seconds"], "seconds_per_input": out["seconds"] / n if n else None}


def text_report(models=None, n_seeds: int = 100, max_fraction: float = 0.1,
                max_changes: int | None = None, out_dir=DEFAULT_OUT, store=None,
                log=lambda msg: None) -> dict:
    """Run both methods on each model, write ``text_report.json`` and ``text_report.md``."""
    from ..generate import run_generation
    from ..runs import RunStore
    from ..zoo import load_model, shipped_models
    shipped = set(shipped_models())
    models = list(models) if models else [m for m in IMDB_MODELS if m in shipped]
    if not models:
        raise InputError("no IMDB model is shipped yet: train one with `rnncon train imdb-lstm` "
                         "(or give --models with .keras paths)")
    store = store if store is not None else RunStore()
    rows, examples = [], {}
    started = time.time()
    for name in models:
        keras_model = load_model(name)
        for method in METHODS:
            log(f"[{name}] {method}: {n_seeds} seeds")
            out = run_generation(name, method, n_seeds, store=store, dataset="imdb",
                                 max_fraction=max_fraction, max_changes=max_changes,
                                 progress=lambda d, t, m=method: log(f"  {m} {d}/{t}"))
            row = method_row(name, keras_model, out)
            rows.append(row)
            examples[f"{name}/{method}"] = _example(out["outputs"])
            log(f"  adversarial {100 * row['adv_rate']:.1f} %, words changed "
                f"{row['avg_words_changed']:.2f} ({100 * row['avg_share_changed']:.2f} %), "
                f"{row['seconds_per_input']:.2f} s/input")
    report = {"n_seeds": n_seeds, "max_fraction": max_fraction, "max_changes": max_changes,
              "threshold": IMDB_THRESHOLD, "rows": rows, "targets": _targets(rows),
              "examples": examples, "seconds": round(time.time() - started, 1)}
    out_dir = ensure_dir(Path(out_dir))
    (out_dir / "text_report.json").write_text(json.dumps(report, indent=2))
    (out_dir / "text_report.md").write_text(_markdown(report))
    report["files"] = [str(out_dir / "text_report.json"), str(out_dir / "text_report.md")]
    return report


def _targets(rows: list[dict]) -> list[dict]:
    """Per model: does synonym-gradient beat EDA's adversarial rate at no more words changed,
    with at most 10 % of a review's words changed on average?"""
    out = []
    for name in dict.fromkeys(r["model"] for r in rows):
        by = {r["method"]: r for r in rows if r["model"] == name}
        if set(by) != set(METHODS):
            continue
        g, e = by["synonym-gradient"], by["eda"]
        out.append({"model": name,
                    "higher_adv_rate": g["adv_rate"] > e["adv_rate"],
                    "no_more_words_changed": g["avg_words_changed"] <= e["avg_words_changed"],
                    "at_most_10_percent": g["avg_share_changed"] <= 0.10,
                    "met": (g["adv_rate"] > e["adv_rate"]
                            and g["avg_words_changed"] <= e["avg_words_changed"]
                            and g["avg_share_changed"] <= 0.10)})
    return out


def _example(outputs: str) -> dict | None:
    """The first adversarial review of a run, as the display helper's side-by-side data."""
    from .display import ids_side_by_side
    from .eda import Lexicon
    from .generators import load_vocabulary
    with np.load(outputs) as f:
        adv = np.flatnonzero(f["adversarial"])
        if not len(adv):
            return None
        i = int(adv[0])
        xs, xg = f["x_seed"][i], f["x_gen"][i]
        seed_index = int(f["seed_index"][i])
    lex = Lexicon(load_vocabulary())
    return {"seed_index": seed_index, **ids_side_by_side(lex, xs, xg)}


def _marked(items: list[dict]) -> str:
    mark = {"replaced": "**{}**", "inserted": "**+{}**", "deleted": "~~{}~~", "same": "{}"}
    return " ".join(mark[it["status"]].format(it["word"]) for it in items)


def _markdown(rep: dict) -> str:
    pct = lambda v: "-" if v is None else f"{100 * v:.1f} %"   # noqa: E731
    num = lambda v, d=2: "-" if v is None else f"{v:.{d}f}"    # noqa: E731
    lines = ["# Text generation on the IMDB models: EDA vs gradient-guided synonym substitution",
             "",
             f"Measured by `rnncon report text` ({rep['n_seeds']} seeds per model: the first "
             f"test reviews each model predicts right; word budget "
             f"{100 * rep['max_fraction']:.0f} % of a review"
             + (f", at most {rep['max_changes']} words" if rep["max_changes"] else "")
             + f"; RConC and NC at threshold {rep['threshold']}, unit granularity, before and "
               f"after adding the generated reviews to the seeds). Total time "
               f"{rep['seconds']:.0f} s on 2 CPU cores.", "",
             "| model | method | adversarial | words changed (all / adv.) | share changed | "
             "RConC before → after | NC before → after | s / input |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rep["rows"]:
        lines.append(
            f"| {r['model']} | {r['method']} | {r['n_adversarial']}/{r['n_seeds']} "
            f"({pct(r['adv_rate'])}) | {num(r['avg_words_changed'])} / "
            f"{num(r['avg_words_changed_adv'])} | {pct(r['avg_share_changed'])} | "
            f"{pct(r['rconc_before'])} → {pct(r['rconc_after'])} | {pct(r['nc_before'])} → "
            f"{pct(r['nc_after'])} | {num(r['seconds_per_input'])} |")
    lines += ["", "## Target: synonym-gradient beats EDA's adversarial rate at no more words "
                  "changed, ≤ 10 % of a review's words", ""]
    for t in rep["targets"]:
        lines.append(f"- {t['model']}: {'met' if t['met'] else 'NOT met'} (higher rate: "
                     f"{t['higher_adv_rate']}, no more words: {t['no_more_words_changed']}, "
                     f"≤ 10 %: {t['at_most_10_percent']})")
    lines += ["", "## One adversarial review per run (changed words in bold, deleted struck)", ""]
    for key, ex in rep["examples"].items():
        if ex is None:
            lines.append(f"- {key}: no adversarial review")
            continue
        lines += [f"### {key} (test review {ex['seed_index']}, {ex['words_changed']} of "
                  f"{ex['n_words']} words changed)", "",
                  "Seed: " + _marked(ex["seed"]), "", "Generated: " + _marked(ex["generated"]),
                  ""]
    return "\n".join(lines) + "\n"
