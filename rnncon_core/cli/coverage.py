"""`rnncon coverage`, `rnncon sweep` and `rnncon report coverage`."""
from __future__ import annotations

import json
import time
from pathlib import Path

import typer

from . import app, emit, log, report_app
from ..errors import InputError

CRITERION_HELP = ("rconc (contribution), nc (neuron), hsc (hidden state), csc (cell state); "
                  "testRNN: bc, sc, tc; DeepStellar: state, state-boundary, state-weighted, "
                  "transition, transition-weighted; DeepGauge: kmnc, nbc, snac, tknc, tknp, "
                  "rconc-kmnc, rconc-nbc, rconc-snac (profile-based ones need `rnncon profile` "
                  "once; docs/criteria.md).")


def _load_inputs(dataset: str, split: str, n: int, inputs: str):
    """(x, y or None, description) from a data set split or an .npy file."""
    if bool(dataset) == bool(inputs):
        raise InputError("give either --dataset NAME or --inputs FILE.npy (one of them)")
    if n < 0:
        raise InputError(f"--n must be 0 (all) or a positive count, got {n}")
    if inputs:
        from . import read_npy
        x, y, what = read_npy(inputs, "--inputs"), None, str(Path(inputs))
    else:
        from ..data import load_dataset
        ds = load_dataset(dataset)
        x, y = ds.split(split)
        what = f"{dataset} {split} split"
    if n:
        x = x[:n]
        y = None if y is None else y[:n]
    return x, y, what


def _criterion(model, criterion: str, threshold: float | None, granularity: str,
               normalize: str, values: str, dataset: str = "", include_input: bool = False,
               extra: str = ""):
    from ..coverage import default_threshold, get_criterion
    given = threshold               # the other criteria keep their own default threshold
    if threshold is None:           # the paper's per data set (0.25 images, 0.5 IMDB)
        threshold = default_threshold(dataset or model)
    params = {"rconc": {"threshold": threshold, "granularity": granularity,
                        "normalize": normalize, "values": values},
              "nc": {"threshold": threshold, "include_input": include_input},
              "hsc": {}, "csc": {}}
    if criterion not in params:
        params[criterion] = {} if given is None else {"threshold": given}
    return get_criterion(criterion, model, **params[criterion], **_extra_params(extra))


def _extra_params(text: str) -> dict:
    """--params "k=3,cells=8" -> {"k": 3, "cells": 8} (values read as JSON, else text)."""
    out = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--params takes KEY=VALUE pairs separated by commas, got {item!r}")
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value.strip()
    return out


def _print_table(title: str, summary: dict) -> None:
    from rich.console import Console
    from rich.table import Table
    table = Table(title=title)
    for col in ("layer", "kind", "total", "covered", "rate %"):
        table.add_column(col)
    for row in summary["by_layer"]:
        table.add_row(row["layer"], row["kind"], f"{row['total']:,}", f"{row['covered']:,}",
                      f"{100 * row['rate']:.2f}")
    table.add_row("all", "", f"{summary['total']:,}", f"{summary['covered']:,}",
                  f"{100 * summary['rate']:.2f}")
    Console(width=120).print(table)


MODEL_OPT = typer.Option(..., "--model", help="Shipped model name or a .keras file.")
DATASET_OPT = typer.Option("", "--dataset", help="mnist, fashion-mnist, imdb or digits.")
SPLIT_OPT = typer.Option("test", "--split", help="train or test.")
N_OPT = typer.Option(0, "--n", help="Use the first N inputs (0: all).")
INPUTS_OPT = typer.Option("", "--inputs", help="An .npy file of inputs instead of a data set.")
CRIT_OPT = typer.Option("rconc", "--criterion", help=CRITERION_HELP)
GRAN_OPT = typer.Option("unit", "--granularity", help="unit or edge (rconc only).")
NORM_OPT = typer.Option("step", "--normalize",
                        help="rconc: the min-max scope per input: step (each matmul x^t·U, "
                             "h^(t-1)·W, Dense), layer, or model (Eq. 3 as written).")
VALUES_OPT = typer.Option("abs", "--values", help="rconc: normalize |contributions| (abs) or "
                                                  "signed values (signed + model: Eq. 3 as "
                                                  "written).")
THRESHOLD_OPT = typer.Option(None, "--threshold", help="Activation threshold (default: 0.25 "
                                                       "for image data, 0.5 for IMDB).")
JSON_OPT = typer.Option(False, "--json", help="Print one JSON object.")
PARAMS_OPT = typer.Option("", "--params", help="More criterion parameters, KEY=VALUE,... "
                                               "(e.g. k=3 for kmnc, components=5,cells=8 for "
                                               "state; docs/criteria.md).")


@app.command("coverage")
def coverage_cmd(model: str = MODEL_OPT, dataset: str = DATASET_OPT, split: str = SPLIT_OPT,
                 n: int = N_OPT, inputs: str = INPUTS_OPT, criterion: str = CRIT_OPT,
                 threshold: float = THRESHOLD_OPT,
                 granularity: str = GRAN_OPT, normalize: str = NORM_OPT, values: str = VALUES_OPT,
                 include_input: bool = typer.Option(False, "--include-input",
                                                    help="NC: count the input layer too."),
                 params: str = PARAMS_OPT,
                 state: str = typer.Option("", "--state", help="Go on from a coverage state "
                                                              "saved by --save-state (.npz)."),
                 save_state: str = typer.Option("", "--save-state",
                                                help="Save the coverage state (.npz) to merge "
                                                     "or continue later."),
                 workers: int = typer.Option(0, "--workers", help="Split the inputs over N Ray "
                                                                  "workers (a local runtime)."),
                 ray_address: str = typer.Option("", "--ray-address",
                                                 help="Join this Ray cluster instead."),
                 json_out: bool = JSON_OPT):
    """Coverage of a set of inputs under one criterion, per layer and in all."""
    from ..zoo import load_model
    from ..trace import check_model_inputs
    from ..zoo import with_steps
    x, _, what = _load_inputs(dataset, split, n, inputs)
    m = load_model(model)
    x = check_model_inputs(m, x, f"the inputs ({what})")     # before the model runs
    m = with_steps(m, x.shape[1])                           # keras.Input((None, F)) models
    cov = _criterion(m, criterion, threshold, granularity, normalize, values, dataset,
                     include_input, params)
    if state:
        from ..coverage import Criterion
        saved = Criterion.load(cov.model, state)
        if saved.get_config() != cov.get_config():
            raise InputError(f"{state} holds a {saved.name} state made with {saved.get_config()}; "
                             f"give the same criterion options to go on from it")
        cov = saved
        log(f"going on from {state} ({cov.n_inputs:,} inputs so far)")
    started = time.time()
    if workers or ray_address:
        from ..distributed import coverage as on_ray
        config = {k: v for k, v in cov.get_config().items() if k != "name"}
        cov.merge(on_ray(model, x, cov.name, workers=workers or 2, address=ray_address or None,
                         progress=lambda d, t: log(f"[ray] {d}/{t} shards"), **config))
    else:
        cov.update(x)
    log(f"{criterion} over {len(x):,} inputs ({what}) in {time.time() - started:.1f}s")
    if save_state:
        log(f"coverage state saved to {cov.save(save_state)}")
    summary = cov.summary()
    if json_out:
        emit(summary)
    else:
        _print_table(f"{criterion} of {model} on {what}", summary)


@app.command("sweep")
def sweep_cmd(model: str = MODEL_OPT, dataset: str = DATASET_OPT, split: str = SPLIT_OPT,
              n: int = N_OPT, inputs: str = INPUTS_OPT, criterion: str = CRIT_OPT,
              thresholds: str = typer.Option("0,0.25,0.5,0.75", "--thresholds",
                                             help="Comma-separated thresholds."),
              granularity: str = GRAN_OPT, normalize: str = NORM_OPT, values: str = VALUES_OPT,
              params: str = PARAMS_OPT, json_out: bool = JSON_OPT):
    """The coverage at a grid of thresholds from one pass over the inputs."""
    from ..zoo import load_model
    try:
        grid = [float(t) for t in thresholds.split(",") if t.strip()]
    except ValueError:
        raise InputError(f"--thresholds must be numbers separated by commas, got {thresholds!r}") from None
    from ..coverage import CRITERIA
    if criterion in CRITERIA and not CRITERIA[criterion].uses_threshold:
        raise InputError(f"{criterion} has no threshold to sweep; use `rnncon coverage`")
    if not grid:
        raise InputError("give at least one threshold")
    from ..trace import check_model_inputs
    from ..zoo import with_steps
    x, _, what = _load_inputs(dataset, split, n, inputs)
    m = load_model(model)
    x = check_model_inputs(m, x, f"the inputs ({what})")     # before the model runs
    m = with_steps(m, x.shape[1])                           # keras.Input((None, F)) models
    cov = _criterion(m, criterion, grid[0], granularity, normalize, values, extra=params)
    cov.update(x)
    rows = [cov.summary(t) for t in grid]
    if json_out:
        emit({"criterion": criterion, "granularity": rows[0]["granularity"],
              "normalize": rows[0]["normalize"], "values": rows[0]["values"], "n_inputs": cov.n_inputs, "total": cov.total,
              "sweep": [{k: r[k] for k in ("threshold", "covered", "rate", "by_layer")}
                        for r in rows]})
        return
    for r in rows:
        _print_table(f"{criterion} of {model} on {what}, threshold {r['threshold']}", r)


@report_app.command("coverage")
def report_coverage_cmd(
    out: str = typer.Option("reports/coverage", "--out", help="Output folder."),
    models: str = typer.Option("", "--models", help="Comma-separated names (default: every "
                                                   "shipped Table 1 model)."),
    n_mnist: int = typer.Option(0, "--n-mnist", help="MNIST test inputs per model (0: all)."),
    n_imdb: int = typer.Option(1000, "--n-imdb", help="IMDB test inputs per model (0: all)."),
    json_out: bool = JSON_OPT,
):
    """Figures 6, 7/8 and 12 as CSV plus a markdown summary, on the shipped models."""
    from ..reports.coverage import build_coverage
    names = [m.strip() for m in models.split(",") if m.strip()] or None
    result = build_coverage(Path(out), names, n_mnist=n_mnist, n_imdb=n_imdb, progress=log)
    if json_out:
        emit(result)
    else:
        log(f"wrote {', '.join(result['files'])}")


@app.command("profile")
def profile_cmd(model: str = MODEL_OPT,
                dataset: str = typer.Option(..., "--dataset", help="The model's data set; "
                                                                   "its training split is read."),
                n: int = typer.Option(0, "--n", help="Use the first N training inputs (0: all)."),
                out: str = typer.Option("", "--out", help="Profile file (default: the model's "
                                                          "own under the cache)."),
                json_out: bool = JSON_OPT):
    """Build the training profile the profile-based criteria read (testRNN's, DeepStellar's,
    DeepGauge's): once per model, saved under the cache by the model's fingerprint."""
    from ..coverage.profile import build_profile, fingerprint
    from ..zoo import load_model
    x, _, what = _load_inputs(dataset, "train", n, "")
    m = load_model(model)
    started = time.time()
    path = build_profile(m, x, path=out or None, source=what + (f"[:{n}]" if n else ""),
                         progress=lambda d, t: log(f"profile {d:,}/{t:,}") if d % 2048 < 256
                         or d == t else None)
    result = {"model": model, "profile": str(path), "fingerprint": fingerprint(m),
              "n_inputs": len(x), "seconds": round(time.time() - started, 1)}
    if json_out:
        emit(result)
    else:
        log(f"profile of {model} over {len(x):,} inputs ({what}) in {result['seconds']}s: {path}")


@report_app.command("criteria")
def report_criteria_cmd(
    out: str = typer.Option("reports/criteria", "--out", help="Output folder."),
    models: str = typer.Option("", "--models", help="Comma-separated MNIST models (default: "
                                                   "the four shipped ones)."),
    n_clean: int = typer.Option(500, "--n-clean", help="Clean test inputs in each pool."),
    n_seeds: int = typer.Option(100, "--n-seeds", help="Seeds per generation method."),
    sizes: str = typer.Option("25,50,100,200", "--sizes", help="Suite sizes."),
    n_suites: int = typer.Option(200, "--n-suites", help="Random suites per size."),
    n_profile: int = typer.Option(4000, "--n-profile", help="Training inputs for a profile "
                                                           "built here (if none is cached)."),
    methods: str = typer.Option("pgd,fgsm,rconc,nc,noise", "--methods",
                                help="Generation methods of the pool."),
    json_out: bool = JSON_OPT,
):
    """Which criteria find faults: Kendall tau of every criterion's coverage of random suites
    with their faults, per suite size and controlling for size (FSE 2020's method)."""
    from ..reports.criteria import MNIST_MODELS, build_criteria
    try:
        size_list = tuple(int(s) for s in sizes.split(",") if s.strip())
    except ValueError:
        raise InputError(f"--sizes must be integers separated by commas, got {sizes!r}") from None
    names = tuple(m.strip() for m in models.split(",") if m.strip()) or MNIST_MODELS
    result = build_criteria(Path(out), names, progress=log, n_clean=n_clean, n_seeds=n_seeds,
                            sizes=size_list, n_suites=n_suites, n_profile=n_profile,
                            methods=tuple(m.strip() for m in methods.split(",") if m.strip()))
    if json_out:
        emit(result)
    else:
        log(f"wrote {', '.join(result['files'])}")
