"""`rnncon report html`: the dashboard's shareable report (one self-contained HTML file with
interactive figures, tables, model, data, settings and versions) for a run or for the coverage
of a model, without starting the dashboard. The writer is ``rnncon_core.reports.html``."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import JSON_OPT, RUNS_DIR_OPT, emit, log, preflight, report_app
from ..errors import InputError
from ..io import atomic_write_text


@report_app.command("html")
def report_html_cmd(
    run: Optional[str] = typer.Option(None, "--run", help="A generation or retraining run "
                                                          "of the run store (its id)."),
    model: Optional[str] = typer.Option(None, "--model", help="Or the coverage of this model "
                                                              "(a shipped name or a .keras "
                                                              "file)."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="With --model: the data set "
                                                                  "(default: the model's own)."),
    n: int = typer.Option(200, "--n", min=1, help="With --model: the first N test inputs."),
    threshold: Optional[float] = typer.Option(None, "--threshold", min=0.0, max=1.0,
                                              help="With --model: RConC's and NC's threshold "
                                                   "(default: the data set's)."),
    granularity: str = typer.Option("unit", "--granularity", help="unit or edge."),
    normalize: str = typer.Option("step", "--normalize", help="step, layer or model."),
    values: str = typer.Option("abs", "--values", help="abs or signed."),
    out_dir: Optional[str] = typer.Option(None, "--out-dir", help="Output folder (default: the "
                                                                  "current one)."),
    runs_dir: Optional[str] = RUNS_DIR_OPT,
    json_out: bool = JSON_OPT,
):
    """One self-contained HTML report (opens offline in a browser): of a run (--run ID) or of
    the coverage of a model (--model M), the same file as the dashboard's "Download report"."""
    if (run is None) == (model is None):
        raise InputError("give --run RUN_ID (a generation or retraining run) or --model MODEL "
                         "(its coverage), one of the two")
    for name, value, choices in (("--granularity", granularity, ("unit", "edge")),
                                 ("--normalize", normalize, ("step", "layer", "model")),
                                 ("--values", values, ("abs", "signed"))):
        if value not in choices:
            raise InputError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    folder = Path(out_dir or ".")
    preflight(model=model, dataset=dataset, folders=[("--out-dir", folder)])
    from ..reports import html as report
    if run is not None:
        from ..runs import RunStore        # a read-only store is reported too
        info = RunStore.for_reading(runs_dir).get(run)
        doc, name = report.for_run(info), f"report-{run}.html"
    else:
        doc = report.coverage_of_model(model, dataset, n, threshold, granularity, normalize,
                                       values)
        name = f"report-coverage-{Path(model).stem}.html"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    atomic_write_text(path, doc)
    if json_out:
        emit({"report": str(path), "bytes": path.stat().st_size})
    else:
        log(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MB)")
