"""`rnncon models` (Table 1) and `rnncon train`."""
from __future__ import annotations

from typing import Optional

import typer

from ..zoo import check_architecture, models_table, train_model
from .common import JSON_OPT, app, checked, emit, log, preflight


@app.command("models")
def models_cmd(json_out: bool = JSON_OPT):
    """Table 1: the eight architectures, our counts and measured accuracies beside the paper's."""
    rows = models_table()
    if json_out:
        emit({"models": rows})
        return
    from rich.console import Console
    from rich.table import Table
    table = Table(title="Table 1: models (ours | paper)")
    for col in ["name", "architecture", "params", "#neurons", "#cons/step", "#cons (paper conv.)",
                "test acc. %"]:
        table.add_column(col)
    for r in rows:
        p = r["paper"]
        acc = "not trained" if r["test_accuracy"] is None else f"{100 * r['test_accuracy']:.2f}"
        table.add_row(r["name"], r["architecture"], f"{r['params']:,} | {p['params']:,}",
                      f"{r['neurons']:,} | {p['neurons']:,}", f"{r['contributions_per_step']:,}",
                      f"{r['cons_paper_convention']:,} | {p['cons']:,}",
                      f"{acc} | {p['accuracy'] if p['accuracy'] is not None else '-'}")
    Console(width=200).print(table)


@app.command("train")
def train_cmd(
    name: str = typer.Argument(..., help="Architecture name (see `rnncon models`) or mnist-features."),
    epochs: Optional[int] = typer.Option(None, help="Most epochs (default: 80 for MNIST, 2 "
                                                    "for IMDB)."),
    batch_size: int = typer.Option(128, "--batch-size"),
    seed: int = typer.Option(0),
    validation_split: float = typer.Option(0.1, "--validation-split"),
    patience: Optional[int] = typer.Option(None, help="Early stopping patience on validation "
                                                      "accuracy (default: 10 for MNIST, 1 for "
                                                      "IMDB)."),
    out_dir: Optional[str] = typer.Option(None, "--out-dir", help="Where to save (default: "
                                                                  "assets/models)."),
    resume: bool = typer.Option(False, "--resume", help="Go on from the shipped weights."),
    learning_rate: float = typer.Option(1e-3, "--learning-rate", help="Adam's learning rate."),
    json_out: bool = JSON_OPT,
):
    """Train one architecture on our split and save it with its model card."""
    checked(epochs=epochs, batch_size=batch_size, seed=seed, validation_split=validation_split,
            patience=patience, learning_rate=learning_rate)
    check_architecture(name)
    preflight(folders=[("--out-dir", out_dir)])
    card = train_model(name, epochs=epochs, batch_size=batch_size, seed=seed,
                       validation_split=validation_split, patience=patience,
                       out_dir=out_dir or None, resume=resume,
                       learning_rate=learning_rate)
    if json_out:
        emit(card)
    else:
        log(f"saved {name}: test accuracy {100 * card['test_accuracy']:.2f} %")
