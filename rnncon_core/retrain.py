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

This module holds the steps (metrics, the split, one retraining, the defaults); the job that
runs them inside the run store, ``run_retraining(...)``, the one entry point of the CLI and the
dashboard, is :mod:`rnncon_core.jobs.retraining`.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from . import text  # noqa: F401  (its strategies join GENERATORS)
from .coverage import ContributionCoverage
from .data import Dataset, load_dataset
from .errors import InputError, ModelLoadError
from .generate import generator_class
from .generate.base import predict_proba
from .lazy import keras
from .params import Interval, IntRange, Param, Params
from .quality import FEATURE_NOTE, select_retraining_set, set_quality
from .zoo import ARCHITECTURES, class_probabilities, output_head, read_card, shifted_batches

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
    if len(y) == 0:
        return None
    return float((predict_proba(model, x).argmax(1) == np.asarray(y).ravel()).mean())


# ---------------------------------------------------------------- pieces

def compile_for_training(model, learning_rate: float = 1e-4):
    """Compile with a fresh Adam and the loss of the model's output (as zoo.build_model)."""
    two = output_head(model).kind == "sigmoid"            # one sigmoid unit: two classes
    loss = "binary_crossentropy" if two else "sparse_categorical_crossentropy"
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=loss,
                  metrics=["accuracy"])
    return model


def copy_model(model, learning_rate: float = 1e-4):
    """An independent, compiled copy of ``model`` with its trained weights."""
    clone = keras.models.clone_model(model)
    clone.set_weights(model.get_weights())
    return compile_for_training(clone, learning_rate)


def resolve_dataset(model: str, dataset=None, run_config: dict | None = None):
    """The Dataset the model trains on: given, or its architecture's, or the run's."""
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


def adversarial_inputs(run, max_inputs: int | None = None, valid_only: bool = True) -> dict:
    """The adversarial inputs of a finished (or cancelled) generation run, with their seeds'
    labels and indices: ``{"x", "y", "seed_index", "run_seeds", "split", "dropped_invalid"}``
    (``run_seeds``: every seed of the run, adversarial or not). ``valid_only``: only those the
    validity oracle passed, where the run checked them (``dropped_invalid`` counts the
    others; a reader would not give them their seed's label, so they are no training data)."""
    if run.kind != "generate":
        raise InputError(f"run {run.run_id} is a {run.kind!r} run; retraining needs a "
                         f"generation run (`rnncon runs --kind generate`)")
    out = run.load_npz("outputs")
    if out is None or not {"x_gen", "y_seed", "adversarial"} <= set(out):
        raise InputError(f"run {run.run_id} has no outputs.npz with x_gen, y_seed and "
                         f"adversarial ({run.status}); run the generation again")
    mask = out["adversarial"].astype(bool)
    dropped = 0
    if valid_only and "valid" in out:
        dropped = int((mask & ~out["valid"].astype(bool)).sum())
        mask &= out["valid"].astype(bool)
    if not mask.any():
        raise InputError(f"run {run.run_id} found no adversarial inputs: nothing to retrain "
                         f"with; generate with more seeds or another method")
    idx = np.flatnonzero(mask)[:max_inputs]
    seeds = out["seed_index"] if "seed_index" in out else np.full(len(mask), -1)
    return {"x": out["x_gen"][idx], "y": out["y_seed"][idx].astype(np.int64),
            "seed_index": seeds[idx].astype(np.int64), "run_seeds": seeds.astype(np.int64),
            "split": run.config.get("split", "test"), "dropped_invalid": dropped}


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


def cancel_callback(run, report: Callable[[int], None], every: int = 20,
                    on_batch: Callable[[int, int], None] | None = None,
                    seconds: float = 0.5):
    """A Keras callback that checks ``run``'s cancel flag every ``every`` batches and at each
    epoch's end, calls ``report(epochs done)`` there, and ``on_batch(epoch, batches done in
    it)`` at most every ``seconds`` (progress inside an epoch)."""

    class Watch(keras.callbacks.Callback):
        epoch, said = 0, 0.0

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_end(self, batch, logs=None):
            if run is not None and batch % every == every - 1:
                run.check_cancel()
            now = time.monotonic()
            if on_batch is not None and now - self.said >= seconds:
                self.said = now
                on_batch(self.epoch, batch + 1)

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


def epoch_sizes(n_fit: int, n_extra: int, mix: float, fit_inputs: int | None = None,
                batch_size: int = 128) -> dict:
    """One epoch of :func:`retrain_once`: ``clean`` training inputs (all, or a sample of
    ``fit_inputs``), ``extra`` generated ones mixed in, and the training ``batches``."""
    clean = n_fit if fit_inputs is None else min(n_fit, int(fit_inputs))
    extra = extra_per_epoch(clean, n_extra, mix) if n_extra else 0
    return {"clean": clean, "extra": extra, "batches": -(-(clean + extra) // batch_size)}


def retrain_once(base, x_fit, y_fit, x_extra, y_extra, epochs: int, seed: int,
                 batch_size: int = 128, learning_rate: float = 1e-4, augment: bool = False,
                 mix: float = 0.0, validation=None, callbacks=(),
                 fit_inputs: int | None = None) -> Retrained:
    """A copy of ``base`` trained ``epochs`` more epochs on (x_fit + x_extra), the extra
    inputs making ``mix`` of each epoch (:func:`extra_per_epoch`); ``augment`` feeds images
    with the random shifts the shipped image models were trained with. ``fit_inputs``: each
    epoch trains on a fresh random sample of that many of x_fit (None: all of it; an IMDB
    model's epoch over its 22,500 training reviews takes minutes on two cores).
    ``validation`` (x, y): the weights of the epoch with the best accuracy there are kept
    (the later epoch on a tie); without it, the last epoch's."""
    keras.utils.set_random_seed(seed)
    model = copy_model(base, learning_rate)
    x_extra = np.asarray(x_extra, dtype=x_fit.dtype)
    y_extra = np.asarray(y_extra, dtype=y_fit.dtype)
    sizes = epoch_sizes(len(y_fit), len(y_extra), mix, fit_inputs, batch_size)
    n_mix = sizes["extra"]
    rng = np.random.default_rng(seed)
    order = np.zeros(0, np.int64)
    out = Retrained(model)
    best_weights = None
    for epoch in range(epochs):
        while len(order) < n_mix:           # every extra input once before any twice
            order = np.concatenate([order, rng.permutation(len(y_extra))])
        pick, order = order[:n_mix], order[n_mix:]
        clean = (slice(None) if sizes["clean"] == len(y_fit) else
                 np.sort(rng.choice(len(y_fit), sizes["clean"], replace=False)))
        x = np.concatenate([x_fit[clean], x_extra[pick]])
        y = np.concatenate([y_fit[clean], y_extra[pick]])
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
    Param("fit_inputs", None, IntRange(1), "Clean training inputs per epoch: a fresh random "
                                           "sample of this many each epoch (default: all)."),
    Param("coverage_inputs", 500, IntRange(1), "Evaluation inputs whose RConC is measured."),
    Param("threshold", None, Interval(0, 1), "RConC's threshold (default: the data set's)."),
)


def training_defaults(model: str, ds) -> dict:
    """How to continue training the way the shipped model was trained: a fine-tuning rate
    (Adam 3e-4), the random shifts of zoo.train_model for 28 x 28 images, and the validation
    share its card records (that tail of the training split is left out, as there)."""
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


def right_seeds(models: list, x, y, pool: np.ndarray, n: int) -> np.ndarray:
    """The first ``n`` indices of ``pool`` whose inputs (of x, y) every model predicts right."""
    ok = np.ones(len(pool), dtype=bool)
    for m in models:
        ok &= predict_proba(m, x[pool]).argmax(1) == np.asarray(y)[pool]
    return pool[ok][:n]


def default_transfer_methods(ds) -> tuple[str, ...]:
    return TRANSFER_METHODS if ds.kind != "text" else ("synonym-gradient",)


def retraining_summary(config: dict, before: dict, results: dict, parts: dict,
                       transfer: dict, source, started: float) -> dict:
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


def quality_or_reason(adv: dict, ds) -> dict:
    """Table 5's quality of the inputs used, where the feature CNN applies (28 x 28 images)."""
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
    runs = [r for r in store.list(kind="generate", status="finished", model=model,
                                  children=False)     # never a retraining's held-out set
            if (r.summary or {}).get("n_adversarial", 0) > 0]
    if not runs:
        raise InputError(f"no finished generation run of {model!r} with adversarial inputs in "
                         f"{store.root}: run `rnncon generate --model {model} ...` first")
    ds = resolve_dataset(model, None, runs[0].config)
    return select_retraining_set([candidate_quality(r, ds) for r in runs], **tolerances)
