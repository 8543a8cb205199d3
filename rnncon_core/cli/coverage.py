"""`rnncon coverage`, `rnncon sweep`, `rnncon criteria` (each criterion's declared parameters),
`rnncon profile` and `rnncon report coverage|criteria`."""
from __future__ import annotations

import time
from pathlib import Path
from typing import List, Optional

import typer

from ..coverage import CRITERIA
from ..data import DATASETS, is_dataset_file, load_dataset
from ..errors import InputError
from ..generate import generator_class
from ..zoo import load_model, with_steps
from .common import (DECLARED, JSON_OPT, OUT_OPT, PARAM_OPT, RAY_OPT, app, checked, declared_values,
                     emit, log, names, numbers, preflight, read_npy, renamed, report_app,
                     show_params)

CRITERION_HELP = (f"One of {', '.join(CRITERIA.names())} (profile-based ones build the "
                  f"model's training profile from --dataset's training split when they need "
                  f"it; docs/criteria.md). Its parameters follow as --NAME VALUE: "
                  f"`rnncon criteria [NAME]` lists them.")


def _load_inputs(dataset: str | None, split: str, n: int | None, inputs: str | None):
    """(x, y or None, description) from a data set split (a built-in name or the path of the
    user's .npz) or an .npy file."""
    if (dataset is None) == (inputs is None):
        raise InputError("give either --dataset NAME|DATA.npz or --inputs FILE.npy (one of "
                         "them)")
    checked(n=n, split=split)
    if inputs is not None:
        x, y, what = read_npy(inputs, "--inputs"), None, str(Path(inputs))
    else:
        ds = load_dataset(dataset)
        x, y = ds.split(split)
        what = f"{dataset} {split} split"
    if n:
        x = x[:n]
        y = None if y is None else y[:n]
    return x, y, what


def _data_kind(dataset: str | None, kind: str | None) -> str | None:
    """What the inputs are: ``--kind``, else "sequence" for a user's .npz that says so (its
    values need not lie in [0, 1]), else None (guessed from the model's input shape)."""
    checked(kind=kind)
    if kind is None and dataset is not None:
        if is_dataset_file(dataset) and load_dataset(dataset).kind == "sequence":
            return "sequence"
    return kind


def _criterion_params(ctx: typer.Context, criterion: str, pairs: list[str] | None,
                      old_pairs: str | None) -> dict:
    """The criterion's declared parameters given on the command line (see `rnncon criteria`);
    ``--params "k=3,cells=8"`` is the old form of ``--param k=3 --param cells=8``."""
    from ..coverage import CRITERIA, get_criterion
    if criterion not in CRITERIA:
        get_criterion(criterion, None)          # the error that lists the criteria
    if old_pairs is not None:
        log("note: --params is deprecated and goes in the next release; use --NAME VALUE "
            "(or --param NAME=VALUE, repeatable)")
    return declared_values(CRITERIA[criterion].params, ctx.args,
                           [*(pairs or []), *(names(old_pairs, "--params") or [])],
                           f"criterion {criterion!r}",
                           lambda: {p.name for c in CRITERIA.values() for p in c.params})


def _preflight(model: str, dataset: str | None, kind: str | None, given: dict,
               outputs=()) -> None:
    """The model, data set, a given profile file and the output paths checked before the
    work (``preflight``)."""
    preflight(model=model, dataset=dataset, kind=kind, outputs=outputs)
    profile = given.get("profile_path")
    if profile is not None and not Path(profile).is_file():
        raise InputError(f"no training profile at {profile}: build it with `rnncon profile "
                         f"--model {model} --dataset DATA --profile-path {profile}`")


def _criterion(model, criterion: str, params: dict, dataset: str | None = None,
               n_profile: int | None = None):
    """The criterion with ``params``; where the threshold is not given, the criteria that take
    the data set's (``threshold_from_data``: 0.25 images, 0.5 IMDB) get it. A profile-based
    one builds its training profile from the data set's training split (the first
    ``n_profile`` inputs; 0: all) when it is missing or was built from other data."""
    from ..coverage import CRITERIA, default_threshold, get_criterion, needs_profile
    if CRITERIA[criterion].threshold_from_data and "threshold" not in params:
        params = {**params, "threshold": default_threshold(dataset if dataset in DATASETS
                                                           else model)}
    if needs_profile(criterion) and params.get("profile_path") is None and dataset:
        params = {**params, **_training(dataset, n_profile)}
    return get_criterion(criterion, model, **params)


def _training(dataset: str, n_profile: int | None) -> dict:
    """x_train, y_train, progress and source for a profile built on demand."""
    if n_profile is not None and n_profile < 0:
        raise InputError(f"--n-profile must be a count (0: the whole training split), got "
                         f"{n_profile}")
    x, y, what = _load_inputs(dataset, "train", n_profile or None, None)
    shown = set()

    def progress(done, total):
        pct = 100 * done // total
        if pct // 25 not in shown:
            shown.add(pct // 25)
            log(f"building the training profile from {len(x):,} {what} inputs: {pct} %")
    return {"x_train": x, "y_train": y, "progress": progress,
            "train_source": what + (f"[:{n_profile}]" if n_profile else "")}


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
DATASET_OPT = typer.Option(None, "--dataset", help="mnist, fashion-mnist, imdb, digits, or "
                                                   "your own .npz (x_train, y_train, x_test, "
                                                   "y_test; docs/data.md).")
KIND_OPT = typer.Option(None, "--kind", help="image | sequence | text: what the inputs are "
                                             "(default: guessed from the model's input shape; "
                                             "sequence: any real values, also on 28 x 28).")
SPLIT_OPT = typer.Option("test", "--split", help="train or test.")
N_OPT = typer.Option(None, "--n", help="Use the first N inputs (default: all).")
INPUTS_OPT = typer.Option(None, "--inputs", help="An .npy file of inputs instead of a data set.")
CRIT_OPT = typer.Option("rconc", "--criterion", help=CRITERION_HELP)
N_PROFILE_OPT = typer.Option(4000, "--n-profile", help="Training inputs a profile-based "
                                                       "criterion's profile is built from "
                                                       "when it needs one (0: all).")
PARAMS_OPT = typer.Option(None, "--params", hidden=True, help="Old form of --param: "
                                                              "KEY=VALUE,...")
CRITERION_EPILOG = ("The criterion's parameters follow as --NAME VALUE (or --param NAME=VALUE): "
                    "`rnncon criteria [NAME]` lists them with type, default, range and help "
                    "(e.g. rconc: --threshold, --granularity unit|edge, --normalize, --values; "
                    "nc: --threshold, --include-input; kmnc: --k).")


def _model_and_inputs(model: str, dataset, split, n, inputs, kind=None):
    from ..trace import check_model_inputs, set_kind
    x, _, what = _load_inputs(dataset, split, n, inputs)
    kind = _data_kind(dataset, kind)
    m = load_model(model)
    x = check_model_inputs(m, x, f"the inputs ({what})", kind)   # before the model runs
    m = with_steps(m, x.shape[1])                                # keras.Input((None, F))
    set_kind(m, kind)
    return m, x, what


@app.command("coverage", context_settings=DECLARED, epilog=CRITERION_EPILOG)
def coverage_cmd(ctx: typer.Context, model: str = MODEL_OPT,
                 dataset: Optional[str] = DATASET_OPT, split: str = SPLIT_OPT,
                 n: Optional[int] = N_OPT, inputs: Optional[str] = INPUTS_OPT,
                 criterion: str = CRIT_OPT, param: Optional[List[str]] = PARAM_OPT,
                 params: Optional[str] = PARAMS_OPT,
                 state: Optional[str] = typer.Option(None, "--state", help="Go on from a "
                                                     "coverage state saved by --save-state "
                                                     "(.npz)."),
                 save_state: Optional[str] = typer.Option(None, "--save-state",
                                                          help="Save the coverage state (.npz) "
                                                               "to merge or continue later."),
                 workers: Optional[int] = typer.Option(None, "--workers", help="Split the "
                                                       "inputs over N Ray workers (a local "
                                                       "runtime)."),
                 ray_address: Optional[str] = RAY_OPT,
                 n_profile: int = N_PROFILE_OPT, kind: Optional[str] = KIND_OPT,
                 json_out: bool = JSON_OPT):
    """Coverage of a set of inputs under one criterion, per layer and in all."""
    given = _criterion_params(ctx, criterion, param, params)
    checked(workers=workers, kind=kind)
    _preflight(model, dataset, kind, given, outputs=[("--save-state", save_state)])
    from ..coverage import statefile
    if state is not None:
        statefile.check_state(state)                          # a damaged file: before the work
    m, x, what = _model_and_inputs(model, dataset, split, n, inputs, kind)
    cov = _criterion(m, criterion, given, dataset, n_profile)
    if state is not None:
        saved = statefile.load(cov.model, state)
        if saved.get_config() != cov.get_config():
            raise InputError(f"{state} holds a {saved.name} state made with {saved.get_config()}; "
                             f"give the same criterion options to go on from it")
        cov = saved
        log(f"going on from {state} ({cov.n_inputs:,} inputs so far)")
    started = time.time()
    if workers or ray_address:
        from ..jobs.distributed import coverage as on_ray
        config = {k: v for k, v in cov.get_config().items() if k != "name"}
        cov.merge(on_ray(model, x, cov.name, workers=workers or 2, address=ray_address,
                         progress=lambda d, t: log(f"[ray] {d}/{t} shards"), **config))
    else:
        cov.update(x)
    log(f"{criterion} over {len(x):,} inputs ({what}) in {time.time() - started:.1f}s")
    summary = cov.report.summary()
    if json_out:                    # the result first: a failed save does not lose it
        emit(summary)
    else:
        _print_table(f"{criterion} of {model} on {what}", summary)
    if save_state is not None:
        log(f"coverage state saved to {statefile.save(cov, save_state)}")


@app.command("sweep", context_settings=DECLARED, epilog=CRITERION_EPILOG)
def sweep_cmd(ctx: typer.Context, model: str = MODEL_OPT, dataset: Optional[str] = DATASET_OPT,
              split: str = SPLIT_OPT, n: Optional[int] = N_OPT,
              inputs: Optional[str] = INPUTS_OPT, criterion: str = CRIT_OPT,
              thresholds: str = typer.Option("0,0.25,0.5,0.75", "--thresholds",
                                             help="Comma-separated thresholds."),
              param: Optional[List[str]] = PARAM_OPT, params: Optional[str] = PARAMS_OPT,
              n_profile: int = N_PROFILE_OPT, kind: Optional[str] = KIND_OPT,
              json_out: bool = JSON_OPT):
    """The coverage at a grid of thresholds from one pass over the inputs."""
    grid = numbers(thresholds, "--thresholds")
    given = _criterion_params(ctx, criterion, param, params)
    from ..coverage import CRITERIA
    if "threshold" not in CRITERIA[criterion].params:
        raise InputError(f"{criterion} has no threshold to sweep; use `rnncon coverage`")
    if "threshold" in given:
        raise InputError("sweep takes --thresholds (a list), not --threshold")
    if not grid:
        raise InputError("give at least one threshold")
    checked(kind=kind)
    _preflight(model, dataset, kind, given)
    m, x, what = _model_and_inputs(model, dataset, split, n, inputs, kind)
    cov = _criterion(m, criterion, {**given, "threshold": grid[0]}, dataset, n_profile)
    cov.update(x)
    rows = [cov.report.summary(t) for t in grid]
    if json_out:
        emit({"criterion": criterion, "granularity": rows[0]["granularity"],
              "normalize": rows[0]["normalize"], "values": rows[0]["values"], "n_inputs": cov.n_inputs, "total": cov.total,
              "sweep": [{k: r[k] for k in ("threshold", "covered", "rate", "by_layer")}
                        for r in rows]})
        return
    for r in rows:
        _print_table(f"{criterion} of {model} on {what}, threshold {r['threshold']}", r)


@app.command("criteria")
def criteria_cmd(name: Optional[str] = typer.Argument(None, help="One criterion (default: "
                                                                  "all)."),
                 json_out: bool = JSON_OPT):
    """Each coverage criterion's parameters: type, default, range or choices, help.

    Give them to `rnncon coverage` / `sweep` as --NAME VALUE (or --param NAME=VALUE)."""
    from ..coverage import CRITERIA, get_criterion
    if name is not None and name not in CRITERIA:
        get_criterion(name, None)               # the error that lists the criteria
    chosen = [name] if name else list(CRITERIA)
    show_params("criterion", {c: ("image, text", CRITERIA[c].params) for c in chosen},
                json_out)


@report_app.command("coverage")
def report_coverage_cmd(
    out_dir: Optional[str] = typer.Option(None, "--out-dir", help="Output folder (default: "
                                                                  "reports/coverage)."),
    out: Optional[str] = OUT_OPT,
    models: Optional[str] = typer.Option(None, "--models", help="Comma-separated names "
                                         "(default: every shipped Table 1 model)."),
    n_mnist: int = typer.Option(0, "--n-mnist", help="MNIST test inputs per model (0: all)."),
    n_imdb: int = typer.Option(1000, "--n-imdb", help="IMDB test inputs per model (0: all)."),
    json_out: bool = JSON_OPT,
):
    """Figures 6, 7/8 and 12 as CSV plus a markdown summary, on the shipped models."""
    from ..reports.coverage import build_coverage
    folder = renamed(out_dir, out, "--out-dir", "--out") or "reports/coverage"
    checked(n_mnist=n_mnist, n_imdb=n_imdb)
    preflight(models=names(models, "--models") or (), folders=[("--out-dir", folder)])
    result = build_coverage(Path(folder), names(models, "--models"), n_mnist=n_mnist,
                            n_imdb=n_imdb, progress=log)
    if json_out:
        emit(result)
    else:
        log(f"wrote {', '.join(result['files'])}")


@app.command("profile")
def profile_cmd(model: str = MODEL_OPT,
                dataset: str = typer.Option(..., "--dataset", help="The model's data set "
                                                                   "(a name or your own .npz); "
                                                                   "its training split is read."),
                n: Optional[int] = typer.Option(None, "--n", help="Use the first N training "
                                                                  "inputs (default: all)."),
                profile_path: Optional[str] = typer.Option(None, "--profile-path",
                                                           help="Profile file (default: the "
                                                                "model's own under the "
                                                                "cache)."),
                out: Optional[str] = typer.Option(None, "--out", hidden=True,
                                                  help="Old name of --profile-path."),
                profile_inputs: str = typer.Option("both", "--profile-inputs",
                                                   help="all (testRNN's and DeepGauge's "
                                                        "profile), correct (the correctly "
                                                        "classified inputs: DeepStellar's) or "
                                                        "both."),
                kind: Optional[str] = KIND_OPT, json_out: bool = JSON_OPT):
    """Build the training profiles the profile-based criteria read (testRNN's, DeepStellar's,
    DeepGauge's), saved under the cache by the model's fingerprint. The criteria also build
    them on demand when given --dataset."""
    from ..coverage.profile import build_profile, default_path, fingerprint
    from ..trace import check_model_inputs
    if profile_inputs not in ("all", "correct", "both"):
        raise InputError(f"--profile-inputs must be all, correct or both, got {profile_inputs!r}")
    path = renamed(profile_path, out, "--profile-path", "--out")
    if path and profile_inputs == "both":
        profile_inputs = "all"                     # one file: the profile of all inputs
    checked(kind=kind)
    preflight(model=model, dataset=dataset, kind=kind, outputs=[("--profile-path", path)])
    x, y, what = _load_inputs(dataset, "train", n, None)
    data_kind = _data_kind(dataset, kind)
    m = load_model(model)
    x = check_model_inputs(m, x, f"the inputs ({what})", data_kind)
    started = time.time()
    kinds = ["all", "correct"] if profile_inputs == "both" else [profile_inputs]
    if y is None and "correct" in kinds:
        if profile_inputs == "correct":
            raise InputError("--profile-inputs correct needs the training labels: give a data "
                             "set with labels")
        kinds = ["all"]
    paths = []
    for kind in kinds:
        paths.append(build_profile(m, x, path=path or default_path(m, kind),
                                   source=what + (f"[:{n}]" if n else ""), y=y, inputs=kind,
                                   progress=lambda d, t, k=kind: log(f"profile ({k}) {d:,}/{t:,}")
                                   if d % 2048 < 256 or d == t else None))
    result = {"model": model, "profile": str(paths[0]), "profiles": [str(p) for p in paths],
              "fingerprint": fingerprint(m), "n_inputs": len(x),
              "seconds": round(time.time() - started, 1)}
    if json_out:
        emit(result)
    else:
        log(f"profiles ({', '.join(kinds)}) of {model} over {len(x):,} inputs ({what}) in "
            f"{result['seconds']}s")


@report_app.command("criteria")
def report_criteria_cmd(
    out_dir: Optional[str] = typer.Option(None, "--out-dir", help="Output folder (default: "
                                                                  "reports/criteria)."),
    out: Optional[str] = OUT_OPT,
    models: Optional[str] = typer.Option(None, "--models", help="Comma-separated MNIST models "
                                         "(default: the four shipped ones)."),
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
    folder = renamed(out_dir, out, "--out-dir", "--out") or "reports/criteria"
    checked(n_clean=n_clean, n_seeds=n_seeds, n_suites=n_suites, n_profile=n_profile)
    suite_sizes = tuple(numbers(sizes, "--sizes", int) or ())
    if not suite_sizes or min(suite_sizes) < 1:
        raise InputError(f"--sizes must be suite sizes of at least 1, got {sizes!r}")
    for method in names(methods, "--methods") or ():
        generator_class(method)                 # an unknown method: its one line, now
    preflight(models=names(models, "--models") or (), folders=[("--out-dir", folder)])
    result = build_criteria(Path(folder), tuple(names(models, "--models") or MNIST_MODELS),
                            progress=log, n_clean=n_clean, n_seeds=n_seeds,
                            sizes=suite_sizes,
                            n_suites=n_suites, n_profile=n_profile,
                            methods=tuple(names(methods, "--methods") or ()))
    if json_out:
        emit(result)
    else:
        log(f"wrote {', '.join(result['files'])}")
