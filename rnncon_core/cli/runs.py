"""`rnncon runs`: list the runs of the run store; cancel, mark failed, delete; repair the index."""
from __future__ import annotations

import typer

from . import app, emit, log
from ..errors import InputError


@app.command("runs")
def runs_cmd(
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    kind: str = typer.Option("", help="Only runs of this kind (generate, retrain, ...)."),
    limit: int = typer.Option(0, help="At most this many (newest first); 0: all."),
    cancel: str = typer.Option("", "--cancel", help="Ask the running run with this id to stop."),
    mark_failed: str = typer.Option("", "--mark-failed", help="Mark a run stuck as running "
                                                              "failed."),
    delete: str = typer.Option("", "--delete", help="Delete the run with this id (and its "
                                                    "folder)."),
    repair: bool = typer.Option(False, "--repair", help="Rebuild a lost or corrupt index from "
                                                        "the run folders."),
    root: str = typer.Option("", "--runs-dir", "--root", help="Run store directory (default: "
                                                             "RNNCON_RUNS or ./runs)."),
):
    """The runs in the store, newest first: id, kind, status, model, method, summary."""
    from ..runs import RunStore, repair_store
    actions = [a for a in (cancel, mark_failed, delete, repair) if a]
    if len(actions) > 1:
        raise InputError("give one of --cancel, --mark-failed, --delete, --repair at a time")
    if repair:      # before opening the store: its index may be what is broken
        out = repair_store(root or None)
        if json_out:
            emit({"repair": out})
        else:
            log(f"index {out['index']} rebuilt: {out['runs']} runs ({out['recovered']} recovered "
                f"from their folders)" + (f"; the corrupt index was moved to "
                                          f"{out['moved_aside']}" if out["moved_aside"] else ""))
        return
    store = RunStore(root or None)
    if cancel or mark_failed or delete:
        if cancel:
            store.request_cancel(cancel)
            info, what = store.get(cancel), "cancel requested"
        elif mark_failed:
            info, what = store.mark_failed(mark_failed), "marked failed"
        else:
            store.delete(delete)
            info, what = None, "deleted"
        run_id = cancel or mark_failed or delete
        if json_out:
            emit({"run_id": run_id, "action": what.split()[0],
                  "status": info.status if info else "deleted",
                  "cancel_requested": bool(info and info.cancel_requested)})
        else:
            log(f"run {run_id}: {what}")
        return
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
