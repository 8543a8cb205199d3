"""`rnncon report text`: EDA vs gradient-guided synonym substitution on the IMDB models."""
from __future__ import annotations

from typing import Optional

import typer

from .common import (JSON_OPT, ROOT_OPT, RUNS_DIR_OPT, checked, emit, log, names, preflight, report_app,
               store)


@report_app.command("text")
def report_text_cmd(
    seeds: int = typer.Option(100, "--seeds", help="Seeds per model (the first test reviews "
                                                   "each model predicts right)."),
    models: Optional[str] = typer.Option(None, "--models", help="Comma separated (default: the "
                                                                "shipped IMDB models)."),
    max_fraction: float = typer.Option(0.1, "--max-fraction",
                                       help="Most words changed, as a share of the review."),
    max_changes: int = typer.Option(None, "--max-changes", help="Most words changed (count)."),
    out_dir: Optional[str] = typer.Option(None, "--out-dir", help="Default: reports/text."),
    runs_dir: Optional[str] = RUNS_DIR_OPT,
    root: Optional[str] = ROOT_OPT,
    json_out: bool = JSON_OPT,
):
    """Adversarial rate, words changed, RConC and NC before/after, time per input."""
    from ..reports.text import DEFAULT_OUT, build_text
    checked(seeds=seeds, max_fraction=max_fraction, max_changes=max_changes)
    preflight(models=names(models, "--models") or (), folders=[("--out-dir", out_dir)])
    rep = build_text(models=names(models, "--models"), n_seeds=seeds,
                     max_fraction=max_fraction, max_changes=max_changes,
                     out_dir=out_dir or DEFAULT_OUT, store=store(runs_dir, root), log=log)
    if json_out:
        emit(rep)
    else:
        log(f"wrote {', '.join(rep['files'])}")
