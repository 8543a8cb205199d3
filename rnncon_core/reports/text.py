"""`rnncon report text`: EDA vs gradient-guided synonym substitution on the IMDB models, and
whether a reader would still give the generated reviews their seed's label.

For each shipped IMDB model, five stored generation runs on the same seeds (the first N test
reviews the model predicts right): EDA as the EDA paper has it, EDA with the reader
constraints, synonym substitution without them (as the generator first did), with them, and with them
but more substitutes (no sense floor, a corpus cosine of at least 0.3: ``MORE_SUBSTITUTES``).
Per run: the *valid adversarial rate* (adversarial, and every edit passed the checks of
:func:`rnncon_core.text.lexical.check_edits`), the adversarial rate, the share of edits passing
each check, the share of substitutions passing the antonym, polarity and number checks
together, words changed (mean count and share of the review), RConC and NC (threshold 0.5, the
paper's for IMDB) of the seeds before and after adding the generated reviews, seconds per
input; and 10 random generated reviews per run, each edit shown in its context with the
checks it failed.
"""
from __future__ import annotations

import time

import numpy as np

from .. import jobs
from ..coverage import get_criterion
from ..data import default_dataset
from ..errors import InputError
from ..paths import REPO_ROOT
from ..runs import RunStore
from ..text.eda import Lexicon
from ..text.generators import IMDB_THRESHOLD, load_vocabulary
from ..text.lexical import CHECKS, check_edits
from ..zoo import load_model, shipped_models
from .writer import write_files

# (method, constraints, further generator parameters); the last trades readable substitutes
# for more of them: no sense-similarity floor, but a cosine of at least 0.3 in word vectors of
# the training reviews (text/vectors.py)
MORE_SUBSTITUTES = (("min_similarity", 0.0), ("min_cosine", 0.3))
VARIANTS = (("eda", "none", ()), ("eda", "reader", ()), ("synonym-gradient", "none", ()),
            ("synonym-gradient", "reader", ()), ("synonym-gradient", "reader", MORE_SUBSTITUTES))
LABELS = {("eda", "none", ()): "EDA (paper)", ("eda", "reader", ()): "EDA, reader constraints",
          ("synonym-gradient", "none", ()): "synonym-gradient, unconstrained",
          ("synonym-gradient", "reader", ()): "synonym-gradient, reader constraints",
          ("synonym-gradient", "reader", MORE_SUBSTITUTES):
              "synonym-gradient, reader constraints, more substitutes (no sense floor, corpus "
              "cosine ≥ 0.3)"}
METHODS = ("eda", "synonym-gradient")
IMDB_MODELS = ("imdb-lstm", "imdb-gru", "stacked-imdb-lstm", "stacked-imdb-gru")
DEFAULT_OUT = REPO_ROOT / "reports" / "text"
N_EXAMPLES = 10
SAFE = ("antonym", "polarity", "number")     # the checks of the 97 % target


def _coverage_before_after(model, x_seed, x_gen, criterion: str) -> tuple[float, float]:
    cov = get_criterion(criterion, model, threshold=IMDB_THRESHOLD)
    cov.update(x_seed)
    before = cov.rate()
    cov.update(x_gen)
    return before, cov.rate()


def _mean(v) -> float | None:
    return float(np.mean(v)) if len(v) else None


def method_row(model_name: str, keras_model, out: dict, lexicon=None) -> dict:
    """The report's figures for one stored run (``out``: what run_generation returned)."""
    with np.load(out["outputs"]) as f:
        a = {k: f[k] for k in f.files}
    adv = a["adversarial"].astype(bool)
    valid = np.zeros(len(adv), bool)      # re-checked here: one checker for every run
    share = a["words_changed"] / np.maximum(a["n_words"], 1)
    rconc = _coverage_before_after(keras_model, a["x_seed"], a["x_gen"], "rconc")
    nc = _coverage_before_after(keras_model, a["x_seed"], a["x_gen"], "nc")
    passed = {c: [0, 0] for c in CHECKS}
    lex = lexicon or _lexicon()
    subs = safe = 0
    kinds = {"substitution": 0, "insertion": 0, "deletion": 0}
    safe_review = np.zeros(len(adv), bool)
    for n, (xs, xg) in enumerate(zip(a["x_seed"], a["x_gen"])):
        res = check_edits(lex.words_of(xs)[0], lex.words_of(xg)[0])
        valid[n] = res["valid"]
        for c, (k, t) in res["passed"].items():
            passed[c][0] += k
            passed[c][1] += t
        ok = True
        for e in res["edits"]:
            kinds[e["kind"]] += 1
            if e["kind"] == "substitution":
                subs += 1
                safe += not set(e["failed"]) & set(SAFE)
            ok &= not set(e["failed"]) & set(SAFE)
        safe_review[n] = ok
    checks = {c: (k / t if t else None) for c, (k, t) in passed.items()}
    n = len(adv)
    method, constraints = out["method"], out.get("constraints", "reader")
    params = tuple(out.get("variant_params", ()))
    return {"model": model_name, "method": method, "constraints": constraints,
            "params": dict(params), "label": LABELS.get((method, constraints, params), method),
            "run_id": out["run_id"],
            "n_seeds": n, "n_adversarial": int(adv.sum()), "adv_rate": float(adv.mean()),
            "n_valid_adversarial": int((adv & valid).sum()),
            "valid_adv_rate": float((adv & valid).mean()), "checks": checks,
            "edits": kinds, "n_substitutions": subs,
            "substitutions_safe": safe / subs if subs else None,
            "n_substitutions_rejected": subs - safe,
            "n_adversarial_safe": int((adv & safe_review).sum()),
            "avg_words_changed": _mean(a["words_changed"]),
            "avg_words_changed_adv": _mean(a["words_changed"][adv]),
            "avg_share_changed": _mean(share), "avg_share_changed_adv": _mean(share[adv]),
            "avg_review_words": _mean(a["n_words"]),
            "rconc_before": rconc[0], "rconc_after": rconc[1],
            "nc_before": nc[0], "nc_after": nc[1],
            "seconds": out["seconds"], "seconds_per_input": out["seconds"] / n if n else None}


def _lexicon():
    return Lexicon(load_vocabulary(), table={})


def build_text(models=None, n_seeds: int = 100, max_fraction: float = 0.1,
               max_changes: int | None = None, out_dir=DEFAULT_OUT, store=None,
               variants=VARIANTS, reuse: bool = False, log=lambda msg: None) -> dict:
    """Run every variant on each model, write ``text_report.json`` and ``text_report.md``.

    ``reuse``: take a finished stored run of the same model, method and settings (seeds,
    constraints, word budget) instead of generating again (the figures are recomputed from
    its outputs)."""
    shipped = set(shipped_models())
    models = list(models) if models else [m for m in IMDB_MODELS if m in shipped]
    if not models:
        raise InputError("no IMDB model is shipped yet: train one with `rnncon train imdb-lstm` "
                         "(or give --models with .keras paths)")
    store = store if store is not None else RunStore()
    lex = _lexicon()
    rows, examples = [], {}
    started = time.time()
    for name in models:
        keras_model = load_model(name)
        for method, constraints, params in variants:
            out = _stored_run(store, name, method, constraints, n_seeds, max_fraction,
                              max_changes, dict(params)) if reuse else None
            if out is not None:
                log(f"[{name}] {method} ({constraints}): stored run {out['run_id']}")
            else:
                log(f"[{name}] {method} ({constraints}): {n_seeds} seeds")
                out = jobs.run_generation(name, method, n_seeds, store=store,
                                          dataset=default_dataset("text"),
                                          max_fraction=max_fraction, max_changes=max_changes,
                                          constraints=constraints, **dict(params),
                                          progress=lambda d, t, m=method: log(f"  {m} {d}/{t}"))
            out["constraints"], out["variant_params"] = constraints, params
            row = method_row(name, keras_model, out, lex)
            rows.append(row)
            examples[f"{name}/{row['label']}"] = _examples(out["outputs"], lex)
            log(f"  valid adversarial {100 * row['valid_adv_rate']:.1f} %, adversarial "
                f"{100 * row['adv_rate']:.1f} %, words changed {row['avg_words_changed']:.2f} "
                f"({100 * row['avg_share_changed']:.2f} %), "
                f"{row['seconds_per_input']:.2f} s/input")
    report = {"n_seeds": n_seeds, "max_fraction": max_fraction, "max_changes": max_changes,
              "threshold": IMDB_THRESHOLD, "rows": rows, "targets": _targets(rows),
              "examples": examples, "seconds": round(time.time() - started, 1)}
    report["files"] = write_files(out_dir, {"text_report.json": report,
                                            "text_report.md": _markdown(report)}, report="text")
    return report


def _stored_run(store, model, method, constraints, n_seeds, max_fraction, max_changes,
                params: dict):
    """The finished run this request makes (jobs.find_generation), as run_generation's answer,
    or None."""
    info = jobs.find_generation(store, model, method, n_seeds, dataset=default_dataset("text"),
                                max_fraction=max_fraction, max_changes=max_changes,
                                constraints=constraints, **params)
    if info is None or not (info.path / "outputs.npz").exists():
        return None
    return {**(info.summary or {}), "run_id": info.run_id, "method": method,
            "outputs": str(info.path / "outputs.npz")}


def _targets(rows: list[dict]) -> list[dict]:
    """Per model, for synonym-gradient with the reader constraints: valid
    adversarial rate >= 70 % with <= 10 % of the words changed, and >= 97 % of the
    substitutions passing the antonym, polarity and number checks."""
    out = []
    for r in rows:
        if (r["method"], r["constraints"]) != ("synonym-gradient", "reader"):
            continue
        safe = r["substitutions_safe"]
        t = {"model": r["model"], "label": r["label"],
             "valid_adv_rate_70": r["valid_adv_rate"] >= 0.70,
             "at_most_10_percent": (r["avg_share_changed"] or 0) <= 0.10,
             "substitutions_safe_97": safe is None or safe >= 0.97}
        t["met"] = all(t[k] for k in ("valid_adv_rate_70", "at_most_10_percent",
                                      "substitutions_safe_97"))
        out.append(t)
    return out


def _examples(outputs: str, lex, k: int = N_EXAMPLES, context: int = 5) -> list[dict]:
    """``k`` random generated reviews of a run (a fixed draw), each edit in its context."""
    with np.load(outputs) as f:
        a = {key: f[key] for key in ("x_seed", "x_gen", "adversarial", "seed_index")}
    rng = np.random.default_rng(0)
    pick = np.sort(rng.choice(len(a["x_seed"]), size=min(k, len(a["x_seed"])), replace=False))
    out = []
    for i in pick.tolist():
        seed, gen = lex.words_of(a["x_seed"][i])[0], lex.words_of(a["x_gen"][i])[0]
        res = check_edits(seed, gen)
        snippets = []
        for e in res["edits"]:
            if e["kind"] == "insertion":
                continue                      # shown within the edits around them
            p = e["position"]
            left = " ".join(seed[max(0, p - context):p])
            right = " ".join(seed[p + 1:p + 1 + context])
            change = (f"{e['old']} → {e['new']}" if e["kind"] == "substitution"
                      else f"~~{e['old']}~~")
            snippets.append({"text": f"… {left} [{change}] {right} …", "failed": e["failed"]})
        inserted = [e for e in res["edits"] if e["kind"] == "insertion"]
        out.append({"seed_index": int(a["seed_index"][i]),
                    "adversarial": bool(a["adversarial"][i]), "valid": res["valid"],
                    "edits": snippets,
                    "inserted": [{"word": e["new"], "failed": e["failed"]} for e in inserted]})
    return out


def _markdown(rep: dict) -> str:
    pct = lambda v: "-" if v is None else f"{100 * v:.1f} %"   # noqa: E731
    num = lambda v, d=2: "-" if v is None else f"{v:.{d}f}"    # noqa: E731
    lines = ["# Text generation on the IMDB models: would a reader still give the label?", "",
             f"Measured by `rnncon report text` ({rep['n_seeds']} seeds per model: the first "
             f"test reviews each model predicts right; word budget "
             f"{100 * rep['max_fraction']:.0f} % of a review"
             + (f", at most {rep['max_changes']} words" if rep["max_changes"] else "")
             + f"; RConC and NC at threshold {rep['threshold']}, unit granularity, before and "
               f"after adding the generated reviews to the seeds). Total time "
               f"{rep['seconds']:.0f} s on 2 shared CPU cores.", "",
             "**Valid adversarial** = the model's prediction flipped *and* every edit passed "
             "the automatic checks (substitutions: no WordNet antonym, same VADER polarity, no "
             "number, same part of speech when the generated review is re-tagged, the seed "
             "word's inflection; inserted or deleted words: neutral and no number). "
             "\"Adv., 3 checks\": adversarial with no edit failing the antonym, polarity or number "
             "check (the automatic check of the text generators' target). \"Subst. safe\": share of "
             "substitutions passing those three checks together. **Words changed** = the word "
             "positions that differ after an optimal alignment of the seed and the generated "
             "review (the word-level Levenshtein distance: each substituted, inserted or "
             "deleted word counts 1; `rnncon_core.textdiff.words_changed`); share changed = "
             "that count over the seed's words.", "",
             "| model | method | valid adversarial | adversarial | adv., 3 checks | "
             "subst. safe | antonym | polarity | number | POS | inflection | words changed | "
             "share changed | RConC before → after | NC before → after | s / input |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rep["rows"]:
        c = r["checks"]
        lines.append(
            f"| {r['model']} | {r['label']} | **{r['n_valid_adversarial']}/{r['n_seeds']} "
            f"({pct(r['valid_adv_rate'])})** | {r['n_adversarial']}/{r['n_seeds']} "
            f"({pct(r['adv_rate'])}) | {r['n_adversarial_safe']}/{r['n_seeds']} | "
            f"{pct(r['substitutions_safe'])} ({r['n_substitutions_rejected']} of "
            f"{r['n_substitutions']} rejected) | "
            + " | ".join(pct(c.get(k)) for k in ("antonym", "polarity", "number", "pos",
                                                  "inflection"))
            + f" | {num(r['avg_words_changed'])} | {pct(r['avg_share_changed'])} | "
            f"{pct(r['rconc_before'])} → {pct(r['rconc_after'])} | {pct(r['nc_before'])} → "
            f"{pct(r['nc_after'])} | {num(r['seconds_per_input'])} |")
    lines += ["", "## Target: synonym-gradient with the reader constraints reaches "
                  "a valid adversarial rate ≥ 70 % with ≤ 10 % of the words changed, and ≥ 97 % "
                  "of its substitutions pass the antonym, polarity and number checks", ""]
    for t in rep["targets"]:
        lines.append(f"- {t['model']}, {t.get('label', 'synonym-gradient')}: "
                     f"{'met' if t['met'] else 'NOT met'} (valid adversarial "
                     f"≥ 70 %: {t['valid_adv_rate_70']}, ≤ 10 % changed: "
                     f"{t['at_most_10_percent']}, substitutions safe ≥ 97 %: "
                     f"{t['substitutions_safe_97']})")
    lines += ["", f"## {N_EXAMPLES} random generated reviews per run, for a reader to judge", "",
              "Each edit in its context (five words either side, from the seed); ✗ marks the "
              "checks it failed. `adv` = the prediction flipped.", ""]
    for key, exs in rep["examples"].items():
        model, label = key.rsplit("/", 1)
        lines += [f"### {model}: {label}", ""]
        for ex in exs:
            head = (f"- test review {ex['seed_index']} ({'adv' if ex['adversarial'] else 'not adv'}"
                    f", {'valid' if ex['valid'] else 'INVALID'}):")
            parts = [s["text"] + (f" ✗ {', '.join(s['failed'])}" if s["failed"] else "")
                     for s in ex["edits"]]
            if ex["inserted"]:
                parts.append("inserted: " + ", ".join(
                    i["word"] + (f" ✗ {', '.join(i['failed'])}" if i["failed"] else "")
                    for i in ex["inserted"]))
            lines.append(head + ("" if parts else " no edit"))
            lines += [f"    - {p}" for p in parts]
        lines.append("")
    return "\n".join(lines) + "\n"
