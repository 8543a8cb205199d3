"""`rnncon campaign` (find a model's faults within a budget, guided by a criterion),
`rnncon check` (the CI gate: coverage and fault bounds, JUnit XML and an HTML report) and
`rnncon report campaign` (every guide against the unguided baseline). docs/campaign.md."""
from __future__ import annotations

import signal
import time
from contextlib import contextmanager
from pathlib import Path
from typing import List, Optional

import typer

from ..coverage import CRITERIA
from ..errors import InputError, RNNConError
from ..io import atomic_write_text, check_writable
from .common import (DECLARED, EXIT_FAILED, EXIT_INTERNAL, EXIT_PASSED, JSON_OPT, PARAM_OPT,
                     RAY_OPT, RUNS_DIR_OPT, SEED_INPUTS_OPT, SEED_LABELS_OPT, app, checked,
                     declared_values, emit, error_exit_code, internal_log, log, names,
                     preflight, report_app, seed_inputs, store)

MODEL_OPT = typer.Option(..., "--model", help="Shipped model name or .keras path.")
DATASET_OPT = typer.Option(None, "--dataset", help="Seeds from this data set's test split: a "
                                                   "name or your own .npz (default: the "
                                                   "model's).")
BUDGET_OPT = typer.Option("10m", "--budget", help="How long: 10m, 90s, 1h, or model calls "
                                                  "such as 5000calls.")
GUIDE_HELP = (f"A coverage criterion (one of {', '.join(CRITERIA.names())}; `rnncon criteria` "
              f"lists their parameters), a signal beyond coverage (gini, margin, lsa, dsa, "
              f"diversity: docs/prioritize.md), or an unguided baseline: none (keeps every "
              f"mutant predicted right) or faults (keeps only the new distinct faults).")
SEEDS_OPT = typer.Option(None, "--seeds", help="The first N test inputs the model predicts "
                                               "right (default: 1000 for images and "
                                               "sequences, 100 for text).")
REPORT_SEEDS_OPT = typer.Option(100, "--seeds", help="The first N test inputs each model "
                                                     "predicts right.")
EPILOG = ("Mutation and loop parameters follow as --NAME VALUE (e.g. --max-linf 0.2 "
          "--max-changed 0.02 --mutations pixel,affine,gradient --parents 8 --mutants 8); the "
          "guide's own as --guide-param NAME=VALUE. docs/campaign.md lists them.")
VALIDITY_OPT = typer.Option("default", "--validity-checks", help="The checks a fault must pass to "
                            "count as valid (a reader would still give it its seed's label): "
                            "default (images and sequences: the data set's autoencoder and "
                            "reference classifier, fitted once; text: the reader checks of "
                            "each edit), off, or names (`rnncon validity list`).")
REFERENCE_OPT = typer.Option(None, "--reference-model", help="Your own reference classifier "
                             "(.keras) instead of the fitted one.")
_JSON_KEYS = ("run_id", "guide", "model", "budget", "seeds", "seconds", "calls", "batches",
              "coverage_start", "coverage", "fault_classes", "fault_roots", "valid_faults",
              "invalid_faults", "valid_pairs", "distinct_faults", "distinct_pairs",
              "faults_total", "queue", "overhead", "faults_per_minute", "validity",
              "validity_share", "memory_mb", "stopped", "resumed_from")


def headline(out: dict) -> str:
    """The figures a reader takes away: fault classes of valid faults and the seeds behind
    them first, the raw count of distinct faults (abstract states) second."""
    if out.get("fault_classes") is None:          # campaigns before validity
        return f"{out['distinct_faults']:,} distinct faults ({out['distinct_pairs']} pairs)"
    return (f"{out['fault_classes']:,} fault classes of {out['valid_faults']:,} valid faults "
            f"from {out['fault_roots']:,} seeds ({out['valid_pairs']} (true, predicted) pairs; "
            f"{out['invalid_faults']:,} invalid faults set aside; {out['distinct_faults']:,} "
            f"distinct faults in all, valid or not)")


def _guide_params(guide: str, pairs: list[str] | None) -> dict:
    from ..coverage import CRITERIA
    if not pairs:
        return {}
    if guide not in CRITERIA:
        raise InputError(f"--guide-param: guide {guide!r} takes no parameters")
    return declared_values(CRITERIA[guide].params, [], pairs, f"criterion {guide!r}",
                           lambda: set())


def _params(ctx: typer.Context, pairs: list[str] | None) -> dict:
    from ..campaign import CAMPAIGN_PARAMS
    from ..campaign.mutations import check_family_names
    values = declared_values(CAMPAIGN_PARAMS, ctx.args, pairs, "a campaign", lambda: set())
    check_family_names(values.get("mutations"))
    return values


@contextmanager
def _interruptible():
    """Ctrl-C stops the campaign at the end of its batch (checkpointed, resumable) instead of
    killing it; a second Ctrl-C interrupts at once."""
    asked = []

    def handler(signum, frame):
        if asked:
            raise KeyboardInterrupt
        asked.append(True)
        log("stopping after this batch (Ctrl-C again to interrupt now)…")
    try:
        old = signal.signal(signal.SIGINT, handler)
    except ValueError:              # not the main thread: no signal handling
        old = None
    try:
        yield lambda: bool(asked)
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)


def _ray_runtime():
    """The Ray runtime of the jobs layer (started only if a campaign asks for workers, or
    resumes one that had them)."""
    from ..jobs.distributed import runtime
    return runtime


@app.command("campaign", context_settings=DECLARED, epilog=EPILOG)
def campaign_cmd(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(None, "--model", help="Shipped model name or .keras "
                                                              "path (not with --resume)."),
    dataset: Optional[str] = DATASET_OPT,
    budget: Optional[str] = typer.Option(None, "--budget", help="How long: 10m (default), 90s, "
                                         "1h, or model calls such as 5000calls; with --resume "
                                         "the total, including what the run spent."),
    guide: str = typer.Option("rconc", "--guide", help=GUIDE_HELP),
    seeds: Optional[int] = SEEDS_OPT,
    inputs: Optional[str] = SEED_INPUTS_OPT,
    labels: Optional[str] = SEED_LABELS_OPT,
    seed: int = typer.Option(0, "--seed", help="Random seed (same seed and budget in calls: "
                                               "the same campaign)."),
    guide_param: Optional[List[str]] = typer.Option(None, "--guide-param",
                                                    help="NAME=VALUE: a parameter of the guide "
                                                         "(repeatable)."),
    param: Optional[List[str]] = PARAM_OPT,
    resume: Optional[str] = typer.Option(None, "--resume", help="Go on from this campaign "
                                                                "run's last checkpoint."),
    workers: Optional[int] = typer.Option(None, "--workers", help="One queue per Ray worker "
                                          "(states merged); 1 gives one process's results."),
    ray_address: Optional[str] = RAY_OPT,
    validity_checks: str = VALIDITY_OPT,
    reference_model: Optional[str] = REFERENCE_OPT,
    runs_dir: Optional[str] = RUNS_DIR_OPT,
    json_out: bool = JSON_OPT,
):
    """Find the model's faults within a budget, guided by a coverage criterion (or none); the
    run goes to the run store, checkpointed after every batch (Ctrl-C stops it resumably;
    `rnncon runs --cancel RUN_ID` from elsewhere)."""
    from ..campaign import guide_names, parse_budget, run_campaign
    from ..campaign.record import campaign_budget
    if resume is None and model is None:
        raise InputError("give --model NAME (or --resume RUN_ID to go on with a campaign)")
    if resume is not None and (ctx.args or param or guide_param or inputs or labels):
        raise InputError("--resume takes the run's own settings: give only --budget (and "
                         "--workers) with it")
    checked(seed=seed, seeds=seeds, workers=workers)
    x, y, _ = seed_inputs(inputs, labels, dataset)
    if guide not in guide_names():
        raise InputError(f"unknown guide {guide!r}; choose one of {', '.join(guide_names())}")
    params = _params(ctx, param) if resume is None else {}
    gparams = _guide_params(guide, guide_param) if resume is None else None
    if budget is not None:
        budget = parse_budget(budget)          # checked first, parsed once: a Budget from here
    preflight(model=model, models=[reference_model] if reference_model else (), dataset=dataset)
    runs = store(runs_dir)
    if resume is not None:
        from ..campaign.run import check_resumable
        check_resumable(runs, resume)         # a damaged checkpoint: before any work
    budget = campaign_budget(budget, runs.get(resume) if resume else None)   # parsed once
    unit = budget.unit
    with _interruptible() as interrupted:
        out = run_campaign(
            model, dataset, guide=guide, budget=budget, seeds=seeds, seed=seed, inputs=x,
            labels=y, guide_params=gparams, store=runs, should_stop=interrupted, resume=resume,
            workers=workers or 0, ray_address=ray_address, ray_runtime=_ray_runtime(), log=log,
            progress=_progress_log(unit), validity_checks=validity_checks,
            reference_model=reference_model, **params)
    if json_out:
        emit({k: out.get(k) for k in _JSON_KEYS})
        return
    log(f"run {out['run_id']}: {headline(out)}; {out['faults_total']:,} faulty inputs in "
        f"{out['seconds']:.0f} s and {out['calls']:,} model calls from {out['seeds']:,} seeds; "
        f"coverage {out['coverage_start']:.4f} -> {out['coverage']:.4f} ({out['guide']}); "
        f"queue {out['queue']}")
    if seeds and out["seeds"] < seeds:
        log(f"note: {out['seeds']:,} seeds, not {seeds:,}: the model predicts only that many of "
            f"the inputs right")


def _progress_log(unit: str):
    from ..runs import Run
    last = [0.0]

    def report(done, total):
        if time.monotonic() - last[0] > 10:
            last[0] = time.monotonic()
            log(f"[campaign] {Run.count_text(done, total, unit)}")
    return report


@app.command("check", context_settings=DECLARED, epilog=EPILOG)
def check_cmd(
    ctx: typer.Context,
    model: str = MODEL_OPT,
    dataset: Optional[str] = DATASET_OPT,
    min_coverage: Optional[List[str]] = typer.Option(None, "--min-coverage",
                                                     help="CRITERION=RATE: fail below it "
                                                          "(repeatable or comma separated)."),
    max_faults: Optional[int] = typer.Option(None, "--max-faults", help="Fail when the "
                                             "campaign finds more faults (counted as "
                                             "--count says)."),
    count: str = typer.Option("classes", "--count", help="What --max-faults counts: classes "
                              "(fault classes of valid faults), valid (valid distinct "
                              "faults) or all (every distinct fault, valid or not)."),
    validity_checks: str = VALIDITY_OPT,
    reference_model: Optional[str] = REFERENCE_OPT,
    budget: str = typer.Option("2m", "--budget", help="The campaign's budget (2m, 500calls)."),
    guide: Optional[str] = typer.Option(None, "--guide", help="Default: the first criterion of "
                                        "--min-coverage, else none."),
    seeds: Optional[int] = SEEDS_OPT,
    inputs: Optional[str] = SEED_INPUTS_OPT,
    labels: Optional[str] = SEED_LABELS_OPT,
    seed: int = typer.Option(0, "--seed"),
    junit: Optional[str] = typer.Option(None, "--junit", help="Write JUnit XML here."),
    html: Optional[str] = typer.Option(None, "--html", help="Write the HTML report here "
                                       "(default: beside --junit, else rnncon-check.html)."),
    param: Optional[List[str]] = PARAM_OPT,
    runs_dir: Optional[str] = RUNS_DIR_OPT,
    json_out: bool = JSON_OPT,
):
    """The CI gate: run a campaign, check coverage and fault bounds, write JUnit XML and the
    HTML report. Exit codes: 0 every bound passed, 1 a bound failed, 2 a usage or input error,
    3 an internal error; the JUnit file records which."""
    t0 = time.perf_counter()
    if junit is not None:
        check_writable(junit, "--junit")         # first: what follows can be recorded there
    try:
        passed = _check(ctx, t0, model=model, dataset=dataset, min_coverage=min_coverage,
                        max_faults=max_faults, count=count, validity_checks=validity_checks,
                        reference_model=reference_model, budget=budget, guide=guide,
                        seeds=seeds, inputs=inputs, labels=labels, seed=seed, junit=junit,
                        html=html, param=param, runs_dir=runs_dir, json_out=json_out)
    except Exception as e:
        if junit is not None:
            _junit_error(junit, e, time.perf_counter() - t0, model)
        raise
    if not passed:
        raise typer.Exit(EXIT_FAILED)


def _junit_error(junit: str, e: Exception, seconds: float, model) -> None:
    """The JUnit file of a check that could not run: its one line and exit code (2 input,
    130 stopped, 3 internal: the message names the log ``main`` writes the traceback to)."""
    from ..reports.campaign import junit_error_xml
    if isinstance(e, RNNConError):
        code, message = error_exit_code(e), " ".join(str(e).split())
    else:
        code, message = EXIT_INTERNAL, (f"internal error ({type(e).__name__}); the traceback "
                                        f"is in {internal_log()}")
    try:
        atomic_write_text(Path(junit), junit_error_xml(message, code, seconds, model))
    except OSError:
        pass                    # the line on stderr still says it


def _check(ctx, t0, *, model, dataset, min_coverage, max_faults, count, validity_checks,
           reference_model, budget, guide, seeds, inputs, labels, seed, junit, html, param,
           runs_dir, json_out) -> bool:
    """The gate's work, every argument checked first; True when every bound passed."""
    from ..campaign import parse_budget, run_campaign
    from ..reports.campaign import campaign_html, check_bounds, junit_xml, parse_bounds
    bounds = parse_bounds(min_coverage)
    if not bounds and max_faults is None:
        raise InputError("give at least one bound: --min-coverage CRITERION=RATE or "
                         "--max-faults N")
    if max_faults is not None and max_faults < 0:
        raise InputError(f"--max-faults must be 0 or more, got {max_faults}")
    from ..reports.campaign import FAULT_COUNTS
    if count not in FAULT_COUNTS:
        raise InputError(f"--count {count!r}: choose one of {', '.join(FAULT_COUNTS)}")
    guide = guide or next(iter(bounds), "none")
    budget = parse_budget(budget)
    checked(seed=seed, seeds=seeds)
    html_path = Path(html) if html else (Path(junit).with_suffix(".html") if junit
                                         else Path("rnncon-check.html"))
    preflight(model=model, models=[reference_model] if reference_model else (),
              dataset=dataset, outputs=[("--html", html_path)])
    x, y, _ = seed_inputs(inputs, labels, dataset)
    params = _params(ctx, param)
    runs = store(runs_dir)
    with _interruptible() as interrupted:
        out = run_campaign(model, dataset, guide=guide, budget=budget, seeds=seeds, seed=seed,
                           inputs=x, labels=y, store=runs, should_stop=interrupted, log=log,
                           validity_checks=validity_checks, reference_model=reference_model,
                           **params)
    info = runs.get(out["run_id"])
    from ..campaign.prepare import load_seeds
    keras_model = load_seeds(model, dataset, 1, x, y)[0]
    table = check_bounds(info, keras_model, bounds, max_faults, count)
    atomic_write_text(html_path, campaign_html(info, table))
    if junit:
        atomic_write_text(Path(junit), junit_xml(table, info, time.perf_counter() - t0))
    failed = table[~table["passed"].astype(bool)]
    if json_out:
        emit({"run_id": info.run_id, "passed": failed.empty, "checks": table.to_dict("records"),
              "junit": junit, "html": str(html_path), "exit_code": EXIT_FAILED if len(failed)
              else EXIT_PASSED})
    log(f"run {info.run_id}: {headline(out)}")
    for r in table.itertuples():
        log(f"{'PASS' if r.passed else 'FAIL'} {r.check}: measured {r.measured:.4g}")
    log(f"report {html_path}" + (f", JUnit {junit}" if junit else ""))
    return failed.empty


@report_app.command("campaign", context_settings=DECLARED)
def report_campaign_cmd(
    ctx: typer.Context,
    models: Optional[str] = typer.Option(None, "--models", help="Comma separated (default: the "
                                         "four MNIST models and imdb-lstm)."),
    guides: Optional[str] = typer.Option(None, "--guides", help="Comma separated (default: "
                                         "rconc,nc,kmnc,state,bc and the unguided "
                                         "baselines none,faults)."),
    repeats: int = typer.Option(5, "--repeats", help="Campaigns per (model, guide)."),
    budget: str = typer.Option("30s", "--budget", help="Budget of each campaign: 30s, "
                               "8000calls, or 8000calls,imdb-lstm=1500calls (per model)."),
    seeds: int = REPORT_SEEDS_OPT,
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Seeds from this data set's "
                                          "test split (a name or your own .npz; default: each "
                                          "model's)."),
    out_dir: str = typer.Option("reports/campaign", "--out-dir"),
    param: Optional[List[str]] = PARAM_OPT,
    runs_dir: Optional[str] = RUNS_DIR_OPT,
    json_out: bool = JSON_OPT,
):
    """Distinct faults in a fixed budget for every guide against the unguided baselines none
    and faults, with 95 % intervals (rows already in OUT_DIR/runs.csv are kept: a stopped
    report goes on)."""
    from ..reports.campaign import build_campaign
    checked(repeats=repeats, seeds=seeds)
    preflight(models=names(models, "--models") or (), dataset=dataset,
              folders=[("--out-dir", out_dir)])
    rep = build_campaign(models=names(models, "--models"), guides=names(guides, "--guides"),
                         repeats=repeats, budget=budget, seeds=seeds, dataset=dataset,
                         out_dir=out_dir,
                         store=store(runs_dir), log=log, **_params(ctx, param))
    if json_out:
        emit(rep)
    else:
        log(f"wrote {rep['files']}")
