"""Retraining with generated inputs (the paper's RQ3, Table 6, Figures 13 and 14), measured
fairly.

From the trained weights, the adversarial inputs of a generation run (labelled with their
seeds' labels) are mixed into the training data and the model trains N more epochs; this
repeats R times with different seeds. A control arm trains the same way on as many extra
*clean* training inputs (mixed in the same way), so the gain of the generated inputs is told
apart from the gain of training longer.

The test split is cut three ways, nothing shared (:func:`split_test`): the generation run's
seeds (their perturbed copies are training data now), a validation part that picks the epoch
of each retraining and the best repeat, and an evaluation part for every reported figure.
Robustness is measured three ways: (a) held-out transfer: accuracy of the original, retrained
and control models on adversarial inputs generated against the *original* model from
evaluation seeds (rconc, nc, rnntest, pgd), which no retraining has seen; (b) the adversarial
rate of a fresh white-box run against each model; (c) the clean metrics (accuracy, macro
precision / recall / F1, AUC). Spreads are mean ± std over the repeats with a paired t-test
against the control arm. Everything lands in the run store (kind ``retrain``), the retrained
models too; the shipped models are only ever read.

``run_retraining(...)`` is the one entry point for the CLI and the dashboard.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .errors import InputError
from .params import Interval, IntRange, Param, Params

DEFAULT_EPOCHS = 10
DEFAULT_REPEATS = 10
DEFAULT_MIX = 0.25          # share of each epoch's inputs drawn from the generated ones
TRANSFER_METHODS = ("rconc", "nc", "rnntest", "pgd")
TRANSFER_SEEDS = 500        # evaluation seeds per held-out transfer method (the paper: 500)
SPLIT_SEED = 0              # the validation / evaluation cut is the same for every run
METRICS = ("accuracy", "precision", "recall", "f1", "auc")
ProgressFn = Callable[[dict], None]


# ---------------------------------------------------------------- metrics

def classification_metrics(model, x, y, batch_size: int = 512) -> dict:
    """Accuracy, macro precision / recall / F1 and AUC (one-vs-rest, macro over the classes
    present) of ``model`` on (x, y); a one-unit sigmoid output is treated as binary."""
    from sklearn.metrics import precision_recall_fscore_support, roc_auc_score
    y = np.asarray(y).astype(np.int64).ravel()
    from .zoo import class_probabilities
    probs = np.asarray(model.predict(x, batch_size=batch_size, verbose=0), dtype=np.float64)
    probs = class_probabilities(probs.reshape(len(probs), -1))
    pred = probs.argmax(axis=1)
    # one-vs-rest per class present (two classes: both equal the binary AUC)
    aucs = [roc_auc_score(y == c, probs[:, c]) for c in np.unique(y)
            if 0 < (y == c).sum() < len(y)]
    auc = float(np.mean(aucs)) if aucs else float("nan")
    labels = np.unique(y)
    prec, rec, f1, _ = precision_recall_fscore_support(y, pred, labels=labels, average="macro",
                                                       zero_division=0)
    return {"accuracy": float((pred == y).mean()), "precision": float(prec),
            "recall": float(rec), "f1": float(f1), "auc": auc}


RCONC_GRID = (0.25, 0.5, 0.75)


def rconc_rates(model, x, threshold: float) -> dict:
    """RConC (unit granularity) of the inputs ``x`` on ``model``: ``rconc`` at ``threshold``
    and ``rconc_<t>`` at each threshold of RCONC_GRID (free: no further forward pass)."""
    from .coverage import ContributionCoverage
    cov = ContributionCoverage(model, threshold=threshold)
    for i in range(0, len(x), 250):
        cov.update(x[i:i + 250])
    return {"rconc": float(cov.rate()),
            **{f"rconc_{t}": float(cov.rate(threshold=t)) for t in RCONC_GRID}}


def _spread(values: list[float]) -> dict:
    v = np.asarray(values, dtype=np.float64)
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
            "values": [float(a) for a in v]}


def paired(a: list[float], b: list[float]) -> dict:
    """The spread of a - b over paired repeats and the p-value of a paired t-test (None with
    fewer than two pairs or no variation)."""
    from scipy.stats import ttest_rel
    out = _spread([x - y for x, y in zip(a, b)])
    p = float(ttest_rel(a, b).pvalue) if len(a) > 1 and out["std"] > 0 else float("nan")
    out["p_value"] = None if np.isnan(p) else p
    return out


def accuracy(model, x, y) -> float | None:
    """Share of ``x`` that ``model`` labels ``y`` (None for no inputs)."""
    from .generate.base import predict_proba
    if len(y) == 0:
        return None
    return float((predict_proba(model, x).argmax(1) == np.asarray(y).ravel()).mean())


# ---------------------------------------------------------------- pieces

def compile_for_training(model, learning_rate: float = 1e-4):
    """Compile with a fresh Adam and the loss of the model's output (as zoo.build_model)."""
    import keras
    from .zoo import output_head
    two = output_head(model).kind == "sigmoid"            # one sigmoid unit: two classes
    loss = "binary_crossentropy" if two else "sparse_categorical_crossentropy"
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=loss,
                  metrics=["accuracy"])
    return model


def copy_model(model, learning_rate: float = 1e-4):
    """An independent, compiled copy of ``model`` with its trained weights."""
    import keras
    clone = keras.models.clone_model(model)
    clone.set_weights(model.get_weights())
    return compile_for_training(clone, learning_rate)


def resolve_dataset(model: str, dataset=None, run_config: dict | None = None):
    """The Dataset the model trains on: given, or its architecture's, or the run's."""
    from .data import Dataset, load_dataset
    from .zoo import ARCHITECTURES
    if isinstance(dataset, Dataset):
        return dataset
    name = dataset or (ARCHITECTURES[model].dataset if model in ARCHITECTURES else None) \
        or (run_config or {}).get("dataset")
    if name == "inputs" and not dataset:         # the run's seeds were the user's own arrays
        raise InputError(own_inputs_hint(run_config or {}))
    if not name:
        raise InputError(f"cannot tell which data set {model!r} was trained on: pass "
                         f"dataset='mnist' or the path of your own .npz (CLI: --dataset "
                         f"DATA.npz)")
    return load_dataset(name)


def own_inputs_hint(run_config: dict) -> str:
    """What to pass to retrain a model whose generation run read the user's own arrays."""
    src = run_config.get("inputs_source") or {}
    files = f" ({', '.join(f'{k} {v}' for k, v in src.items())})" if src else ""
    return (f"the generation run read your own inputs{files}, which are only its seeds: "
            f"retraining also needs training data. Save one .npz with numpy.savez('data.npz', "
            f"x_train=..., y_train=..., x_test=<those inputs>, y_test=<their labels>) and pass "
            f"--dataset data.npz (Python: dataset='data.npz'); docs/data.md shows how")


def fit_split(ds, validation_split: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """The part of the training split the shipped image models were fitted on (the tail was
    their validation data, zoo.train_model); text models used the whole split the same way."""
    n_val = int(round(len(ds.y_train) * validation_split))
    return ds.x_train[:len(ds.y_train) - n_val], ds.y_train[:len(ds.y_train) - n_val]


def adversarial_inputs(run, max_inputs: int | None = None) -> dict:
    """The adversarial inputs of a finished (or cancelled) generation run, with their seeds'
    labels and indices: ``{"x", "y", "seed_index", "run_seeds", "split"}`` (``run_seeds``:
    every seed of the run, adversarial or not)."""
    if run.kind != "generate":
        raise InputError(f"run {run.run_id} is a {run.kind!r} run; retraining needs a "
                         f"generation run (`rnncon runs --kind generate`)")
    out = run.load_npz("outputs")
    if out is None or not {"x_gen", "y_seed", "adversarial"} <= set(out):
        raise InputError(f"run {run.run_id} has no outputs.npz with x_gen, y_seed and "
                         f"adversarial ({run.status}); run the generation again")
    mask = out["adversarial"].astype(bool)
    if not mask.any():
        raise InputError(f"run {run.run_id} found no adversarial inputs: nothing to retrain "
                         f"with; generate with more seeds or another method")
    idx = np.flatnonzero(mask)[:max_inputs]
    seeds = out["seed_index"] if "seed_index" in out else np.full(len(mask), -1)
    return {"x": out["x_gen"][idx], "y": out["y_seed"][idx].astype(np.int64),
            "seed_index": seeds[idx].astype(np.int64), "run_seeds": seeds.astype(np.int64),
            "split": run.config.get("split", "test")}


def split_test(ds, adv: dict, seed: int = SPLIT_SEED) -> dict[str, np.ndarray]:
    """The test split cut three ways, nothing shared: ``seeds`` (the generation run's seeds,
    when they are test inputs: their perturbed copies are training data now), then the rest
    halved, stratified by class, into ``validation`` (picks epochs and the best repeat) and
    ``evaluation`` (every reported figure). Sorted index arrays into ``ds.x_test``."""
    y = np.asarray(ds.y_test).ravel()
    used = np.zeros(len(y), dtype=bool)
    if adv["split"] == "test":
        used[adv["run_seeds"][adv["run_seeds"] >= 0]] = True
    rest = np.flatnonzero(~used)
    order = rest[np.lexsort((np.random.default_rng(seed).random(len(rest)), y[rest]))]
    parts = {"seeds": np.flatnonzero(used), "validation": np.sort(order[0::2]),
             "evaluation": np.sort(order[1::2])}
    if min(len(parts["validation"]), len(parts["evaluation"])) < 2:
        raise InputError(f"the test split has {len(y)} inputs and the generation run used "
                         f"{int(used.sum())} of them as seeds: too few left to validate and "
                         f"evaluate on; generate from fewer seeds")
    return parts


def describe_split(parts: dict[str, np.ndarray]) -> str:
    return (f"evaluation part of the test split ({len(parts['evaluation'])} inputs; "
            f"{len(parts['validation'])} others validate, {len(parts['seeds'])} were the "
            f"generation run's seeds)")


def _cancel_callback(run, report: Callable[[int], None], every: int = 20):
    import keras

    class Watch(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if run is not None and batch % every == every - 1:
                run.check_cancel()

        def on_epoch_end(self, epoch, logs=None):
            report(epoch + 1)
            if run is not None:
                run.check_cancel()

    return Watch()


def extra_per_epoch(n_fit: int, n_extra: int, mix: float) -> int:
    """How many extra inputs join each epoch: all of them once (``mix`` 0, the paper's
    "add them to the training data"), or as many as make them ``mix`` of the epoch's inputs
    (drawn over and over: every batch holds about that share)."""
    if not 0 <= mix < 1:
        raise InputError(f"mix (share of generated inputs in each batch) must be in [0, 1), "
                         f"got {mix}")
    return max(n_extra, int(round(mix / (1 - mix) * n_fit)))


@dataclass
class Retrained:
    model: object
    validation: list[float] = field(default_factory=list)   # accuracy after each epoch
    best_epoch: int = 0                                      # the epoch whose weights are kept

    @property
    def validation_accuracy(self) -> float | None:
        return self.validation[self.best_epoch - 1] if self.validation else None


def retrain_once(base, x_fit, y_fit, x_extra, y_extra, epochs: int, seed: int,
                 batch_size: int = 128, learning_rate: float = 1e-4, augment: bool = False,
                 mix: float = 0.0, validation=None, callbacks=()) -> Retrained:
    """A copy of ``base`` trained ``epochs`` more epochs on (x_fit + x_extra), the extra
    inputs making ``mix`` of each epoch (:func:`extra_per_epoch`); ``augment`` feeds images
    with the random shifts the shipped image models were trained with. ``validation``
    (x, y): the weights of the epoch with the best accuracy there are kept (the later epoch
    on a tie); without it, the last epoch's."""
    import keras
    from .zoo import shifted_batches
    keras.utils.set_random_seed(seed)
    model = copy_model(base, learning_rate)
    x_extra = np.asarray(x_extra, dtype=x_fit.dtype)
    y_extra = np.asarray(y_extra, dtype=y_fit.dtype)
    n_mix = extra_per_epoch(len(y_fit), len(y_extra), mix) if len(y_extra) else 0
    rng = np.random.default_rng(seed)
    order = np.zeros(0, np.int64)
    out = Retrained(model)
    best_weights = None
    for epoch in range(epochs):
        while len(order) < n_mix:           # every extra input once before any twice
            order = np.concatenate([order, rng.permutation(len(y_extra))])
        pick, order = order[:n_mix], order[n_mix:]
        x = np.concatenate([x_fit, x_extra[pick]])
        y = np.concatenate([y_fit, y_extra[pick]])
        fit = dict(initial_epoch=epoch, epochs=epoch + 1, verbose=0, callbacks=list(callbacks))
        if augment:     # the batches come shuffled
            model.fit(shifted_batches(x, y, batch_size, seed + epoch), shuffle=False, **fit)
        else:
            model.fit(x, y, batch_size=batch_size, shuffle=True, **fit)
        if validation is not None:
            out.validation.append(accuracy(model, *validation))
            if out.validation[-1] >= max(out.validation):
                best_weights, out.best_epoch = model.get_weights(), epoch + 1
    if best_weights is not None:
        model.set_weights(best_weights)
    else:
        out.best_epoch = epochs
    return out


# Adam's rate for retraining: the recipe chosen on validation in the recipe search (mnist-lstm:
# mix 25 % at 3e-4 kept the clean validation accuracy and gained most on held-out rconc inputs;
# reports/retraining/report.md lists every recipe tried)
FINE_TUNE_RATE = 3e-4

# retraining's arguments, declared once: run_retraining checks them, `rnncon retrain` and the
# dashboard's form read them (an InputError names the argument, what it allows, the value)
PARAMS = Params(
    Param("epochs", DEFAULT_EPOCHS, IntRange(1), "More epochs per retraining (the paper: 10)."),
    Param("repeats", DEFAULT_REPEATS, IntRange(1), "Retrainings with different seeds."),
    Param("max_inputs", None, IntRange(1), "Use at most this many adversarial inputs "
                                           "(default: all)."),
    Param("learning_rate", None, Interval(0, math.inf, lo_open=True),
          f"Adam's rate (default: the fine-tuning one, {FINE_TUNE_RATE:g})."),
    Param("mix", DEFAULT_MIX, Interval(0, 1), "Share of each batch drawn from the generated "
                                              "inputs (0: each once per epoch)."),
    Param("seed", 0, IntRange(0), "Random seed (repeat r trains with seed + r)."),
    Param("transfer_seeds", TRANSFER_SEEDS, IntRange(0), "Evaluation seeds per held-out "
                                                         "transfer method (0: skip)."),
    Param("robustness_seeds", 0, IntRange(0), "Seeds of the fresh white-box runs (0: skip)."),
    Param("batch_size", 128, IntRange(1), "Inputs per training batch."),
    Param("coverage_inputs", 500, IntRange(1), "Evaluation inputs whose RConC is measured."),
    Param("threshold", None, Interval(0, 1), "RConC's threshold (default: the data set's)."),
)


def training_defaults(model: str, ds) -> dict:
    """How to continue training the way the shipped model was trained: a fine-tuning rate
    (Adam 3e-4), the random shifts of zoo.train_model for 28 x 28 images, and the validation
    share its card records (that tail of the training split is left out, as there)."""
    from .zoo import read_card
    card = read_card(model) if isinstance(model, str) else None
    return {"learning_rate": FINE_TUNE_RATE,
            "augment": ds.kind == "image" and ds.x_train.shape[1:] == (28, 28),
            "validation_split": float((card or {}).get("validation_split", 0.1))}


# ---------------------------------------------------------------- robustness

def generator_params(config: dict) -> dict:
    """The strategy parameters of a stored generation run, as run_generation takes them: its
    generator's declared parameters (and a constraint's own), read by the declaration. Runs
    stored before the declarations kept the constraint as a dict and rconc's criterion
    settings apart; both read the same."""
    from .generate import generator_class
    gen = dict(config.get("generator") or {})
    cls = generator_class(config.get("method") or gen.get("method"))
    constraint = gen.pop("constraint", None)
    if isinstance(constraint, dict):
        constraint = dict(constraint)
        gen.update(constraint=constraint.pop("name", "none"),
                   **{k: v for k, v in constraint.items() if v is not None})
    elif constraint is not None:
        gen["constraint"] = constraint
    crit = gen.pop("criterion_params", None) or {}
    gen.update({k: v for k, v in crit.items() if k in cls.params})
    if any(k not in cls.params for k in crit):
        gen["criterion_params"] = {k: v for k, v in crit.items() if k not in cls.params}
    run_settings = ("batch_size", "seed", "others", "lexicon")
    return {k: v for k, v in gen.items()
            if k in cls.params or (k in cls.accepted() and k not in run_settings)}


def generation_on_seeds(model: str, keras_model, method: str, seeds: np.ndarray, ds, store,
                        seed: int = 0, should_stop=None, **params) -> str:
    """The id of a finished generation run of ``model`` (``keras_model``, the same file) with
    ``method`` and ``params`` on exactly the test inputs ``seeds``: found in the store, or run
    now."""
    from .jobs import find_generation, run_generation
    seeds = np.asarray(seeds, np.int64)
    found = find_generation(store, model, method, seed_indices=seeds, split="test",
                            dataset=ds.name, seed=seed, keras_model=keras_model, **params)
    if found is not None:
        return found.run_id
    return run_generation(model, method, seed_indices=seeds, split="test", dataset=ds.name,
                          seed=seed, store=store, should_stop=should_stop, **params)["run_id"]


def right_seeds(models: list, x, y, pool: np.ndarray, n: int) -> np.ndarray:
    """The first ``n`` indices of ``pool`` whose inputs (of x, y) every model predicts right."""
    from .generate.base import predict_proba
    ok = np.ones(len(pool), dtype=bool)
    for m in models:
        ok &= predict_proba(m, x[pool]).argmax(1) == np.asarray(y)[pool]
    return pool[ok][:n]


def transfer_sets(model: str, base, ds, pool: np.ndarray, methods, n_seeds: int, store,
                  seed: int = 0, should_stop=None) -> dict:
    """Held-out adversarial inputs: per method, one generation run against the *original*
    model on the first ``n_seeds`` inputs of ``pool`` (evaluation inputs) it predicts right;
    returns ``{method: {"run_id", "n_seeds", "x", "y"}}`` with the adversarial inputs and
    their seeds' labels."""
    seeds = right_seeds([base], ds.x_test, ds.y_test, pool, n_seeds)
    out = {}
    for method in methods:
        rid = generation_on_seeds(model, base, method, seeds, ds, store, seed, should_stop)
        gen = store.get(rid).load_npz("outputs")
        adv = gen["adversarial"].astype(bool)
        out[method] = {"run_id": rid, "n_seeds": int(len(seeds)), "x": gen["x_gen"][adv],
                       "y": gen["y_seed"][adv].astype(np.int64)}
    return out


def fresh_adversarial_rate(models: dict[str, str], source, ds, n_seeds: int, store,
                           should_stop=None, pool: np.ndarray | None = None) -> dict:
    """Adversarial rate of one fresh (white-box) generation run per model, with the method
    and settings of the run ``source``, on the same new seeds for every model: the first
    ``n_seeds`` test inputs of ``pool`` (default: the inputs of its split it did not use) that every
    model predicts right. Returns ``{label: {"run_id", "adv_rate", "n_seeds",
    "n_adversarial"}}``."""
    from .jobs import run_generation
    from .zoo import load_model
    cfg = source.config
    split = "test" if pool is not None else cfg.get("split", "test")
    x_all, y_all = ds.split(split)
    if pool is None:
        used = source.load_npz("outputs") or {}
        pool = np.setdiff1d(np.arange(len(y_all)), used.get("seed_index", np.zeros(0, np.int64)))
    seeds = right_seeds([load_model(m) for m in models.values()], x_all, y_all, pool, n_seeds)
    if len(seeds) == 0:
        raise InputError("no unused seed is predicted right by every model: robustness cannot "
                         "be measured; lower robustness_seeds")
    out = {}
    for label, m in models.items():
        s = run_generation(m, cfg.get("method", "rconc"), seed_indices=seeds, split=split,
                           dataset=ds.name, seed=int(cfg.get("seed", 0)), store=store,
                           others=cfg.get("others", ()), should_stop=should_stop,
                           **generator_params(cfg))
        out[label] = {"run_id": s["run_id"], "adv_rate": s["adv_rate"],
                      "n_seeds": s["n_seeds"], "n_adversarial": s["n_adversarial"]}
    return out


# ---------------------------------------------------------------- the entry point

def default_transfer_methods(ds) -> tuple[str, ...]:
    return TRANSFER_METHODS if ds.kind != "text" else ("synonym-gradient",)


def run_retraining(model: str, from_run: str, epochs: int = DEFAULT_EPOCHS,
                   repeats: int = DEFAULT_REPEATS, *, dataset=None, control: bool = True,
                   max_inputs: int | None = None, learning_rate: float | None = None,
                   augment: bool | None = None, mix: float = DEFAULT_MIX,
                   batch_size: int = 128, seed: int = 0, coverage: bool = True,
                   coverage_inputs: int = 500, threshold: float | None = None,
                   transfer_methods=None, transfer_seeds: int = TRANSFER_SEEDS,
                   robustness_seeds: int = 0, evaluation_inputs: int | None = None,
                   store=None,
                   progress: ProgressFn | None = None, force: bool = False,
                   continue_from: str | None = None) -> dict:
    """Retrain ``model`` (a shipped name or a .keras path) with the adversarial inputs of the
    generation run ``from_run``, ``repeats`` times for up to ``epochs`` epochs each; returns
    the summary (also the run's ``summary.json``) with ``run_id``.

    ``control``: also train the control arm on as many clean training inputs, mixed the same
    way. ``max_inputs``: use at most this many adversarial inputs. ``mix``: the share of each
    epoch's (and so, on average, each batch's) inputs drawn from the extra ones
    (:func:`extra_per_epoch`; 0: each extra input once per epoch, the paper's recipe).
    ``learning_rate`` / ``augment``: None continues as the shipped model was trained (Adam at
    a fine-tuning rate of 3e-4; random shifts for 28 x 28 images), see
    :func:`training_defaults`. The validation part of the test split picks each retraining's
    epoch and the best repeat; the evaluation part gives every reported figure
    (:func:`split_test`).
    ``transfer_methods`` / ``transfer_seeds``: held-out transfer sets generated against the
    original model from that many evaluation seeds per method (0 seeds: skip).
    ``evaluation_inputs``: evaluate (and validate) on a sample of at most this many inputs of
    each part (drawn with the split's seed; None: all): an IMDB model's 12,000-review parts
    take minutes per evaluation on two cores; the summary's ``evaluated_on`` gives the sizes.
    ``robustness_seeds``: > 0 runs fresh white-box generation runs of that many evaluation
    seeds against the original, the best retrained and the best control model.
    ``progress`` gets dict events (stage, repeat, epoch, done, total); the run's progress.json
    is kept current and a cancel request stops the job within a few batches (the run is then
    marked cancelled and keeps its finished repeats). ``force``: retrain with a run generated
    for another model (refused otherwise); a partial run is used with a note.
    ``continue_from``: the id of an earlier retrain run (finished or cancelled) with the same
    settings but fewer repeats: its repeats are kept and only the missing ones train. Repeat r
    trains with seed + r, so they are the repeats this run would have computed.
    """
    from .coverage import default_threshold
    from .generate.base import model_head
    from .runs import RunStore, check_source_run
    from .zoo import load_model
    PARAMS.check("retraining", {"epochs": epochs, "repeats": repeats,
                                "max_inputs": max_inputs, "learning_rate": learning_rate,
                                "mix": mix, "seed": seed, "transfer_seeds": transfer_seeds,
                                "robustness_seeds": robustness_seeds,
                                "batch_size": batch_size, "coverage_inputs": coverage_inputs,
                                "threshold": threshold})
    store = store or RunStore()
    source = store.get(from_run)
    note = check_source_run(source, model, force)   # another model's run: refused unless force
    if note and progress is not None:
        progress({"stage": "check", "message": f"note: {note}", "done": 0, "total": 0})
    adv = adversarial_inputs(source, max_inputs)
    ds = resolve_dataset(model, dataset, source.config)
    base = load_model(model)
    model_head(base).require_classifier("retraining")    # regression, multi-output: refused
    if tuple(base.input_shape[1:]) != tuple(ds.x_test.shape[1:]):
        raise InputError(f"model {model!r} takes inputs {base.input_shape[1:]}, but the data "
                         f"set {ds.name!r} has {ds.x_test.shape[1:]}: pass the right dataset")
    if adv["x"].shape[1:] != ds.x_test.shape[1:]:
        raise InputError(f"the inputs of run {from_run} are shaped {adv['x'].shape[1:]}, not "
                         f"like {ds.name!r} ({ds.x_test.shape[1:]}): wrong run for this model")
    extra_per_epoch(1, 1, mix)      # a bad mix fails before anything runs
    defaults = training_defaults(model, ds)
    learning_rate = defaults["learning_rate"] if learning_rate is None else learning_rate
    augment = defaults["augment"] if augment is None else augment
    methods = tuple(default_transfer_methods(ds) if transfer_methods is None
                    else transfer_methods)
    x_fit, y_fit = fit_split(ds, defaults["validation_split"])
    parts = split_test(ds, adv)
    if evaluation_inputs is not None:
        if evaluation_inputs < 2:
            raise InputError(f"evaluation_inputs must be >= 2 (got {evaluation_inputs})")
        rng = np.random.default_rng(SPLIT_SEED)
        for name in ("validation", "evaluation"):
            if len(parts[name]) > evaluation_inputs:
                parts[name] = np.sort(rng.choice(parts[name], evaluation_inputs,
                                                 replace=False))
    val = (ds.x_test[parts["validation"]], ds.y_test[parts["validation"]])
    x_eval, y_eval = ds.x_test[parts["evaluation"]], ds.y_test[parts["evaluation"]]
    x_cov = x_eval[:coverage_inputs]
    theta = threshold if threshold is not None else default_threshold(ds)
    n_extra = len(adv["y"])
    arms = ["generated", "control"] if control else ["generated"]
    config = {"model": model, "from_run": from_run, "dataset": ds.name, "epochs": epochs,
              "repeats": repeats, "control": control, "max_inputs": max_inputs,
              "n_inputs": n_extra, "learning_rate": learning_rate, "augment": augment,
              "mix": mix, "batch_size": batch_size, "seed": seed, "coverage": coverage,
              "threshold": theta,
              "coverage_inputs": len(x_cov), "transfer_methods": list(methods),
              "transfer_seeds": transfer_seeds, "robustness_seeds": robustness_seeds,
              "evaluation_inputs": evaluation_inputs,
              "split_seed": SPLIT_SEED}
    earlier = (_earlier_repeats(store, continue_from, config, arms) if continue_from
               else {arm: [] for arm in arms})
    if continue_from:
        config["continued_from"] = continue_from
    started = time.time()
    total = repeats * len(arms) * epochs
    emit = progress or (lambda event: None)

    with store.start("retrain", model=model, method=source.config.get("method"),
                     config=config) as run:
        def tell(done: int, message: str, **event):
            run.progress(done, total, message)
            emit({"run_id": run.run_id, "done": done, "total": total, "message": message,
                  **event})

        children = store.children_of(run.run_id)    # its held-out sets belong to it
        transfer = {}
        if transfer_seeds > 0 and methods:
            tell(0, "held-out transfer sets: generating against the original model",
                 stage="transfer")
            transfer = transfer_sets(model, base, ds, parts["evaluation"], methods,
                                     transfer_seeds, children, seed, run.cancel_requested)
            run.check_cancel()

        def measure(m) -> dict:
            out = classification_metrics(m, x_eval, y_eval)
            if coverage:
                out.update(rconc_rates(m, x_cov, theta))
            out["transfer"] = {k: accuracy(m, t["x"], t["y"]) for k, t in transfer.items()}
            return out

        tell(0, "evaluating the original model", stage="before")
        before = measure(base)
        before["validation_accuracy"] = accuracy(base, *val)
        results: dict[str, list[dict]] = earlier
        saved = {arm: [m["model_path"] for m in ms] for arm, ms in results.items()}
        for r in range(len(results["generated"]), repeats):
            for a, arm in enumerate(arms):
                offset = (r * len(arms) + a) * epochs
                if arm == "generated":
                    x_extra, y_extra = adv["x"], adv["y"]
                else:
                    pick = np.random.default_rng(seed + 1000 + r).choice(
                        len(y_fit), n_extra, replace=n_extra > len(y_fit))
                    x_extra, y_extra = x_fit[pick], y_fit[pick]
                watch = _cancel_callback(run, lambda e, o=offset, r=r, arm=arm: tell(
                    o + e, f"repeat {r + 1}/{repeats}, {arm} arm, epoch {e}/{epochs}",
                    stage="train", repeat=r + 1, arm=arm, epoch=e))
                done = retrain_once(base, x_fit, y_fit, x_extra, y_extra, epochs,
                                    seed=seed + r, batch_size=batch_size,
                                    learning_rate=learning_rate, augment=augment, mix=mix,
                                    validation=val, callbacks=[watch])
                m = measure(done.model)
                m.update(validation_accuracy=done.validation_accuracy,
                         best_epoch=done.best_epoch, validation_curve=done.validation)
                name = "retrained" if arm == "generated" else "control"
                path = run.path / f"{name}-r{r + 1}.keras"
                done.model.save(path)
                m["model_path"] = str(path)
                saved[arm].append(str(path))
                results[arm].append(m)
            # a cancelled run keeps what it finished
            run.save_json("summary", _summarize(config, before, results, parts, transfer,
                                                source, started))
        summary = _summarize(config, before, results, parts, transfer, source, started)
        for arm, key in (("generated", "best_model"), ("control", "best_control_model")):
            if arm in results:          # the best repeat on validation, not on evaluation
                best = int(np.argmax([m["validation_accuracy"] for m in results[arm]]))
                summary[key] = saved[arm][best]
                summary[key.replace("model", "repeat")] = best + 1
        if robustness_seeds > 0:
            tell(total, "robustness: fresh white-box generation runs", stage="robustness")
            models = {"original": model, "retrained": summary["best_model"]}
            if control:
                models["control"] = summary["best_control_model"]
            rob = fresh_adversarial_rate(models, source, ds, robustness_seeds, children,
                                         should_stop=run.cancel_requested,
                                         pool=parts["evaluation"])
            rob["drop"] = rob["original"]["adv_rate"] - rob["retrained"]["adv_rate"]
            summary["robustness"] = rob
        summary["quality"] = _quality_or_reason(adv, ds)
        summary["seconds"] = round(time.time() - started, 1)
        summary["run_id"] = run.run_id
        tell(total, "finished", stage="done")
        run.finish(summary)
    return summary


def _earlier_repeats(store, run_id: str, config: dict, arms: list[str]) -> dict:
    """The per-repeat results of the earlier retrain run ``run_id`` to continue from: its
    settings must equal ``config`` but for the number of repeats, and both arms keep as many
    repeats as the shorter one finished (paired), at most ``config["repeats"]``."""
    from pathlib import Path
    earlier = store.get(run_id)
    if earlier.kind != "retrain":
        raise InputError(f"run {run_id} is a {earlier.kind} run, not a retrain run: "
                         f"continue from a retrain run")
    ignore = {"repeats", "continued_from"}
    differ = sorted(k for k in (set(config) | set(earlier.config)) - ignore
                    if earlier.config.get(k) != config.get(k))
    if differ:
        raise InputError(f"run {run_id} was trained with other settings ({', '.join(differ)}): "
                         f"continue only a run with the same settings, or start a new one")
    per = (earlier.load_json("summary") or {}).get("per_repeat", {})
    n = min([len(per.get(arm, [])) for arm in arms] + [config["repeats"]])
    kept = {arm: per.get(arm, [])[:n] for arm in arms}
    missing = [m["model_path"] for ms in kept.values() for m in ms
               if not Path(m["model_path"]).exists()]
    if missing:
        raise InputError(f"run {run_id} lost its model files ({missing[0]} …): start a new run")
    return kept


def _summarize(config: dict, before: dict, results: dict, parts: dict, transfer: dict,
               source, started: float) -> dict:
    keys = [k for k in before if k in METRICS or k.startswith("rconc")]
    gen = results["generated"]
    done = len(gen)
    out = {"model": config["model"], "from_run": config["from_run"],
           "method": source.config.get("method"), "dataset": config["dataset"],
           "epochs": config["epochs"], "repeats": config["repeats"], "repeats_done": done,
           "n_inputs": config["n_inputs"], "mix": config["mix"],
           "learning_rate": config["learning_rate"],
           "seeds_split": int(len(parts["seeds"])),
           "validation_split": int(len(parts["validation"])),
           "evaluation_split": int(len(parts["evaluation"])),
           "evaluated_on": describe_split(parts), "before": before,
           "after": {k: _spread([m[k] for m in gen]) for k in keys}}
    out["accuracy"] = out["after"]["accuracy"]["mean"]
    out["gain"] = {k: _spread([m[k] - before[k] for m in gen]) for k in keys}
    ctrl = results.get("control", [])
    has_control = len(ctrl) == done
    if has_control:
        out["control"] = {k: _spread([m[k] for m in ctrl]) for k in keys}
        out["gain_over_control"] = {k: paired([g[k] for g in gen], [c[k] for c in ctrl])
                                    for k in keys}
        out["accuracy_after_minus_control"] = out["gain_over_control"]["accuracy"]["mean"]
    out["best_epoch"] = {arm: [m["best_epoch"] for m in ms] for arm, ms in results.items()}
    by_method = {}
    for method, t in transfer.items():
        row = {"run_id": t["run_id"], "n_seeds": t["n_seeds"], "n": int(len(t["y"]))}
        if len(t["y"]):
            row["original"] = before["transfer"][method]
            row["retrained"] = _spread([m["transfer"][method] for m in gen])
            if has_control:
                row["control"] = _spread([m["transfer"][method] for m in ctrl])
                row["retrained_minus_control"] = paired(
                    [m["transfer"][method] for m in gen], [m["transfer"][method] for m in ctrl])
        by_method[method] = row
    out["transfer_by_method"] = by_method
    main = next((m for m in (source.config.get("method"), *by_method)
                 if m in by_method and by_method[m]["n"]), None)
    if main is not None:
        row = by_method[main]
        out["transfer"] = {"method": main, "n": row["n"], "original": row["original"],
                           "retrained": row["retrained"]["mean"],
                           "control": row["control"]["mean"] if has_control else None}
    out["per_repeat"] = {arm: ms for arm, ms in results.items()}
    out["seconds"] = round(time.time() - started, 1)
    return out


def _quality_or_reason(adv: dict, ds) -> dict:
    """Table 5's quality of the inputs used, where the feature CNN applies (28 x 28 images)."""
    from .errors import InputError, ModelLoadError
    from .quality import FEATURE_NOTE, set_quality
    if ds.kind != "image" or ds.x_test.shape[1:] != (28, 28):
        return {"skipped": f"FID/IS need 28 x 28 images; {ds.name} inputs are "
                           f"{ds.x_test.shape[1:]}", "note": FEATURE_NOTE}
    idx = adv["seed_index"]
    if adv["split"] != "test" or (idx < 0).any():
        return {"skipped": "the run's seeds are not test-split indices", "note": FEATURE_NOTE}
    try:
        return set_quality(adv["x"], ds.x_test[idx], ds.x_test)
    except (ModelLoadError, InputError) as e:   # no feature network, or too few inputs
        return {"skipped": str(e), "note": FEATURE_NOTE}


# ---------------------------------------------------------------- choosing the set (Table 5)

def candidate_quality(run, ds=None) -> dict:
    """Table 5's figures of one generation run's adversarial inputs: mean L1 to their seeds,
    FID against the test split and IS (feature CNN), plus the run's target and constraint."""
    from .quality import set_quality
    out = run.load_npz("outputs")
    if out is None or "adversarial" not in out or not out["adversarial"].any():
        raise InputError(f"run {run.run_id} has no adversarial inputs to judge")
    ds = ds or resolve_dataset(run.model or "", None, run.config)
    adv = out["adversarial"].astype(bool)
    q = set_quality(out["x_gen"][adv], out["x_seed"][adv], ds.x_test)
    gen = run.config.get("generator") or {}
    constraint = gen.get("constraint")
    return {"run_id": run.run_id, "method": run.config.get("method"),
            "target": gen.get("target"), "constraint": constraint.get("name")
            if isinstance(constraint, dict) else constraint, "n_seeds": int(len(adv)),
            "n_adversarial": int(adv.sum()), "l1": q["l1_mean"], "l2": q["l2_mean"],
            "l1_sum": q["l1_sum"], "fid": q["fid"], "is": q["is"], "note": q["note"]}


def choose_run(model: str, store, **tolerances) -> dict:
    """Table 5's rule over every finished image generation run of ``model`` in the store that
    found adversarial inputs: smallest L1, then smallest FID, then largest IS."""
    from .quality import select_retraining_set
    runs = [r for r in store.list(kind="generate", status="finished", model=model,
                                  children=False)     # never a retraining's held-out set
            if (r.summary or {}).get("n_adversarial", 0) > 0]
    if not runs:
        raise InputError(f"no finished generation run of {model!r} with adversarial inputs in "
                         f"{store.root}: run `rnncon generate --model {model} ...` first")
    ds = resolve_dataset(model, None, runs[0].config)
    return select_retraining_set([candidate_quality(r, ds) for r in runs], **tolerances)
