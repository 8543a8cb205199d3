"""`rnncon runs`: list the runs of the run store; cancel, mark failed, delete; repair the index."""
from __future__ import annotations

from typing import Optional

import typer

from ..errors import InputError, did_you_mean
from .common import JSON_OPT, ROOT_OPT, RUNS_DIR_OPT, app, checked, emit, log, renamed


@app.command("runs")
def runs_cmd(
    json_out: bool = JSON_OPT,
    kind: Optional[str] = typer.Option(None, help="Only runs of this kind (generate, retrain, "
                                                  "...)."),
    limit: Optional[int] = typer.Option(None, help="At most this many (newest first; default: "
                                                   "all)."),
    cancel: Optional[str] = typer.Option(None, "--cancel", help="Ask the running run with this "
                                                                "id to stop."),
    mark_failed: Optional[str] = typer.Option(None, "--mark-failed", help="Mark a run stuck as "
                                                                          "running failed."),
    delete: Optional[str] = typer.Option(None, "--delete", help="Delete the run with this id "
                                                                "(and its folder)."),
    repair: bool = typer.Option(False, "--repair", help="Rebuild a lost or corrupt index from "
                                                        "the run folders."),
    force: bool = typer.Option(False, "--force", help="With --mark-failed / --delete: a run "
                                                      "shown running whose process cannot be "
                                                      "checked from here (another host) and is "
                                                      "gone. A live run is never touched."),
    runs_dir: Optional[str] = RUNS_DIR_OPT,
    root: Optional[str] = ROOT_OPT,
):
    """The runs in the store, newest first: id, kind, status, model, method, summary."""
    from ..runs import RunStore, repair_store
    actions = [a for a in (cancel, mark_failed, delete, repair or None) if a is not None]
    if len(actions) > 1:
        raise InputError("give one of --cancel, --mark-failed, --delete, --repair at a time")
    if force and mark_failed is None and delete is None:
        raise InputError("--force goes with --mark-failed or --delete")
    from ..runs import KINDS
    checked(limit=limit)
    if kind is not None and kind not in KINDS:
        raise InputError(f"--kind {kind!r}{did_you_mean(kind, KINDS)}: runs are of the "
                         f"kinds {', '.join(KINDS)}")
    runs_dir = renamed(runs_dir, root, "--runs-dir", "--root")
    if repair:      # before opening the store: its index may be what is broken
        out = repair_store(runs_dir)
        if json_out:
            emit({"repair": out})
        else:
            log(f"index {out['index']} rebuilt: {out['runs']} runs ({out['recovered']} recovered "
                f"from their folders)" + (f"; the corrupt index was moved to "
                                          f"{out['moved_aside']}" if out["moved_aside"] else ""))
        return
    store = RunStore(runs_dir) if actions else RunStore.for_reading(runs_dir)
    if actions:
        if cancel is not None:
            store.request_cancel(cancel)
            info, what = store.get(cancel), "cancel requested"
        elif mark_failed is not None:
            info, what = store.mark_failed(mark_failed, force=force), "marked failed"
        else:
            store.delete(delete, force=force)
            info, what = None, "deleted"
        run_id = cancel or mark_failed or delete
        if json_out:
            emit({"run_id": run_id, "action": what.split()[0],
                  "status": info.status if info else "deleted",
                  "cancel_requested": bool(info and info.cancel_requested)})
        else:
            log(f"run {run_id}: {what}")
        return
    runs = [r.to_dict() for r in store.list(kind=kind, limit=limit)]
    if json_out:
        emit({"runs": runs})
        return
    _print_runs(store.root, runs)


def _print_runs(root, runs: list[dict]) -> None:
    """The runs as a table: id, name (or held-out set), kind, status, model, method, created
    and a brief summary."""
    from rich.console import Console
    from rich.table import Table
    table = Table(title=f"runs in {root}")
    for col in ["run_id", "name", "kind", "status", "model", "method", "created", "summary"]:
        table.add_column(col)
    for r in runs:
        s = r["summary"] or {}
        brief = ", ".join(f"{k}={s[k]:.3g}" if isinstance(s[k], float) else f"{k}={s[k]}"
                          for k in ("n_seeds", "n_adversarial", "adv_rate", "avg_l2", "accuracy")
                          if k in s)
        label = (r["name"] or "") + (f" [{', '.join(r['tags'])}]" if r["tags"] else "")
        if r["parent"]:
            label = f"held-out set of {r['parent']}" + (f": {label}" if label else "")
        table.add_row(r["run_id"], label, r["kind"], r["status"], str(r["model"] or ""),
                      str(r["method"] or ""), r["created"], brief)
    Console(width=200).print(table)
