"""`rnncon prioritize` (which inputs to inspect first) and `rnncon report prioritization`."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..data import load_dataset
from ..errors import InputError
from ..zoo import load_model, model_datasets, with_steps
from .common import (JSON_OPT, NAME_OPT, RUNS_DIR_OPT, TAGS_OPT, app, checked, emit, log, names,
               preflight, read_labels, read_npy, report_app, store)

BY_HELP = ("Signals, comma separated: gini, margin, entropy, lsa, dsa, deepstate, "
           "<criterion>-total, <criterion>-additional (every criterion of `rnncon criteria`), "
           "random. docs/prioritize.md defines each.")


def _inputs(model: str, dataset, split, n, inputs, labels):
    """(keras model, x, y or None, x_train, y_train, description)."""
    from ..trace import check_model_inputs
    if (dataset is None) == (inputs is None):
        raise InputError("give either --dataset NAME or --inputs X.npy (one of them)")
    if labels is not None and inputs is None:
        raise InputError("--labels goes with --inputs (a data set has its own labels)")
    checked(n=n, split=split)
    m = load_model(model)
    x_train = y_train = what_train = None
    if inputs is not None:
        x = read_npy(inputs, "--inputs")
        y = read_labels(labels, len(x)) if labels is not None else None
        what = str(Path(inputs))
        fits = model_datasets(model, m)
        if fits:                                   # LSA / DSA / profiles: its training split
            ds = load_dataset(fits[0])
            x_train, y_train = ds.x_train, ds.y_train
            what_train = fits[0]
    else:
        ds = load_dataset(dataset)
        x, y = ds.split(split)
        x_train, y_train, what = ds.x_train, ds.y_train, f"{dataset} {split} split"
    if n:
        x, y = x[:n], None if y is None else y[:n]
    x = check_model_inputs(m, x, f"the inputs ({what})")
    return with_steps(m, x.shape[1]), x, y, x_train, y_train, what, what_train


def _profiled(signal: str) -> bool:
    """Whether a signal reads the training split (lsa, dsa, a profiled criterion's)."""
    from ..coverage import needs_profile
    from ..prioritize import criterion_of
    crit = criterion_of(signal)
    return signal in ("lsa", "dsa") or (crit is not None and needs_profile(crit[0]))


@app.command("prioritize")
def prioritize_cmd(model: str = typer.Option(..., "--model", help="Shipped model name or a "
                                                                   ".keras file."),
                   dataset: Optional[str] = typer.Option(None, "--dataset", help="A data set "
                                                         "(its --split is ranked; its "
                                                         "training split profiles lsa, dsa "
                                                         "and the profiled criteria)."),
                   split: str = typer.Option("test", "--split", help="train or test."),
                   n: Optional[int] = typer.Option(None, "--n", help="Rank the first N "
                                                                     "inputs."),
                   inputs: Optional[str] = typer.Option(None, "--inputs", help="Your own "
                                                        "inputs (.npy) instead of a data set."),
                   labels: Optional[str] = typer.Option(None, "--labels", help="Their labels "
                                                        "(.npy): with them APFD and the share "
                                                        "of faults found are measured."),
                   by: str = typer.Option("gini,margin,entropy,random", "--by", help=BY_HELP),
                   repeats: int = typer.Option(20, "--repeats", help="Random tie-breaks (and "
                                                                     "random orders) per "
                                                                     "signal."),
                   seed: int = typer.Option(0, "--seed", help="Seed of the first repeat."),
                   n_profile: int = typer.Option(2000, "--n-profile", help="Training inputs "
                                                 "lsa / dsa and the profiled criteria are "
                                                 "profiled from (0: all)."),
                   runs_dir: Optional[str] = RUNS_DIR_OPT, name: Optional[str] = NAME_OPT,
                   tags: Optional[str] = TAGS_OPT, json_out: bool = JSON_OPT):
    """Rank inputs by what would find faults first; with labels, how well each ranking does
    (APFD, share of the misclassified inputs in the first 1 / 5 / 10 %)."""
    from ..prioritize import parse_signals, prioritize, summary_of
    chosen = parse_signals(by)                  # an unknown signal fails before any work
    checked(seed=seed)
    if repeats < 1:
        raise InputError(f"--repeats must be at least 1, got {repeats}")
    if n_profile < 0:
        raise InputError(f"--n-profile must be a count (0: all), got {n_profile}")
    checked(n=n, split=split)
    preflight(model=model, dataset=dataset)
    runs = store(runs_dir).named(name, names(tags, "--tags") or ())
    m, x, y, x_train, y_train, what, what_train = _inputs(model, dataset, split, n, inputs,
                                                          labels)
    if what_train and any(_profiled(s) for s in chosen):
        log(f"note: {', '.join(s for s in chosen if _profiled(s))} read the {what_train} "
            f"training split (the data set these inputs fit)")
    if y is None:
        log("note: no labels: the ranking only (give --labels Y.npy, or --dataset, for APFD)")
    res = prioritize(m, x, y, chosen, x_train=x_train, y_train=y_train, repeats=repeats,
                     seed=seed, n_profile=n_profile, store=runs, model_ref=model, source=what,
                     progress=log)
    summary = {"run_id": res.run_id, "model": model, "inputs": what, **summary_of(res),
               "top10": {s: res.orders[s][:10].tolist() for s in res.signals}}
    if json_out:
        emit(summary)
        return
    log(f"ranking written to run {res.run_id} (ranking.csv, ranking.npz)")
    if res.metrics is None:
        for s in res.signals:
            print(f"{s:>24}  first: {', '.join(map(str, res.orders[s][:10]))}")
        return
    print(f"{len(x):,} inputs ({what}), {int(res.misclassified.sum()):,} misclassified")
    print(f"{'signal':>24}  {'APFD':>22}  {'1 %':>6}  {'5 %':>6}  {'10 %':>6}")
    for r in res.metrics.itertuples():
        band = f" [{r.apfd_lo:.3f}, {r.apfd_hi:.3f}]" if r.apfd_hi - r.apfd_lo > 1e-4 else ""
        print(f"{r.signal:>24}  {r.apfd:.3f}{band:>16}  {r.found_1pct:6.1%}  "
              f"{r.found_5pct:6.1%}  {r.found_10pct:6.1%}")


@report_app.command("prioritization")
def report_prioritization_cmd(
    out_dir: Optional[str] = typer.Option(None, "--out-dir", help="Output folder (default: "
                                                                  "reports/prioritization)."),
    models: Optional[str] = typer.Option(None, "--models", help="Comma-separated names "
                                         "(default: the eight shipped ones)."),
    n_test_mnist: int = typer.Option(1800, "--n-test-mnist", help="MNIST test inputs per "
                                                                  "pool."),
    n_test_imdb: int = typer.Option(400, "--n-test-imdb", help="IMDB test inputs per pool."),
    n_gen_mnist: int = typer.Option(100, "--n-gen-mnist", help="Generated inputs in an MNIST "
                                                               "mixed pool."),
    n_gen_imdb: int = typer.Option(0, "--n-gen-imdb", help="Generated reviews in an IMDB "
                                                           "mixed pool (EDA: ~25 s a seed on "
                                                           "2 cores; 0: test split only)."),
    repeats: int = typer.Option(10, "--repeats", help="Random tie-breaks / orders per "
                                                      "signal."),
    n_profile: int = typer.Option(2000, "--n-profile", help="Training inputs profiled."),
    resume: bool = typer.Option(False, "--resume", help="Keep the models already measured "
                                                        "with the same settings."),
    runs_dir: Optional[str] = RUNS_DIR_OPT, json_out: bool = JSON_OPT,
):
    """APFD and faults found in the first 1 / 5 / 10 % per signal, on the shipped models'
    test splits and mixed pools with generated inputs."""
    from ..reports.prioritization import MODELS, build_prioritization
    checked(repeats=repeats, n_profile=n_profile)
    preflight(models=names(models, "--models") or (),
              folders=[("--out-dir", out_dir or "reports/prioritization")])
    result = build_prioritization(Path(out_dir or "reports/prioritization"),
                                  tuple(names(models, "--models") or MODELS),
                                  n_test_mnist=n_test_mnist, n_test_imdb=n_test_imdb,
                                  n_gen_mnist=n_gen_mnist, n_gen_imdb=n_gen_imdb,
                                  repeats=repeats, n_profile=n_profile, store=store(runs_dir),
                                  progress=log, resume=resume)
    if json_out:
        emit(result)
    else:
        log(f"wrote {', '.join(result['files'])}")
