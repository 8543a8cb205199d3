"""The paper's §7 robustness experiment.

Robustness of a system S against a perturbation sigma is the difference of the correctness
E(S) - E(sigma(S)) (the paper after Zhang et al.). As the paper: S is the model s, and sigma(s)
is the same architecture trained for more epochs until it overfits (here: s trained further,
without augmentation or early stopping, at Adam's default rate). Then the inputs generated for s (labelled with their
seeds' labels) join the training data and *both* models retrain on it the same way; the
robustness gap before and after is reported (a smaller gap: more robust).
"""
from __future__ import annotations

import time

import numpy as np

from .. import jobs
from ..errors import InputError
from ..lazy import keras
from ..retrain import (adversarial_inputs, classification_metrics, copy_model, describe_split,
                       fit_split, resolve_dataset, retrain_once, split_test, training_defaults)
from ..runs import RunStore
from ..zoo import load_model


def run_robustness(model: str = "mnist-gru", from_run: str | None = None, n_inputs: int = 500,
                   overfit_epochs: int = 30, epochs: int = 10, repeats: int = 1,
                   overfit_learning_rate: float = 1e-3, seed: int = 0, store=None,
                   progress=None) -> dict:
    """Run the experiment as a run of kind ``robustness``; returns its summary.

    ``from_run``: a generation run against ``model`` (its first ``n_inputs`` adversarial inputs
    are used); None generates one with the paper's setting (RNNCon-Test, random target) on
    ``n_inputs`` seeds, whose adversarial inputs are then used."""
    if min(n_inputs, overfit_epochs, epochs, repeats) < 1:
        raise InputError("n_inputs, overfit_epochs, epochs and repeats must all be >= 1")
    store = store or RunStore()
    emit = progress or (lambda e: None)
    if from_run is None:
        emit({"stage": "generate", "n_seeds": n_inputs})
        from_run = jobs.run_generation(model, "rconc", n_seeds=n_inputs, seed=seed,
                                       store=store)["run_id"]
    source = store.get(from_run)
    adv = adversarial_inputs(source, n_inputs)
    ds = resolve_dataset(model, None, source.config)
    train = training_defaults(model, ds)
    x_fit, y_fit = fit_split(ds, train["validation_split"])
    parts = split_test(ds, adv)      # the evaluation part: nothing here picks an epoch
    x_eval, y_eval = ds.x_test[parts["evaluation"]], ds.y_test[parts["evaluation"]]
    eval_what = describe_split(parts)
    config = {"model": model, "from_run": from_run, "n_inputs": int(len(adv["y"])),
              "overfit_epochs": overfit_epochs, "epochs": epochs, "repeats": repeats,
              "overfit_learning_rate": overfit_learning_rate, "seed": seed,
              "retrain_learning_rate": train["learning_rate"], "augment": train["augment"]}
    started = time.time()
    with store.start("robustness", model=model, method=source.config.get("method"),
                     config=config) as run:
        total = 1 + 2 * repeats
        run.progress(0, total, f"training sigma(s): {overfit_epochs} more epochs")
        emit({"stage": "overfit"})
        s = load_model(model)
        keras.utils.set_random_seed(seed)
        sigma = copy_model(s, overfit_learning_rate)
        sigma.fit(x_fit, y_fit, epochs=overfit_epochs, batch_size=128, shuffle=True, verbose=0)
        sigma.save(run.path / "sigma.keras")
        acc = {"s": classification_metrics(s, x_eval, y_eval)["accuracy"],
               "sigma": classification_metrics(sigma, x_eval, y_eval)["accuracy"]}
        after = {"s": [], "sigma": []}
        for r in range(repeats):
            for i, (label, m) in enumerate((("s", s), ("sigma", sigma))):
                run.check_cancel()
                run.progress(1 + 2 * r + i, total, f"repeat {r + 1}: retraining {label}")
                emit({"stage": "retrain", "repeat": r + 1, "model": label})
                trained = retrain_once(m, x_fit, y_fit, adv["x"], adv["y"], epochs,
                                       seed=seed + r, learning_rate=train["learning_rate"],
                                       augment=train["augment"]).model
                after[label].append(classification_metrics(trained, x_eval, y_eval)["accuracy"])
        gaps = [a - b for a, b in zip(after["s"], after["sigma"])]
        summary = {"model": model, "from_run": from_run, "n_inputs": config["n_inputs"],
                   "evaluated_on": eval_what, "overfit_epochs": overfit_epochs,
                   "epochs": epochs, "repeats": repeats,
                   "before": {"acc_s": acc["s"], "acc_sigma": acc["sigma"],
                              "robustness_gap": acc["s"] - acc["sigma"]},
                   "after": {"acc_s": float(np.mean(after["s"])),
                             "acc_sigma": float(np.mean(after["sigma"])),
                             "robustness_gap": float(np.mean(gaps)),
                             "robustness_gap_std": float(np.std(gaps, ddof=1))
                             if len(gaps) > 1 else 0.0,
                             "per_repeat": {"acc_s": after["s"], "acc_sigma": after["sigma"]}},
                   "seconds": round(time.time() - started, 1), "run_id": run.run_id}
        summary["gap_change"] = (abs(summary["after"]["robustness_gap"])
                                 - abs(summary["before"]["robustness_gap"]))
        run.progress(total, total, "finished")
        run.finish(summary)
    return summary
