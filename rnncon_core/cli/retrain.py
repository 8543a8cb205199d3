"""`rnncon retrain` and `rnncon report retraining` (Tables 5 and 6, Figures 11, 13, 14,
the §7 robustness experiment and DeepXplore's pollution detection)."""
from __future__ import annotations

from typing import Optional

import typer

from . import app, emit, log, report_app


def _stderr(event: dict) -> None:
    if event.get("stage") == "train" and event.get("epoch"):
        log(f"[retrain] {event['message']}")
    elif event.get("message"):
        log(f"[retrain] {event['message']}")


@app.command("retrain")
def retrain_cmd(
    model: str = typer.Option(..., "--model", help="Shipped model name or .keras path."),
    from_run: str = typer.Option(..., "--from-run", help="Generation run whose adversarial "
                                 "inputs join the training data, or 'best': Table 5's choice "
                                 "(smallest L1, then FID, then largest IS) among the model's "
                                 "finished generation runs."),
    epochs: int = typer.Option(10, help="More epochs per retraining (the paper: 10)."),
    repeats: int = typer.Option(10, help="Retrainings with different seeds (the paper: 10)."),
    dataset: str = typer.Option("", help="Data set of a model given by path (default: its "
                                         "architecture's or the run's)."),
    control: bool = typer.Option(True, "--control/--no-control",
                                 help="Also retrain on as many clean training inputs."),
    max_inputs: int = typer.Option(0, "--max-inputs", help="Use at most this many "
                                                           "adversarial inputs (0: all)."),
    robustness_seeds: int = typer.Option(0, "--robustness-seeds", help="Seeds of the fresh "
                                         "generation runs that measure robustness (0: skip)."),
    learning_rate: float = typer.Option(0.0, "--learning-rate", help="0: the fine-tuning "
                                        "default, 1e-4."),
    augment: Optional[bool] = typer.Option(None, "--augment/--no-augment", help="Random "
                                           "shifts as in the shipped training (default: on "
                                           "for 28 x 28 images)."),
    seed: int = typer.Option(0),
    runs_dir: str = typer.Option("", "--runs-dir", help="Run store (default: RNNCON_RUNS or "
                                                        "./runs)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
):
    """Retrain a model with generated inputs; metrics before / after (mean and std over the
    repeats), the control arm, RConC and the path of the best retrained model."""
    from ..retrain import choose_run, run_retraining
    from ..runs import RunStore
    store = RunStore(runs_dir or None)
    if from_run == "best":
        choice = choose_run(model, store)
        from_run = choice["run_id"]
        log(f"[retrain] Table 5's choice: run {from_run} (selected by {choice['selected_by']}; "
            f"L1 {choice['l1']:.2f}, FID {choice['fid']:.2f}, IS {choice['is']:.3f})")
    summary = run_retraining(model, from_run, epochs=epochs, repeats=repeats,
                             dataset=dataset or None, control=control,
                             max_inputs=max_inputs or None, learning_rate=learning_rate or None,
                             augment=augment,
                             seed=seed, robustness_seeds=robustness_seeds, store=store,
                             progress=_stderr)
    if json_out:
        emit(summary)
        return
    from rich.console import Console
    from rich.table import Table
    table = Table(title=f"retraining {model} with run {from_run} ({summary['n_inputs']} inputs, "
                        f"{epochs} epochs x {summary['repeats_done']} repeats)")
    for col in ["metric", "before", "after (mean ± std)", "control (mean ± std)",
                "gain over control"]:
        table.add_column(col)
    for k, after in summary["after"].items():
        ctrl = summary.get("control", {}).get(k)
        goc = summary.get("gain_over_control", {}).get(k)
        table.add_row(k, f"{100 * summary['before'][k]:.2f}",
                      f"{100 * after['mean']:.2f} ± {100 * after['std']:.2f}",
                      f"{100 * ctrl['mean']:.2f} ± {100 * ctrl['std']:.2f}" if ctrl else "-",
                      f"{100 * goc['mean']:+.2f} ± {100 * goc['std']:.2f}" if goc else "-")
    Console(width=160).print(table)
    log(f"best retrained model: {summary['best_model']}")


@report_app.command("retraining")
def report_retraining_cmd(
    models: str = typer.Option("", "--models", help="Comma separated (default: the four MNIST "
                                                    "models that are shipped)."),
    seeds: int = typer.Option(500, "--seeds", help="Seeds per candidate generation run."),
    epochs: int = typer.Option(10, help="Epochs per retraining (the paper: 10)."),
    repeats: int = typer.Option(10, help="Repeats for Table 6 / Figure 14 (the paper: 10)."),
    table5_repeats: int = typer.Option(1, "--table5-repeats",
                                       help="Repeats per candidate for Table 5's Acc.Retrain."),
    robustness_seeds: int = typer.Option(100, "--robustness-seeds"),
    section7: bool = typer.Option(True, "--section7/--no-section7",
                                  help="The §7 robustness experiment (mnist-gru)."),
    pollution: bool = typer.Option(True, "--pollution/--no-pollution",
                                   help="DeepXplore's pollution detection."),
    out_dir: str = typer.Option("reports/retraining", "--out-dir"),
    runs_dir: str = typer.Option("", "--runs-dir"),
    json_out: bool = typer.Option(False, "--json"),
):
    """Tables 5 and 6, Figures 11, 13 and 14, §7 and pollution detection, beside the paper's.

    Reuses the finished runs in the store that have the same settings; runs what is missing.
    """
    from ..retrain_report import retraining_report
    from ..runs import RunStore
    names = [m for m in models.split(",") if m] or None
    report = retraining_report(names, seeds=seeds, epochs=epochs, repeats=repeats,
                               table5_repeats=table5_repeats,
                               robustness_seeds=robustness_seeds, section7=section7,
                               pollution=pollution, out_dir=out_dir,
                               store=RunStore(runs_dir or None), log=log)
    if json_out:
        emit(report)
    else:
        log(f"wrote {report['files']['markdown']} and {report['files']['json']}")
