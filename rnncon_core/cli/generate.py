"""`rnncon generate` (one stored run of one strategy), `rnncon methods` (each strategy's
declared parameters) and `rnncon report generation`."""
from __future__ import annotations

from typing import List, Optional

import typer

from .. import text  # noqa: F401  (its strategies join GENERATORS)
from ..data import Vocabulary
from ..errors import InputError
from ..generate import GENERATORS, generator_class, list_generators
from ..generate.constraints import CONSTRAINTS
from ..zoo import ARCHITECTURES, shipped_models
from .common import (DECLARED, JSON_OPT, NAME_OPT, PARAM_OPT, RAY_OPT, ROOT_OPT, RUNS_DIR_OPT,
               SEED_INPUTS_OPT, SEED_LABELS_OPT, TAGS_OPT, app, checked, declared_values, emit,
               log, names, preflight, report_app, seed_inputs, show_params, store)

_JSON_KEYS = ("run_id", "method", "model", "n_seeds", "n_adversarial", "adv_rate", "avg_l2",
              "avg_l1", "avg_linf", "seconds", "outputs")


def _declared_elsewhere() -> set[str]:
    """Every parameter name (and old name) some registered method declares."""
    return {n for m in list_generators() for p in generator_class(m).params
            for n in (p.name, *p.aliases)}


def method_params(cls, args: list[str], pairs: list[str] | None):
    """A method's declared parameters and, for one that takes an image constraint, the
    parameters the chosen constraint declares (``--constraint occlusion --size 5,5``)."""
    params = cls.params
    if "constraint" not in params:
        return params
    chosen = params["constraint"].default
    for i, token in enumerate(args):
        if token == "--constraint" and i + 1 < len(args):
            chosen = args[i + 1]
        elif token.startswith("--constraint="):
            chosen = token.partition("=")[2]
    for pair in pairs or []:
        if pair.startswith("constraint="):
            chosen = pair.partition("=")[2]
    if chosen not in CONSTRAINTS:
        return params                     # the method's own check names the constraints
    own = CONSTRAINTS.load(chosen).params
    given = {t[2:].partition("=")[0].replace("-", "_") for t in args if t.startswith("--")} \
        | {pair.partition("=")[0].strip().replace("-", "_") for pair in pairs or []}
    for name in sorted(given - set(params.names) - set(own.names)):
        owners = [n for n, c in CONSTRAINTS.classes().items() if name in c.params.names]
        if owners:
            raise InputError(f"--{name.replace('_', '-')} is a parameter of the "
                             f"{' and '.join(owners)} constraint{'s' * (len(owners) > 1)}, but the constraint is "
                             f"{chosen!r}: add --constraint {owners[0]} or leave it out")
    return params.add(*own)


def _check_vocab(path: str) -> None:
    try:
        Vocabulary.load(path)
    except OSError as e:
        raise InputError(f"--vocab {path} cannot be read ({e.strerror or e}): give a "
                         f"vocabulary file saved by rnncon_core.data.Vocabulary.save") from None
    except (ValueError, KeyError, TypeError, AttributeError):
        raise InputError(f"--vocab {path} is not a vocabulary saved by "
                         f"rnncon_core.data.Vocabulary.save") from None


@app.command("generate", context_settings=DECLARED,
             epilog="The method's own parameters follow as --NAME VALUE (or --param NAME=VALUE): "
                    "`rnncon methods [METHOD]` lists them with type, default, range and help "
                    "(e.g. rconc: --target, --k, --threshold, --step, --iterations, "
                    "--constraint, --granularity; text methods: --max-fraction, "
                    "--max-changes, --constraint reader|none, --vocab, ...).")
def generate_cmd(
    ctx: typer.Context,
    model: str = typer.Option(..., "--model", help="Shipped model name or .keras path."),
    method: str = typer.Option("rconc", "--method",
                               help=f"One of {'|'.join(GENERATORS.names())} (`rnncon "
                                    f"methods` says which take images and which text)."),
    seeds: int = typer.Option(100, "--seeds", help="Number of seeds: the first N test inputs "
                                                   "the model predicts right."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Seeds from this data set's "
                                                                  "test split: a name or your "
                                                                  "own .npz (default: the "
                                                                  "model's)."),
    inputs: Optional[str] = SEED_INPUTS_OPT,
    labels: Optional[str] = SEED_LABELS_OPT,
    kind: Optional[str] = typer.Option(None, "--kind", help="image | sequence | text "
                                       "(default: guessed from the model's input shape)."),
    seed: int = typer.Option(0, "--seed", help="Random seed (same seed, same run)."),
    param: Optional[List[str]] = PARAM_OPT,
    models: Optional[str] = typer.Option(None, "--models", help="Other models, comma separated "
                                                                "(differential)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Seeds per batch "
                                             "(partial outputs are saved after each)."),
    runs_dir: Optional[str] = RUNS_DIR_OPT,
    root: Optional[str] = ROOT_OPT,
    workers: Optional[int] = typer.Option(None, "--workers", help="Split the seeds over N Ray "
                                          "workers (a local runtime); the same inputs as one "
                                          "process."),
    ray_address: Optional[str] = RAY_OPT,
    json_out: bool = JSON_OPT,
    name: Optional[str] = NAME_OPT,
    tags: Optional[str] = TAGS_OPT,
):
    """Generate one test input per seed with one strategy; the run goes to the run store."""
    from ..jobs import run_generation
    checked(seeds=seeds, seed=seed, kind=kind, workers=workers, batch_size=batch_size)
    params = declared_values(method_params(generator_class(method), ctx.args, param),
                             ctx.args, param, f"method {method!r}", _declared_elsewhere)
    x, y, source = seed_inputs(inputs, labels, dataset)
    preflight(model=model, models=names(models, "--models") or (), dataset=dataset, kind=kind)
    if params.get("vocab") is not None:
        _check_vocab(params["vocab"])
    runs = store(runs_dir, root).named(name, tags or ())   # an unusable store fails here
    others = _other_models(model, method, models)
    out = run_generation(model, method, seeds, seed=seed, others=others, batch_size=batch_size,
                         dataset=dataset, inputs=x, labels=y, store=runs, kind=kind,
                         inputs_source=source, note=lambda text: log(f"note: {text}"),
                         progress=lambda d, t: log(f"[{method}] {d}/{t} seeds"),
                         workers=workers or 0, ray_address=ray_address, **params)
    if json_out:
        emit(_json_summary(out))
    else:
        _print_run(out)


def _other_models(model: str, method: str, models: str | None) -> list[str]:
    """--models; for a method that compares models (differential) and none given, the other
    shipped models of the same data set."""
    others = names(models, "--models") or []
    if generator_class(method).needs_others and not others:
        ds = ARCHITECTURES[model].dataset if model in ARCHITECTURES else None
        others = [m for m in shipped_models() if m != model and m in ARCHITECTURES
                  and ARCHITECTURES[m].dataset == ds]
        log(f"{method}: comparing with {', '.join(others) or 'no other model'}")
    return others


def _json_summary(out: dict) -> dict:
    """What --json prints: the common keys, and a text run's validity when it has them."""
    return {key: out.get(key) for key in _JSON_KEYS} | {
        k: v for k, v in out.items() if k in ("avg_words_changed", "adv_per_second",
                                              "valid_adv_rate", "checks")}


def _print_run(out: dict) -> None:
    """One summary line: adversarial rate, norms (images) or validity (text), speed, outputs."""
    fmt = lambda v: "-" if v is None else f"{v:.3f}"   # noqa: E731
    if "avg_words_changed" in out:          # a text run: its validity beside the flips
        checks = ", ".join(f"{name} {100 * share:.1f} %" if share is not None else f"{name} -"
                           for name, share in (out.get("checks") or {}).items())
        valid = out.get("valid_adv_rate")
        norms = (f"valid adversarial {'-' if valid is None else f'{100 * valid:.1f} %'} (every "
                 f"substitution passing the checks), substitutions passing {checks or '-'}; "
                 f"avg words changed {fmt(out.get('avg_words_changed'))}")
    else:
        norms = (f"avg L2 {fmt(out['avg_l2'])}, L1 {fmt(out['avg_l1'])}, "
                 f"Linf {fmt(out['avg_linf'])}")
    log(f"run {out['run_id']}: {out['n_adversarial']}/{out['n_seeds']} adversarial "
        f"({100 * out['adv_rate']:.1f} %), {norms}, {out['seconds']:.1f} s "
        f"({out['adv_per_second']:.1f} adv/s); outputs {out['outputs']}")


@app.command("methods")
def methods_cmd(method: Optional[str] = typer.Argument(None, help="One method (default: all)."),
                json_out: bool = JSON_OPT):
    """Each generation method's parameters: type, default, range or choices, help.

    Give them to `rnncon generate` as --NAME VALUE (or --param NAME=VALUE)."""
    chosen = [method] if method else list(list_generators())
    show_params("method", {m: (generator_class(m).input_kind, generator_class(m).params)
                           for m in chosen}, json_out)
    if not json_out and any("constraint" in generator_class(m).params for m in chosen):
        show_params("constraint", {n: ("image", c.params)
                                   for n, c in CONSTRAINTS.classes().items() if len(c.params)},
                    False)


@report_app.command("generation")
def report_generation_cmd(
    seeds: int = typer.Option(500, "--seeds", help="Seeds per model (the paper: 500)."),
    other_seeds: int = typer.Option(None, "--other-seeds", help="Seeds for the rows other than "
                                    "RNNCon-Test (Random) and RNN-Test (default: --seeds)."),
    models: Optional[str] = typer.Option(None, "--models", help="Comma separated (default: "
                                                                "the four MNIST models that "
                                                                "are shipped)."),
    out_dir: str = typer.Option("reports/generation", "--out-dir"),
    iterations: int = typer.Option(None, "--iterations", help="Iteration budget per seed."),
    runs_dir: Optional[str] = RUNS_DIR_OPT,
    root: Optional[str] = ROOT_OPT,
    json_out: bool = JSON_OPT,
):
    """Tables 2, 3 and 4 and the t-SNE data of Figure 10, measured, beside the paper's."""
    from ..reports.generation import build_generation
    checked(seeds=seeds, other_seeds=other_seeds, iterations=iterations)
    preflight(models=names(models, "--models") or (), folders=[("--out-dir", out_dir)])
    rep = build_generation(n_seeds=seeds, models=names(models, "--models"), out_dir=out_dir,
                           iterations=iterations, store=store(runs_dir, root), log=log,
                           other_seeds=other_seeds)
    if json_out:
        emit(rep)
    else:
        log(f"wrote {rep['files']}")
