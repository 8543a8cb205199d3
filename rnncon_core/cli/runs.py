"""`rnncon runs`: list (or cancel) the runs of the run store."""
from __future__ import annotations

import typer

from . import app, emit, log


@app.command("runs")
def runs_cmd(
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    kind: str = typer.Option("", help="Only runs of this kind (generate, retrain, ...)."),
    limit: int = typer.Option(0, help="At most this many (newest first); 0: all."),
    cancel: str = typer.Option("", "--cancel", help="Ask the running run with this id to stop."),
    root: str = typer.Option("", "--root", help="Run store directory (default: RNNCON_RUNS or "
                                                "./runs)."),
):
    """The runs in the store, newest first: id, kind, status, model, method, summary."""
    from ..runs import RunStore
    store = RunStore(root or None)
    if cancel:
        store.request_cancel(cancel)
        log(f"cancel requested for {cancel}")
    runs = [r.to_dict() for r in store.list(kind=kind or None, limit=limit or None)]
    if json_out:
        emit({"runs": runs})
        return
    from rich.console import Console
    from rich.table import Table
    table = Table(title=f"runs in {store.root}")
    for col in ["run_id", "kind", "status", "model", "method", "created", "summary"]:
        table.add_column(col)
    for r in runs:
        s = r["summary"] or {}
        brief = ", ".join(f"{k}={s[k]:.3g}" if isinstance(s[k], float) else f"{k}={s[k]}"
                          for k in ("n_seeds", "n_adversarial", "adv_rate", "avg_l2", "accuracy")
                          if k in s)
        table.add_row(r["run_id"], r["kind"], r["status"], str(r["model"] or ""),
                      str(r["method"] or ""), r["created"], brief)
    Console(width=200).print(table)
