"""Retraining with generated inputs (the paper's RQ3, Table 6, Figures 13 and 14).

From the trained weights, the adversarial inputs of a generation run (labelled with their
seeds' labels) join the training data and the model trains N more epochs; this repeats R times
with different seeds. A control arm trains the same way on the same number of extra *clean*
training inputs, so the gain of the generated inputs is told apart from the gain of training
longer. Every repeat is evaluated on held-out test inputs (accuracy, macro precision / recall /
F1, one-vs-rest AUC, RConC); robustness is the adversarial rate of a fresh generation run against
the retrained model vs against the original. Everything lands in the run store (kind
``retrain``): the retrained models too; the shipped models are only ever read.

``run_retraining(...)`` is the one entry point for the CLI and the dashboard.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np

from .errors import InputError

DEFAULT_EPOCHS = 10
DEFAULT_REPEATS = 10
METRICS = ("accuracy", "precision", "recall", "f1", "auc")
ProgressFn = Callable[[dict], None]


# ---------------------------------------------------------------- metrics

def classification_metrics(model, x, y, batch_size: int = 512) -> dict:
    """Accuracy, macro precision / recall / F1 and AUC (one-vs-rest, macro over the classes
    present) of ``model`` on (x, y); a one-unit sigmoid output is treated as binary."""
    from sklearn.metrics import precision_recall_fscore_support, roc_auc_score
    y = np.asarray(y).astype(np.int64).ravel()
    probs = np.asarray(model.predict(x, batch_size=batch_size, verbose=0), dtype=np.float64)
    if probs.ndim == 1 or probs.shape[1] == 1:
        p1 = probs.reshape(-1)
        pred = (p1 > 0.5).astype(np.int64)
        auc = float(roc_auc_score(y, p1)) if len(np.unique(y)) == 2 else float("nan")
    else:
        pred = probs.argmax(axis=1)
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


# ---------------------------------------------------------------- pieces

def _is_binary(model) -> bool:
    return int(model.output_shape[-1]) == 1


def compile_for_training(model, learning_rate: float = 1e-4):
    """Compile with a fresh Adam and the loss of the model's output (as zoo.build_model)."""
    import keras
    loss = "binary_crossentropy" if _is_binary(model) else "sparse_categorical_crossentropy"
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
    if not name:
        raise InputError(f"cannot tell which data set {model!r} was trained on: pass "
                         f"dataset='mnist' (CLI: --dataset mnist)")
    return load_dataset(name)


def fit_split(ds, validation_split: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """The part of the training split the shipped image models were fitted on (the tail was
    their validation data, zoo.train_model); text models used the whole split the same way."""
    n_val = int(round(len(ds.y_train) * validation_split))
    return ds.x_train[:len(ds.y_train) - n_val], ds.y_train[:len(ds.y_train) - n_val]


def adversarial_inputs(run, max_inputs: int | None = None) -> dict:
    """The adversarial inputs of a finished (or cancelled) generation run, with their seeds'
    labels and indices: ``{"x", "y", "seed_index", "split"}``."""
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
    seed_index = out["seed_index"][idx] if "seed_index" in out else np.full(len(idx), -1)
    return {"x": out["x_gen"][idx], "y": out["y_seed"][idx].astype(np.int64),
            "seed_index": seed_index.astype(np.int64),
            "split": run.config.get("split", "test")}


def held_out_test(ds, adv: dict) -> tuple[np.ndarray, np.ndarray, str]:
    """The test inputs the retrained model has not seen in any form: when the seeds came from
    the test split, their (perturbed) copies are in the new training data, so they are left
    out of the evaluation."""
    keep = np.ones(len(ds.y_test), dtype=bool)
    if adv["split"] == "test":
        keep[adv["seed_index"][adv["seed_index"] >= 0]] = False
    what = (f"test split without the {int((~keep).sum())} seeds of the generation run "
            f"({int(keep.sum())} inputs)") if (~keep).any() else \
        f"the whole test split ({int(keep.sum())} inputs)"
    return ds.x_test[keep], ds.y_test[keep], what


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


def retrain_once(base, x_fit, y_fit, x_extra, y_extra, epochs: int, seed: int,
                 batch_size: int = 128, learning_rate: float = 1e-4, augment: bool = False,
                 callbacks=()):
    """A copy of ``base`` trained ``epochs`` more epochs on (x_fit + x_extra); ``augment``
    feeds images with the random shifts the shipped image models were trained with."""
    import keras
    from .zoo import shifted_batches
    keras.utils.set_random_seed(seed)
    model = copy_model(base, learning_rate)
    x = np.concatenate([x_fit, np.asarray(x_extra, dtype=x_fit.dtype)])
    y = np.concatenate([y_fit, np.asarray(y_extra, dtype=y_fit.dtype)])
    if augment:
        model.fit(shifted_batches(x, y, batch_size, seed), epochs=epochs, verbose=0,
                  shuffle=False, callbacks=list(callbacks))    # the batches come shuffled
    else:
        model.fit(x, y, epochs=epochs, batch_size=batch_size, shuffle=True, verbose=0,
                  callbacks=list(callbacks))
    return model


FINE_TUNE_RATE = 1e-4      # about where the shipped training's plateau schedule ends


def training_defaults(model: str, ds) -> dict:
    """How to continue training the way the shipped model was trained: a fine-tuning rate
    (Adam 1e-4), the random shifts of zoo.train_model for 28 x 28 images, and the validation
    share its card records (that tail of the training split is left out, as there)."""
    from .zoo import read_card
    card = read_card(model) if isinstance(model, str) else None
    return {"learning_rate": FINE_TUNE_RATE,
            "augment": ds.kind == "image" and ds.x_train.shape[1:] == (28, 28),
            "validation_split": float((card or {}).get("validation_split", 0.1))}


# ---------------------------------------------------------------- robustness

def generator_params(config: dict) -> dict:
    """The strategy parameters of a stored generation run, as run_generation takes them."""
    gen = dict(config.get("generator") or {})
    for key in ("method", "batch_size", "seed", "criterion"):
        gen.pop(key, None)
    crit = gen.pop("criterion_params", None) or {}
    if "granularity" in crit:
        gen["granularity"] = crit["granularity"]
    constraint = gen.pop("constraint", None)
    if isinstance(constraint, dict):
        gen["constraint"] = constraint.get("name", "none")
        gen.update({k: v for k, v in constraint.items() if k != "name" and v is not None})
    elif constraint is not None:
        gen["constraint"] = constraint
    return gen


def fresh_adversarial_rate(models: dict[str, str], source, ds, n_seeds: int, store,
                           should_stop=None) -> dict:
    """Adversarial rate of one fresh generation run per model, with the method and settings of
    the run ``source``, on the same new seeds for every model: the first ``n_seeds`` inputs of
    its split that it did not use and that every model predicts right.
    Returns ``{label: {"run_id", "adv_rate", "n_seeds", "n_adversarial"}}``."""
    from .generate import run_generation
    from .generate.base import predict_proba
    from .zoo import load_model
    cfg = source.config
    split = cfg.get("split", "test")
    x_all, y_all = ds.split(split)
    used = source.load_npz("outputs") or {}
    pool = np.setdiff1d(np.arange(len(y_all)), used.get("seed_index", np.zeros(0, np.int64)))
    right = np.ones(len(pool), dtype=bool)
    for m in models.values():
        right &= predict_proba(load_model(m), x_all[pool]).argmax(1) == y_all[pool]
    seeds = pool[right][:n_seeds]
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

def run_retraining(model: str, from_run: str, epochs: int = DEFAULT_EPOCHS,
                   repeats: int = DEFAULT_REPEATS, *, dataset=None, control: bool = True,
                   max_inputs: int | None = None, learning_rate: float | None = None,
                   augment: bool | None = None, batch_size: int = 128, seed: int = 0,
                   coverage: bool = True,
                   coverage_inputs: int = 500, threshold: float | None = None,
                   robustness_seeds: int = 0, store=None,
                   progress: ProgressFn | None = None) -> dict:
    """Retrain ``model`` (a shipped name or a .keras path) with the adversarial inputs of the
    generation run ``from_run``, ``repeats`` times for ``epochs`` epochs each; returns the
    summary (also the run's ``summary.json``) with ``run_id``.

    ``control``: also train the control arm on as many clean training inputs.
    ``max_inputs``: use at most this many adversarial inputs (the §7 experiment uses 500).
    ``learning_rate`` / ``augment``: None continues as the shipped model was trained (Adam at
    a fine-tuning rate of 1e-4; random shifts for 28 x 28 images), see
    :func:`training_defaults`.
    ``robustness_seeds``: > 0 runs fresh generation runs of that many seeds against the best
    retrained model and the original. ``progress`` gets dict events (stage, repeat, epoch,
    done, total); the run's progress.json is kept current and a cancel request stops the job
    within a few batches (the run is then marked cancelled and keeps its finished repeats).
    """
    from .runs import RunStore
    from .zoo import load_model
    if epochs < 1 or repeats < 1:
        raise InputError(f"epochs and repeats must be >= 1 (got {epochs} and {repeats})")
    store = store or RunStore()
    source = store.get(from_run)
    adv = adversarial_inputs(source, max_inputs)
    ds = resolve_dataset(model, dataset, source.config)
    base = load_model(model)
    if tuple(base.input_shape[1:]) != tuple(ds.x_test.shape[1:]):
        raise InputError(f"model {model!r} takes inputs {base.input_shape[1:]}, but the data "
                         f"set {ds.name!r} has {ds.x_test.shape[1:]}: pass the right dataset")
    if adv["x"].shape[1:] != ds.x_test.shape[1:]:
        raise InputError(f"the inputs of run {from_run} are shaped {adv['x'].shape[1:]}, not "
                         f"like {ds.name!r} ({ds.x_test.shape[1:]}): wrong run for this model")
    defaults = training_defaults(model, ds)
    learning_rate = defaults["learning_rate"] if learning_rate is None else learning_rate
    augment = defaults["augment"] if augment is None else augment
    x_fit, y_fit = fit_split(ds, defaults["validation_split"])
    x_eval, y_eval, eval_what = held_out_test(ds, adv)
    x_cov = x_eval[:coverage_inputs]
    theta = threshold if threshold is not None else (0.25 if ds.kind == "image" else 0.5)
    n_extra = len(adv["y"])
    arms = ["generated", "control"] if control else ["generated"]
    config = {"model": model, "from_run": from_run, "dataset": ds.name, "epochs": epochs,
              "repeats": repeats, "control": control, "max_inputs": max_inputs,
              "n_inputs": n_extra, "learning_rate": learning_rate, "augment": augment,
              "batch_size": batch_size,
              "seed": seed, "threshold": theta, "coverage_inputs": len(x_cov),
              "robustness_seeds": robustness_seeds}
    started = time.time()
    total = repeats * len(arms) * epochs
    emit = progress or (lambda event: None)

    with store.start("retrain", model=model, method=source.config.get("method"),
                     config=config) as run:
        def tell(done: int, message: str, **event):
            run.progress(done, total, message)
            emit({"run_id": run.run_id, "done": done, "total": total, "message": message,
                  **event})

        tell(0, "evaluating the original model", stage="before")
        before = classification_metrics(base, x_eval, y_eval)
        if coverage:
            before.update(rconc_rates(base, x_cov, theta))
        results: dict[str, list[dict]] = {arm: [] for arm in arms}
        saved: list[str] = []
        summary: dict = {}
        for r in range(repeats):
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
                trained = retrain_once(base, x_fit, y_fit, x_extra, y_extra, epochs,
                                       seed=seed + r, batch_size=batch_size,
                                       learning_rate=learning_rate, augment=augment,
                                       callbacks=[watch])
                m = classification_metrics(trained, x_eval, y_eval)
                if coverage:
                    m.update(rconc_rates(trained, x_cov, theta))
                if arm == "generated":
                    path = run.path / f"retrained-r{r + 1}.keras"
                    trained.save(path)
                    m["model_path"] = str(path)
                    saved.append(str(path))
                results[arm].append(m)
            summary = _summarize(config, before, results, eval_what, started)
            run.save_json("summary", summary)       # a cancelled run keeps what it finished
        best = int(np.argmax([m["accuracy"] for m in results["generated"]]))
        summary["best_model"] = saved[best]
        summary["best_repeat"] = best + 1
        if robustness_seeds > 0:
            tell(total, "robustness: fresh generation runs", stage="robustness")
            summary["robustness"] = fresh_adversarial_rate(
                {"original": model, "retrained": saved[best]}, source, ds, robustness_seeds,
                store, should_stop=run.cancel_requested)
            rob = summary["robustness"]
            rob["drop"] = rob["original"]["adv_rate"] - rob["retrained"]["adv_rate"]
        summary["quality"] = _quality_or_reason(adv, ds)
        summary["seconds"] = round(time.time() - started, 1)
        summary["run_id"] = run.run_id
        tell(total, "finished", stage="done")
        run.finish(summary)
    return summary


def _summarize(config: dict, before: dict, results: dict, eval_what: str,
               started: float) -> dict:
    keys = [k for k in before if k in METRICS or k.startswith("rconc")]
    done = len(results["generated"])
    out = {"model": config["model"], "from_run": config["from_run"],
           "dataset": config["dataset"], "epochs": config["epochs"],
           "repeats": config["repeats"], "repeats_done": done, "n_inputs": config["n_inputs"],
           "evaluated_on": eval_what, "before": before,
           "after": {k: _spread([m[k] for m in results["generated"]]) for k in keys}}
    out["accuracy"] = out["after"]["accuracy"]["mean"]
    out["gain"] = {k: _spread([m[k] - before[k] for m in results["generated"]]) for k in keys}
    if "control" in results and len(results["control"]) == done:
        out["control"] = {k: _spread([m[k] for m in results["control"]]) for k in keys}
        out["gain_over_control"] = {
            k: _spread([g[k] - c[k] for g, c in zip(results["generated"], results["control"])])
            for k in keys}
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
    runs = [r for r in store.list(kind="generate", status="finished", model=model)
            if (r.summary or {}).get("n_adversarial", 0) > 0]
    if not runs:
        raise InputError(f"no finished generation run of {model!r} with adversarial inputs in "
                         f"{store.root}: run `rnncon generate --model {model} ...` first")
    ds = resolve_dataset(model, None, runs[0].config)
    return select_retraining_set([candidate_quality(r, ds) for r in runs], **tolerances)
