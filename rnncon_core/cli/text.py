"""`rnncon report text`: EDA vs gradient-guided synonym substitution on the IMDB models."""
from __future__ import annotations

import typer

from . import emit, log, report_app


@report_app.command("text")
def report_text_cmd(
    seeds: int = typer.Option(100, "--seeds", help="Seeds per model (the first test reviews "
                                                   "each model predicts right)."),
    models: str = typer.Option("", "--models", help="Comma separated (default: the shipped "
                                                    "IMDB models)."),
    max_fraction: float = typer.Option(0.1, "--max-fraction",
                                       help="Most words changed, as a share of the review."),
    max_changes: int = typer.Option(None, "--max-changes", help="Most words changed (count)."),
    out_dir: str = typer.Option("", "--out-dir", help="Default: reports/text."),
    runs_dir: str = typer.Option("", "--runs-dir", help="Run store (default: RNNCON_RUNS or "
                                                        "runs/)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
):
    """Adversarial rate, words changed, RConC and NC before/after, time per input."""
    from ..runs import RunStore
    from ..reports.text import DEFAULT_OUT, build_text
    rep = build_text(models=[m.strip() for m in models.split(",") if m.strip()] or None,
                     n_seeds=seeds, max_fraction=max_fraction, max_changes=max_changes,
                     out_dir=out_dir or DEFAULT_OUT, store=RunStore(runs_dir or None), log=log)
    if json_out:
        emit(rep)
    else:
        log(f"wrote {', '.join(rep['files'])}")
