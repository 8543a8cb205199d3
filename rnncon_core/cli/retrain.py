"""`rnncon retrain` and `rnncon report retraining` (Tables 5 and 6, Figures 11, 13, 14,
the §7 robustness experiment and DeepXplore's pollution detection)."""
from __future__ import annotations

import time
from typing import Optional

import typer

from ..params import check_args
from .common import (JSON_OPT, NAME_OPT, ROOT_OPT, RUNS_DIR_OPT, TAGS_OPT, app, emit, log, names,
               preflight, report_app, store)


class _Progress:
    """The job's events on stderr: each stage, held-out set, repeat and epoch as it starts
    (with the time left once training batches have been timed), and inside a long epoch a
    line at most every ``EVERY`` seconds."""
    EVERY = 30.0

    def __init__(self):
        self.first: tuple[float, int] | None = None      # (time, done) of the first batch
        self.last_line = 0.0

    def left(self, done: int, total: int) -> str:
        """The text " · about N min left" at the pace since the first training batch (which carries
        the tracing), "" before two have been timed. Evaluations between repeats count in
        the pace (their share is the same in every repeat)."""
        now = time.monotonic()
        if self.first is None or done <= self.first[1] or not total:
            return ""
        rate = (done - self.first[1]) / max(now - self.first[0], 1e-9)
        return f" · about {_duration((total - done) / rate)} left"

    def __call__(self, event: dict) -> None:
        message, done, total = event.get("message"), event.get("done", 0), event.get("total", 0)
        if not message:
            return
        now = time.monotonic()
        if "batch" in event:                    # inside an epoch: a line now and then
            if self.first is None and done > 0:
                self.first = (now, done)
            if now - self.last_line < self.EVERY:
                return
            message = f"{message} ({done:,}/{total:,} training batches)"
        self.last_line = now
        log(f"[retrain] {message}{self.left(done, total) if event.get('stage') != 'done' else ''}")


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


@app.command("retrain")
def retrain_cmd(
    model: str = typer.Option(..., "--model", help="Shipped model name or .keras path."),
    from_run: str = typer.Option(..., "--from-run", help="Generation run whose adversarial "
                                 "inputs join the training data, or 'best': Table 5's choice "
                                 "(smallest L1, then FID, then largest IS) among the model's "
                                 "finished generation runs."),
    epochs: int = typer.Option(10, help="More epochs per retraining (the paper: 10)."),
    repeats: int = typer.Option(10, help="Retrainings with different seeds (the paper: 10)."),
    dataset: Optional[str] = typer.Option(None, help="Data set of a model given by path: a "
                                                     "name or your own .npz with x_train, "
                                                     "y_train, x_test, y_test (default: its "
                                                     "architecture's or the run's)."),
    control: bool = typer.Option(True, "--control/--no-control",
                                 help="Also retrain on as many clean training inputs."),
    max_inputs: Optional[int] = typer.Option(None, "--max-inputs", help="Use at most this "
                                             "many adversarial inputs (default: all)."),
    mix: Optional[float] = typer.Option(None, "--mix", help="Share of each batch drawn from "
                                        "the generated inputs (0: each once per epoch, the "
                                        "paper's recipe; default: retrain.DEFAULT_MIX)."),
    transfer_seeds: Optional[int] = typer.Option(None, "--transfer-seeds", help="Evaluation "
                                                 "seeds per held-out transfer method (0: skip; "
                                                 "default: retrain.TRANSFER_SEEDS)."),
    transfer_methods: Optional[str] = typer.Option(None, "--transfer-methods", help="Comma "
                                                   "separated (default: rconc,nc,rnntest,pgd "
                                                   "for images)."),
    robustness_seeds: int = typer.Option(0, "--robustness-seeds", help="Seeds of the fresh "
                                         "white-box generation runs against each model "
                                         "(0: skip)."),
    fit_inputs: Optional[int] = typer.Option(None, "--fit-inputs", help="Clean training "
                                             "inputs per epoch: a fresh random sample of "
                                             "this many each epoch (default: all)."),
    evaluation_inputs: Optional[int] = typer.Option(None, "--evaluation-inputs", help="Evaluate "
                                                    "and validate on a sample of at most this "
                                                    "many test inputs per part (default: all)."),
    learning_rate: Optional[float] = typer.Option(None, "--learning-rate", help="Default: the "
                                                  "fine-tuning one, 3e-4."),
    augment: Optional[bool] = typer.Option(None, "--augment/--no-augment", help="Random "
                                           "shifts as in the shipped training (default: on "
                                           "for 28 x 28 images)."),
    seed: int = typer.Option(0),
    force: bool = typer.Option(False, "--force", help="Use a generation run of another model."),
    continue_from: Optional[str] = typer.Option(None, "--continue-from", help="A retrain run "
                                                "(finished or cancelled) with the same "
                                                "settings and fewer repeats: keep its repeats, "
                                                "train only the missing ones."),
    runs_dir: Optional[str] = RUNS_DIR_OPT,
    root: Optional[str] = ROOT_OPT,
    json_out: bool = JSON_OPT,
    name: Optional[str] = NAME_OPT,
    tags: Optional[str] = TAGS_OPT,
):
    """Retrain a model with generated inputs; metrics before / after (mean and std over the
    repeats), the control arm, RConC and the path of the best retrained model."""
    settings = dict(epochs=epochs, repeats=repeats, max_inputs=max_inputs,
                    learning_rate=learning_rate, mix=mix, transfer_seeds=transfer_seeds,
                    robustness_seeds=robustness_seeds, seed=seed, fit_inputs=fit_inputs)
    _check_settings(settings)
    preflight(model=model, dataset=dataset)
    runs = store(runs_dir, root).named(name, tags or ())
    for run_id in (from_run, continue_from):      # the runs named exist: before any work
        if run_id is not None and run_id != "best":
            runs.get(run_id)
    from_run = _source_run(model, from_run, runs)
    summary = _retrain(model, from_run, runs, settings, dataset=dataset, control=control,
                       augment=augment, transfer_methods=transfer_methods, force=force,
                       continue_from=continue_from, evaluation_inputs=evaluation_inputs)
    if json_out:
        emit(summary)
    else:
        _print_summary(model, from_run, epochs, summary)


def _check_settings(settings: dict) -> None:
    """The numeric options, checked against retrain.PARAMS (one-line error if out of range)."""
    from ..retrain import PARAMS
    check_args(PARAMS, **settings)


def _source_run(model: str, from_run: str, runs) -> str:
    """The generation run --from-run names; 'best' is Table 5's choice among the model's."""
    if from_run != "best":
        return from_run
    from ..retrain import choose_run
    choice = choose_run(model, runs)
    from_run = choice["run_id"]
    log(f"[retrain] Table 5's choice: run {from_run} (selected by {choice['selected_by']}; "
        f"L1 {choice['l1']:.2f}, FID {choice['fid']:.2f}, IS {choice['is']:.3f})")
    return from_run


def _retrain(model: str, from_run: str, runs, settings: dict, *, dataset, control, augment,
             transfer_methods, force, continue_from, evaluation_inputs) -> dict:
    """Run the retraining job, the unset mix / transfer seeds at their defaults; progress goes
    to stderr."""
    from ..jobs.retraining import run_retraining
    from ..retrain import DEFAULT_MIX, TRANSFER_SEEDS
    settings = dict(settings)
    if settings["mix"] is None:
        settings["mix"] = DEFAULT_MIX
    if settings["transfer_seeds"] is None:
        settings["transfer_seeds"] = TRANSFER_SEEDS
    return run_retraining(model, from_run, dataset=dataset, control=control, augment=augment,
                          transfer_methods=names(transfer_methods, "--transfer-methods"),
                          store=runs, progress=_Progress(), force=force,
                          continue_from=continue_from, evaluation_inputs=evaluation_inputs,
                          **settings)


def _print_summary(model: str, from_run: str, epochs: int, summary: dict) -> None:
    """The summary as a table (before, after, control, gain, p) and the best model's path."""
    from rich.console import Console
    from rich.table import Table
    table = Table(title=f"retraining {model} with run {from_run} ({summary['n_inputs']} inputs, "
                        f"{epochs} epochs x {summary['repeats_done']} repeats)")
    for col in ["metric (%)", "before", "after (mean ± std)", "control (mean ± std)",
                "after − control", "p (paired t)"]:
        table.add_column(col)
    rows = [(k, summary["before"][k], after, summary.get("control", {}).get(k),
             summary.get("gain_over_control", {}).get(k)) for k, after in summary["after"].items()]
    rows += [(f"transfer: {k} ({t['n']} adv.)", t["original"], t["retrained"], t.get("control"),
              t.get("retrained_minus_control"))
             for k, t in summary.get("transfer_by_method", {}).items() if t["n"]]
    ms = lambda s, sign="": f"{100 * s['mean']:{sign}.2f} ± {100 * s['std']:.2f}"  # noqa: E731
    for name, before, after, ctrl, goc in rows:
        p = (goc or {}).get("p_value")
        table.add_row(name, f"{100 * before:.2f}", ms(after), ms(ctrl) if ctrl else "-",
                      ms(goc, "+") if goc else "-", "-" if p is None else f"{p:.3g}")
    Console(width=160).print(table)
    log(f"{summary['evaluated_on']}; best retrained model (on validation): "
        f"{summary['best_model']}")


@report_app.command("retraining")
def report_retraining_cmd(
    models: Optional[str] = typer.Option(None, "--models", help="Comma separated (default: "
                                                                "the four MNIST models that "
                                                                "are shipped)."),
    seeds: int = typer.Option(500, "--seeds", help="Seeds per candidate generation run."),
    epochs: int = typer.Option(10, help="Epochs per retraining (the paper: 10)."),
    repeats: int = typer.Option(10, help="Repeats for Table 6 / Figure 14 (the paper: 10)."),
    table5_repeats: int = typer.Option(1, "--table5-repeats",
                                       help="Repeats per candidate for Table 5's Acc.Retrain."),
    robustness_seeds: int = typer.Option(100, "--robustness-seeds"),
    transfer_seeds: int = typer.Option(500, "--transfer-seeds", help="Evaluation seeds per "
                                       "held-out transfer method."),
    recipe_models: str = typer.Option("mnist-lstm,mnist-gru", "--recipe-models",
                                      help="Models of the recipe search (empty: skip it)."),
    recipe_epochs: int = typer.Option(5, "--recipe-epochs"),
    recipe_repeats: int = typer.Option(2, "--recipe-repeats"),
    section7: bool = typer.Option(True, "--section7/--no-section7",
                                  help="The §7 robustness experiment (mnist-gru)."),
    pollution: bool = typer.Option(True, "--pollution/--no-pollution",
                                   help="DeepXplore's pollution detection."),
    pgd_training: bool = typer.Option(True, "--pgd/--no-pgd",
                                      help="PGD adversarial training with the same budget."),
    out_dir: str = typer.Option("reports/retraining", "--out-dir"),
    runs_dir: Optional[str] = RUNS_DIR_OPT,
    root: Optional[str] = ROOT_OPT,
    json_out: bool = JSON_OPT,
):
    """Tables 5 and 6, Figures 11, 13 and 14, §7 and pollution detection, beside the paper's.

    Reuses the finished runs in the store that have the same settings; runs what is missing.
    """
    from ..reports.retraining import build_retraining
    from ..retrain import PARAMS
    check_args(PARAMS, epochs=epochs, repeats=repeats, robustness_seeds=robustness_seeds,
               transfer_seeds=transfer_seeds)
    check_args(seeds=seeds, table5_repeats=table5_repeats, recipe_epochs=recipe_epochs,
               recipe_repeats=recipe_repeats)
    preflight(models=names(models, "--models") or (), folders=[("--out-dir", out_dir)])
    report = build_retraining(names(models, "--models"), seeds=seeds, epochs=epochs, repeats=repeats,
                              table5_repeats=table5_repeats,
                              robustness_seeds=robustness_seeds,
                              transfer_seeds=transfer_seeds,
                              recipe_models=names(recipe_models, "--recipe-models") or [],
                              recipe_epochs=recipe_epochs, recipe_repeats=recipe_repeats,
                              section7=section7,
                              pollution=pollution, out_dir=out_dir,
                              store=store(runs_dir, root), log=log, pgd_training=pgd_training)
    if json_out:
        emit(report)
    else:
        log(f"wrote {', '.join(report['files'])}")
