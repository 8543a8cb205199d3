"""`rnncon generate` (one stored run of one strategy) and `rnncon report generation`."""
from __future__ import annotations

import typer

from . import app, emit, log, report_app
from ..errors import InputError

_JSON_KEYS = ("run_id", "method", "model", "n_seeds", "n_adversarial", "adv_rate", "avg_l2",
              "avg_l1", "avg_linf", "seconds", "outputs")


def _params(method: str, **opts) -> dict:
    """The options that apply to ``method``, leaving out the ones not given (None)."""
    from ..generate import generator_class
    kind = generator_class(method).input_kind
    wanted = {
        "rconc": ("target", "k", "threshold", "granularity", "normalize", "values", "step",
                  "iterations", "constraint", "stop_on_target", "pool", "short"),
        "nc": ("target", "k", "threshold", "step", "iterations", "constraint", "stop_on_target",
               "pool", "short"),
        "rnntest": ("target", "k", "step", "iterations", "constraint", "lambda_state", "pool",
                    "short"),
        "differential": ("step", "iterations", "constraint", "lambda1", "lambda2"),
        "fgsm": ("eps", "constraint"),
        "pgd": ("eps", "step", "iterations", "constraint"),
        "noise": ("l2",),
    }.get(method, ("max_changes", "vocab", "constraints") if kind == "text" else ())
    if kind == "text" and opts.get("constraint") is not None:   # text: reader | none
        opts["constraints"] = opts.pop("constraint")
    given = {k: v for k, v in opts.items() if v is not None}
    ignored = sorted(set(given) - set(wanted))
    if ignored:
        log(f"note: {', '.join('--' + k.replace('_', '-') for k in ignored)} does not apply to "
            f"method {method!r} and is ignored")
    return {k: given[k] for k in wanted if k in given}


@app.command("generate")
def generate_cmd(
    model: str = typer.Option(..., "--model", help="Shipped model name or .keras path."),
    method: str = typer.Option("rconc", "--method",
                               help="rconc|nc|rnntest|differential|fgsm|pgd|noise "
                                    "(text models: eda|synonym-gradient)"),
    target: str = typer.Option(None, "--target", help="random | LAYER | dense (coverage "
                                                      "methods)"),
    constraint: str = typer.Option(None, "--constraint", help="none|light|occlusion|blackout; "
                                   "text methods: reader (default) | none"),
    seeds: int = typer.Option(100, "--seeds", help="Number of seeds: the first N test inputs "
                                                   "the model predicts right."),
    dataset: str = typer.Option("", "--dataset", help="Seeds from this data set's test split "
                                                      "(default: the model's)."),
    inputs: str = typer.Option("", "--inputs", help="Your own seed inputs (.npy), with "
                                                    "--labels."),
    labels: str = typer.Option("", "--labels", help="Their class labels (.npy, one int per "
                                                    "input)."),
    seed: int = typer.Option(0, "--seed", help="Random seed (same seed, same run)."),
    k: int = typer.Option(None, "--k", help="Contributions/neurons activated at once."),
    threshold: float = typer.Option(None, "--threshold", help="Activation threshold."),
    granularity: str = typer.Option(None, "--granularity", help="unit | edge (rconc)."),
    normalize: str = typer.Option(None, "--normalize", help="step (default) | layer | model "
                                                            "(rconc's normalization scope)."),
    values: str = typer.Option(None, "--values", help="abs (default) | signed (rconc; model + "
                                                      "signed is Eq. 3 as written)."),
    step: float = typer.Option(None, "--step", help="Per-pixel RMS change per iteration."),
    iterations: int = typer.Option(None, "--iterations", help="Iteration budget per seed."),
    stop_on_target: bool = typer.Option(None, "--stop-on-target/--no-stop-on-target",
                                        help="Also stop a seed once its targets are active."),
    pool: str = typer.Option(None, "--pool", help="auto (default): set where the seeds leave "
                                                  "k items uncovered, else seed; set: items no "
                                                  "seed activates; seed: items the seed leaves "
                                                  "inactive."),
    short: str = typer.Option(None, "--short", help="error (default) | lowest: when a seed "
                                                    "leaves fewer than k items inactive."),
    eps: float = typer.Option(None, "--eps", help="L-infinity radius (fgsm, pgd)."),
    l2: float = typer.Option(None, "--l2", help="L2 norm of the noise (noise)."),
    models: str = typer.Option("", "--models", help="Other models, comma separated "
                                                    "(differential)."),
    lambda1: float = typer.Option(None, "--lambda1", help="DeepXplore's lambda1."),
    lambda2: float = typer.Option(None, "--lambda2", help="DeepXplore's lambda2."),
    lambda_state: float = typer.Option(None, "--lambda-state", help="RNN-Test's state weight."),
    max_changes: int = typer.Option(None, "--max-changes", help="Most words changed (text)."),
    vocab: str = typer.Option(None, "--vocab", help="The vocabulary of a text model (a JSON "
                                                    "saved by data.Vocabulary.save; default: "
                                                    "the IMDB models')."),
    batch_size: int = typer.Option(None, "--batch-size", help="Seeds per batch (partial "
                                                              "outputs are saved after each)."),
    runs_dir: str = typer.Option("", "--runs-dir", help="Run store (default: RNNCON_RUNS or "
                                                        "./runs)."),
    workers: int = typer.Option(0, "--workers", help="Split the seeds over N Ray workers (a "
                                                     "local runtime); the same inputs as one "
                                                     "process."),
    ray_address: str = typer.Option("", "--ray-address", help="Join this Ray cluster instead."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
):
    """Generate one test input per seed with one strategy; the run goes to the run store."""
    from ..generate import run_generation
    from ..runs import RunStore
    from . import read_npy
    if bool(inputs) != bool(labels):
        raise InputError("give --inputs X.npy and --labels Y.npy together (one label per input)")
    if inputs and dataset:
        raise InputError("give either --dataset NAME or --inputs X.npy --labels Y.npy, not both")
    x = read_npy(inputs, "--inputs") if inputs else None
    y = read_npy(labels, "--labels") if labels else None
    if vocab:
        from ..data import Vocabulary
        try:
            Vocabulary.load(vocab)
        except OSError:
            raise InputError(f"--vocab: no such file: {vocab}") from None
        except (ValueError, KeyError, TypeError):
            raise InputError(f"--vocab {vocab} is not a vocabulary saved by "
                             f"rnncon_core.data.Vocabulary.save") from None
    store = RunStore(runs_dir or None)      # an unusable store fails before any work
    params = _params(method, target=target, constraint=constraint, k=k, threshold=threshold,
                     granularity=granularity, normalize=normalize, values=values, step=step, iterations=iterations,
                     stop_on_target=stop_on_target, pool=pool, short=short, eps=eps, l2=l2, lambda1=lambda1,
                     lambda2=lambda2, lambda_state=lambda_state, max_changes=max_changes,
                     vocab=vocab)
    others = [m.strip() for m in models.split(",") if m.strip()]
    if method == "differential" and not others:
        from ..zoo import ARCHITECTURES, shipped_models
        ds = ARCHITECTURES[model].dataset if model in ARCHITECTURES else None
        others = [m for m in shipped_models() if m != model and m in ARCHITECTURES
                  and ARCHITECTURES[m].dataset == ds]
        log(f"differential: comparing with {', '.join(others) or 'no other model'}")
    out = run_generation(model, method, seeds, seed=seed, others=others, batch_size=batch_size,
                         dataset=dataset or None, inputs=x, labels=y, store=store,
                         progress=lambda d, t: log(f"[{method}] {d}/{t} seeds"),
                         workers=workers, ray_address=ray_address or None, **params)
    if json_out:
        emit({key: out.get(key) for key in _JSON_KEYS} | {
            k: v for k, v in out.items() if k in ("avg_words_changed", "adv_per_second")})
        return
    fmt = lambda v: "-" if v is None else f"{v:.3f}"   # noqa: E731
    norms = (f"avg words changed {fmt(out.get('avg_words_changed'))}"
             if "avg_words_changed" in out else
             f"avg L2 {fmt(out['avg_l2'])}, L1 {fmt(out['avg_l1'])}, Linf {fmt(out['avg_linf'])}")
    log(f"run {out['run_id']}: {out['n_adversarial']}/{out['n_seeds']} adversarial "
        f"({100 * out['adv_rate']:.1f} %), {norms}, {out['seconds']:.1f} s "
        f"({out['adv_per_second']:.1f} adv/s); outputs {out['outputs']}")


@report_app.command("generation")
def report_generation_cmd(
    seeds: int = typer.Option(500, "--seeds", help="Seeds per model (the paper: 500)."),
    other_seeds: int = typer.Option(None, "--other-seeds", help="Seeds for the rows other than "
                                    "RNNCon-Test (Random) and RNN-Test (default: --seeds)."),
    models: str = typer.Option("", "--models", help="Comma separated (default: the four MNIST "
                                                    "models that are shipped)."),
    out_dir: str = typer.Option("reports/generation", "--out-dir"),
    iterations: int = typer.Option(None, "--iterations", help="Iteration budget per seed."),
    runs_dir: str = typer.Option("", "--runs-dir"),
    json_out: bool = typer.Option(False, "--json"),
):
    """Tables 2, 3 and 4 and the t-SNE data of Figure 10, measured, beside the paper's."""
    from ..reports.generation import build_generation
    from ..runs import RunStore
    rep = build_generation(n_seeds=seeds,
                           models=[m.strip() for m in models.split(",") if m.strip()] or None,
                           out_dir=out_dir, iterations=iterations,
                           store=RunStore(runs_dir or None), log=log,
                           other_seeds=other_seeds)
    if json_out:
        emit(rep)
    else:
        log(f"wrote {rep['files']}")
