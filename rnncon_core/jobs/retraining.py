"""The retraining job: ``run_retraining`` retrains a model with the adversarial inputs of a
stored generation run inside a run of the store (kind ``retrain``), with its held-out transfer
sets and fresh white-box runs as child generation runs. The steps it runs (metrics, the split
of the test data, one retraining, the defaults) are :mod:`rnncon_core.retrain`'s.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import jobs
from ..coverage import default_threshold
from ..errors import InputError
from ..generate.base import model_head
from ..retrain import (DEFAULT_EPOCHS, DEFAULT_MIX, DEFAULT_REPEATS, PARAMS, SPLIT_SEED,
                       TRANSFER_SEEDS, ProgressFn, cancel_callback, quality_or_reason,
                       retraining_summary, accuracy, adversarial_inputs, classification_metrics,
                       default_transfer_methods, epoch_sizes, extra_per_epoch, fit_split,
                       generator_params,
                       rconc_rates, resolve_dataset, retrain_once, right_seeds, split_test,
                       training_defaults)
from ..runs import RunStore, check_source_run
from ..zoo import load_model


def generation_on_seeds(model: str, keras_model, method: str, seeds: np.ndarray, ds, store,
                        seed: int = 0, should_stop=None, **params) -> str:
    """The id of a finished generation run of ``model`` (``keras_model``, the same file) with
    ``method`` and ``params`` on exactly the test inputs ``seeds``: found in the store, or run
    now."""
    seeds = np.asarray(seeds, np.int64)
    found = jobs.find_generation(store, model, method, seed_indices=seeds, split="test",
                                 dataset=ds.name, seed=seed, keras_model=keras_model, **params)
    if found is not None:
        return found.run_id
    return jobs.run_generation(model, method, seed_indices=seeds, split="test", dataset=ds.name,
                               seed=seed, store=store, should_stop=should_stop, **params)["run_id"]


def transfer_sets(model: str, base, ds, pool: np.ndarray, methods, n_seeds: int, store,
                  seed: int = 0, should_stop=None, on_set=None) -> dict:
    """Held-out adversarial inputs: per method, one generation run against the *original*
    model on the first ``n_seeds`` inputs of ``pool`` (evaluation inputs) it predicts right;
    returns ``{method: {"run_id", "n_seeds", "x", "y"}}`` with the adversarial inputs and
    their seeds' labels. ``on_set(i, n, method, seeds)`` is told before each set."""
    seeds = right_seeds([base], ds.x_test, ds.y_test, pool, n_seeds)
    out = {}
    for i, method in enumerate(methods, start=1):
        if on_set is not None:
            on_set(i, len(methods), method, len(seeds))
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
        s = jobs.run_generation(m, cfg.get("method", "rconc"), seed_indices=seeds, split=split,
                                dataset=ds.name, seed=int(cfg.get("seed", 0)), store=store,
                                others=cfg.get("others", ()), should_stop=should_stop,
                                **generator_params(cfg))
        out[label] = {"run_id": s["run_id"], "adv_rate": s["adv_rate"],
                      "n_seeds": s["n_seeds"], "n_adversarial": s["n_adversarial"]}
    return out


def run_retraining(model: str, from_run: str, epochs: int = DEFAULT_EPOCHS,
                   repeats: int = DEFAULT_REPEATS, *, dataset=None, control: bool = True,
                   max_inputs: int | None = None, learning_rate: float | None = None,
                   augment: bool | None = None, mix: float = DEFAULT_MIX,
                   batch_size: int = 128, seed: int = 0, coverage: bool = True,
                   coverage_inputs: int = 500, threshold: float | None = None,
                   transfer_methods=None, transfer_seeds: int = TRANSFER_SEEDS,
                   robustness_seeds: int = 0, evaluation_inputs: int | None = None,
                   fit_inputs: int | None = None, store=None,
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
    ``fit_inputs``: each epoch trains on a fresh random sample of this many clean training
    inputs (None: all; an IMDB model's full epoch takes minutes on two cores); the summary's
    ``trained_on`` says how many.
    ``robustness_seeds``: > 0 runs fresh white-box generation runs of that many evaluation
    seeds against the original, the best retrained and the best control model.
    ``progress`` gets dict events (stage, repeat, epoch, batch, done, total; done and total
    count training batches, so an estimate exists from the first one); the run's progress.json
    is kept current and a cancel request stops the job within a few batches (the run is then
    marked cancelled and keeps its finished repeats). ``force``: retrain with a run generated
    for another model (refused otherwise); a partial run is used with a note.
    ``continue_from``: the id of an earlier retrain run (finished or cancelled) with the same
    settings but fewer repeats: its repeats are kept and only the missing ones train. Repeat r
    trains with seed + r, so they are the repeats this run would have computed.
    """
    PARAMS.check("retraining", {"epochs": epochs, "repeats": repeats,
                                "max_inputs": max_inputs, "learning_rate": learning_rate,
                                "mix": mix, "seed": seed, "transfer_seeds": transfer_seeds,
                                "robustness_seeds": robustness_seeds,
                                "batch_size": batch_size, "coverage_inputs": coverage_inputs,
                                "threshold": threshold, "fit_inputs": fit_inputs})
    loading = time.time()
    store = store or RunStore()
    source, adv, ds, base = _source_and_data(model, from_run, store, dataset, max_inputs,
                                             force, progress)
    extra_per_epoch(1, 1, mix)      # a bad mix fails before anything runs
    defaults = training_defaults(model, ds)
    inputs = _Inputs(source, adv, ds, base, fit_split(ds, defaults["validation_split"]),
                     _evaluation_parts(ds, adv, evaluation_inputs))
    config = {"model": model, "from_run": from_run, "dataset": ds.name, "epochs": epochs,
              "repeats": repeats, "control": control, "max_inputs": max_inputs,
              "n_inputs": len(adv["y"]), "dropped_invalid": adv.get("dropped_invalid", 0),
              "learning_rate": defaults["learning_rate"] if learning_rate is None
              else learning_rate,
              "augment": defaults["augment"] if augment is None else augment,
              "mix": mix, "batch_size": batch_size, "seed": seed, "coverage": coverage,
              "threshold": threshold if threshold is not None else default_threshold(ds),
              "coverage_inputs": min(coverage_inputs, len(inputs.parts["evaluation"])),
              "transfer_methods": list(default_transfer_methods(ds) if transfer_methods is None
                                       else transfer_methods),
              "transfer_seeds": transfer_seeds, "robustness_seeds": robustness_seeds,
              "evaluation_inputs": evaluation_inputs, "fit_inputs": fit_inputs,
              "split_seed": SPLIT_SEED}
    earlier = (_earlier_repeats(store, continue_from, config, _arms(config)) if continue_from
               else {arm: [] for arm in _arms(config)})
    if continue_from:
        config["continued_from"] = continue_from
    with store.start("retrain", model=model, method=source.config.get("method"),
                     config=config) as run:
        return _retrain(run, store, inputs, config, earlier, progress,
                        seconds={"loading": round(time.time() - loading, 1)})


@dataclass
class _Inputs:
    """A retraining's checked inputs: the source generation run, its adversarial inputs, the
    data set, the original model, the training part ``fit`` (x, y) and the test split's
    ``parts`` (indices of its validation and evaluation parts)."""
    source: object
    adv: dict
    ds: object
    base: object
    fit: tuple
    parts: dict

    def part(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The inputs and labels of the test split's part ``name``."""
        index = self.parts[name]
        return self.ds.x_test[index], self.ds.y_test[index]


def _arms(config: dict) -> list[str]:
    return ["generated", "control"] if config["control"] else ["generated"]


def _evaluation_parts(ds, adv: dict, evaluation_inputs: int | None) -> dict:
    """The test split's parts (:func:`split_test`), the validation and evaluation parts
    sampled down to ``evaluation_inputs`` each (with the split's seed) when given."""
    parts = split_test(ds, adv)
    if evaluation_inputs is None:
        return parts
    if evaluation_inputs < 2:
        raise InputError(f"evaluation_inputs must be >= 2 (got {evaluation_inputs})")
    rng = np.random.default_rng(SPLIT_SEED)
    for name in ("validation", "evaluation"):
        if len(parts[name]) > evaluation_inputs:
            parts[name] = np.sort(rng.choice(parts[name], evaluation_inputs, replace=False))
    return parts


def _epoch(inputs: _Inputs, config: dict) -> dict:
    """One training epoch's sizes (retrain.epoch_sizes), with ``of``: the clean inputs there
    are."""
    n_fit = len(inputs.fit[1])
    return {**epoch_sizes(n_fit, config["n_inputs"], config["mix"], config["fit_inputs"],
                          config["batch_size"]), "of": n_fit}


def _retrain(run, store, inputs: _Inputs, config: dict, earlier: dict, progress,
             seconds: dict) -> dict:
    """The job inside its run: held-out transfer sets, the original model's figures, the
    repeats of every arm, the best repeats, robustness and quality; returns the summary.
    ``seconds`` (the time of each stage, loading measured before) goes into the summary."""
    started = time.time()
    arms = _arms(config)
    epoch = _epoch(inputs, config)
    total = config["repeats"] * len(arms) * config["epochs"] * epoch["batches"]
    emit = progress or (lambda event: None)

    def tell(done: int, message: str, **event):
        run.progress(done, total, message)
        emit({"run_id": run.run_id, "done": done, "total": total, "message": message,
              **event})

    children = store.children_of(run.run_id)    # its held-out sets belong to it
    transfer = {}
    if config["transfer_seeds"] > 0 and config["transfer_methods"]:
        def on_set(i: int, n: int, method: str, seeds: int) -> None:
            tell(0, f"held-out transfer set {i}/{n}: {method} against the original model "
                    f"({seeds:,} seeds)", stage="transfer", set=i, sets=n)

        transfer = transfer_sets(config["model"], inputs.base, inputs.ds,
                                 inputs.parts["evaluation"], config["transfer_methods"],
                                 config["transfer_seeds"], children, config["seed"],
                                 run.cancel_requested, on_set=on_set)
        run.check_cancel()
    val = inputs.part("validation")
    x_eval, y_eval = inputs.part("evaluation")
    x_cov = x_eval[:config["coverage_inputs"]]

    def measure(m) -> dict:
        out = classification_metrics(m, x_eval, y_eval)
        if config["coverage"]:
            out.update(rconc_rates(m, x_cov, config["threshold"]))
        out["transfer"] = {k: accuracy(m, t["x"], t["y"]) for k, t in transfer.items()}
        return out

    def summarize(results: dict) -> dict:
        return {**retraining_summary(config, before, results, inputs.parts, transfer,
                                     inputs.source, started),
                "trained_on": epoch, "stage_seconds": seconds}

    clock = time.time()
    tell(0, "evaluating the original model", stage="before")
    before = measure(inputs.base)
    before["validation_accuracy"] = accuracy(inputs.base, *val)
    seconds["evaluating the original"] = round(time.time() - clock, 1)
    results, saved = _train_repeats(run, tell, inputs, val, measure, earlier, arms, config,
                                    summarize, seconds, epoch["batches"])
    summary = summarize(results)
    _best_repeats(summary, results, saved)
    if config["robustness_seeds"] > 0:
        tell(total, "robustness: fresh white-box generation runs", stage="robustness")
        summary["robustness"] = _robustness(config["model"], summary, inputs.source,
                                            inputs.ds, config["robustness_seeds"], children,
                                            run, inputs.parts["evaluation"])
    summary["quality"] = quality_or_reason(inputs.adv, inputs.ds)
    summary["seconds"] = round(time.time() - started, 1)
    summary["run_id"] = run.run_id
    tell(total, "finished", stage="done")
    run.finish(summary)
    return summary


def _source_and_data(model: str, from_run: str, store, dataset, max_inputs, force: bool,
                     progress) -> tuple:
    """The source generation run (another model's refused unless ``force``), its adversarial
    inputs, the data set and the original model, checked against each other."""
    source = store.get(from_run)
    note = check_source_run(source, model, force)   # another model's run: refused unless force
    if note and progress is not None:
        progress({"stage": "check", "message": f"note: {note}", "done": 0, "total": 0})
    adv = adversarial_inputs(source, max_inputs)
    if adv["dropped_invalid"] and progress is not None:
        progress({"stage": "check", "done": 0, "total": 0, "message":
                  f"{adv['dropped_invalid']} adversarial inputs of run {from_run} are set aside "
                  f"as invalid (a reader would not give them their seed's label; "
                  f"docs/validity.md); retraining with the {len(adv['y'])} valid ones"})
    ds = resolve_dataset(model, dataset, source.config)
    base = load_model(model)
    model_head(base).require_classifier("retraining")    # regression, multi-output: refused
    if tuple(base.input_shape[1:]) != tuple(ds.x_test.shape[1:]):
        raise InputError(f"model {model!r} takes inputs {base.input_shape[1:]}, but the data "
                         f"set {ds.name!r} has {ds.x_test.shape[1:]}: pass the right dataset")
    if adv["x"].shape[1:] != ds.x_test.shape[1:]:
        raise InputError(f"the inputs of run {from_run} are shaped {adv['x'].shape[1:]}, not "
                         f"like {ds.name!r} ({ds.x_test.shape[1:]}): wrong run for this model")
    return source, adv, ds, base


def _robustness(model: str, summary: dict, source, ds, n_seeds: int, children, run,
                pool) -> dict:
    """Fresh white-box runs against the original, the best retrained and (with a control
    arm) the best control model, on the same evaluation seeds; ``drop``: original − retrained
    adversarial rate."""
    models = {"original": model, "retrained": summary["best_model"]}
    if "best_control_model" in summary:
        models["control"] = summary["best_control_model"]
    rob = fresh_adversarial_rate(models, source, ds, n_seeds, children,
                                 should_stop=run.cancel_requested, pool=pool)
    rob["drop"] = rob["original"]["adv_rate"] - rob["retrained"]["adv_rate"]
    return rob


def _best_repeats(summary: dict, results: dict, saved: dict) -> None:
    """The best repeat of each arm, on validation (not on evaluation): its model's path."""
    for arm, key in (("generated", "best_model"), ("control", "best_control_model")):
        if arm in results:
            best = int(np.argmax([m["validation_accuracy"] for m in results[arm]]))
            summary[key] = saved[arm][best]
            summary[key.replace("model", "repeat")] = best + 1


def _train_repeats(run, tell, inputs: _Inputs, val: tuple, measure, earlier: dict,
                   arms: list[str], config: dict, summarize, seconds: dict,
                   steps: int) -> tuple[dict, dict]:
    """Train the repeats not done yet, each arm in turn (the generated inputs, or as many
    clean training inputs for the control arm), measure each model and save it in the run;
    the summary is rewritten after every repeat, so a cancelled run keeps what it finished.
    Progress counts training batches (``steps`` an epoch). Returns the per-arm results and
    model paths."""
    base, adv = inputs.base, inputs.adv
    x_fit, y_fit = inputs.fit
    epochs, repeats, seed = config["epochs"], config["repeats"], config["seed"]
    n_extra, total_arms = config["n_inputs"], len(arms)
    results: dict[str, list[dict]] = earlier
    saved = {arm: [m["model_path"] for m in ms] for arm, ms in results.items()}
    for r in range(len(results["generated"]), repeats):
        for a, arm in enumerate(arms):
            clock = time.time()
            if arm == "generated":
                x_extra, y_extra = adv["x"], adv["y"]
            else:
                pick = np.random.default_rng(seed + 1000 + r).choice(
                    len(y_fit), n_extra, replace=n_extra > len(y_fit))
                x_extra, y_extra = x_fit[pick], y_fit[pick]
            watch = _watch(run, tell, config, r, arm, (r * total_arms + a) * epochs, steps)
            done = retrain_once(base, x_fit, y_fit, x_extra, y_extra, epochs,
                                seed=seed + r, batch_size=config["batch_size"],
                                learning_rate=config["learning_rate"],
                                augment=config["augment"], mix=config["mix"],
                                validation=val, callbacks=[watch],
                                fit_inputs=config["fit_inputs"])
            tell(watch.done, f"repeat {r + 1}/{repeats}, {arm} arm: evaluating",
                 stage="evaluate", repeat=r + 1, arm=arm)
            m = measure(done.model)
            m.update(validation_accuracy=done.validation_accuracy,
                     best_epoch=done.best_epoch, validation_curve=done.validation)
            name = "retrained" if arm == "generated" else "control"
            path = run.path / f"{name}-r{r + 1}.keras"
            done.model.save(path)
            m["model_path"] = str(path)
            saved[arm].append(str(path))
            results[arm].append(m)
            key = f"{arm} arm" + (f", repeat {r + 1}" if repeats > 1 else "")
            seconds[key] = round(time.time() - clock, 1)
        # a cancelled run keeps what it finished
        run.save_json("summary", summarize(results))
    return results, saved


def _watch(run, tell, config: dict, r: int, arm: str, first_epoch: int, steps: int):
    """The Keras callback of one retraining: cancel checks, and progress in training batches
    (``steps`` an epoch) from the epoch ``first_epoch`` of the whole job on; ``.done`` is the
    last count told."""
    where = f"repeat {r + 1}/{config['repeats']}, {arm} arm"
    epochs = config["epochs"]

    def at(e: int, b: int) -> None:
        watch.done = (first_epoch + e) * steps + b
        tell(watch.done, f"{where}, epoch {e + 1}/{epochs}, batch {b}/{steps}",
             stage="train", repeat=r + 1, arm=arm, epoch=e + 1, batch=b)

    def at_epoch_end(e: int) -> None:
        watch.done = (first_epoch + e) * steps
        tell(watch.done, f"{where}, epoch {e}/{epochs}", stage="train", repeat=r + 1,
             arm=arm, epoch=e)

    watch = cancel_callback(run, at_epoch_end, on_batch=at)
    watch.done = first_epoch * steps
    return watch


def _earlier_repeats(store, run_id: str, config: dict, arms: list[str]) -> dict:
    """The per-repeat results of the earlier retrain run ``run_id`` to continue from: its
    settings must equal ``config`` but for the number of repeats, and both arms keep as many
    repeats as the shorter one finished (paired), at most ``config["repeats"]``."""
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
