"""``run_generation``: the one entry point of the CLI and the dashboard.

It loads the model and its data set, picks the seeds (by default the first N inputs of the
test split the model predicts right, so two methods with the same N see the same seeds), runs
the strategy batch by batch inside a run of the run store (outputs.npz and summary.json are
rewritten after every batch, so a cancelled or crashed run keeps every finished seed) and
returns the summary.
"""
from __future__ import annotations

import os
from typing import Callable

import numpy as np

from .. import text  # noqa: F401  (its strategies join GENERATORS)
from ..data import class_labels, load_dataset
from ..errors import InputError, JobCancelled
from ..generate import generator_class, get_generator
from ..generate.base import GenerationResult, model_head, seed_box, select_seeds
from ..params import check_args
from ..runs import RunStore
from ..trace import check_model_inputs, input_domain, other_dtypes, set_kind, to_float32
from ..validity import is_fitted, oracle_for
from ..zoo import load_model, model_datasets, with_steps
from .distributed import check_address, generate as on_ray


def model_dataset(model, name_or_path: str | os.PathLike | None = None) -> str:
    """The data set a model was trained on: its architecture's or model card's, else the first
    that fits its input (:func:`rnncon_core.zoo.model_datasets`)."""
    fits = model_datasets(name_or_path, model)
    if fits:
        return fits[0]
    shape = tuple(model.input_shape[1:])
    raise InputError(f"cannot tell which data set fits a model with input {shape}: give "
                     f"your own seeds (CLI: --inputs X.npy --labels Y.npy; Python: inputs=, "
                     f"labels=) or a data set (--dataset NAME / dataset=: mnist, "
                     f"fashion-mnist, imdb, digits)")


def generation_config(model, generator, *, dataset: str, split: str, n_seeds: int, seed: int,
                      correct_only: bool, seed_indices_given: bool, others=()) -> dict:
    """The configuration a generation run stores, and what ``find_generation`` asks the store
    for: the request (model, data, seeds) and the generator's whole ``get_config()``."""
    return {"method": generator.method, "model": str(model), "dataset": dataset,
            "split": split, "n_seeds": int(n_seeds), "seed": int(seed),
            "correct_only": bool(correct_only), "seed_indices_given": bool(seed_indices_given),
            "others": [str(o) for o in others], "generator": generator.get_config(),
            "revision": generator.revision}


def find_generation(store, model: str, method: str, n_seeds: int | None = None, *,
                    seed: int = 0, seed_indices=None, split: str = "test",
                    dataset: str | None = None, correct_only: bool = True, others=(),
                    batch_size: int | None = None, keras_model=None, children: bool = True,
                    **params):
    """The finished run that ``run_generation`` with these very arguments would make, or None
    (``RunStore.find_finished``: the same model file, the same stored configuration with the
    generator's whole ``get_config()``, the same seeds). A run at any other setting, even one
    left at another default, is never taken for this one."""
    keras_model = keras_model if keras_model is not None else load_model(model)
    if batch_size is not None:
        params["batch_size"] = batch_size
    if others:
        params["others"] = [load_model(o) for o in others]
    gen = get_generator(method, keras_model, seed=seed, **params)
    if seed_indices is not None:
        seed_indices = np.asarray(seed_indices, np.int64).reshape(-1)
        n_seeds = len(seed_indices)
    config = generation_config(
        model, gen, dataset=dataset or model_dataset(keras_model, model), split=split,
        n_seeds=n_seeds, seed=seed, correct_only=correct_only,
        seed_indices_given=seed_indices is not None, others=others)
    return store.find_finished(model, config, seeds=seed_indices, children=children)


def run_generation(model: str, method: str, n_seeds: int = 100, *, seed: int = 0,
                   seed_indices=None, split: str = "test", dataset: str | None = None,
                   inputs=None, labels=None,
                   correct_only: bool = True, others=(), batch_size: int | None = None, store=None,
                   progress: Callable[[int, int], None] | None = None,
                   should_stop: Callable[[], bool] | None = None, workers: int = 0,
                   ray_address: str | None = None, kind: str | None = None,
                   inputs_source: dict | None = None, note: Callable[[str], None] | None = None,
                   **params) -> dict:
    """Generate one input per seed with ``method`` and store the run.

    ``model``: a shipped name or a .keras path. Seeds come from ``inputs`` and ``labels``
    (arrays, e.g. a user's own test set) or from the ``split`` of ``dataset`` (default: the
    model's). ``others``: names/paths of the other models (``differential``). ``params``: the
    strategy's own (target, k, constraint, step, ...). Inputs, labels and the model's head are
    checked before the model runs. ``workers``/``ray_address``: split the seeds over Ray actors
    (rnncon_core.jobs.distributed; the same inputs as one process). ``kind`` ("image",
    "sequence", "text") overrides the guess from the input shape (trace.set_kind);
    ``inputs_source`` (e.g. the files of ``inputs`` and ``labels``) is recorded in the run's
    config, so that retraining can say what to pass. A float64 model runs as a float32 copy
    (same weights, cast) for a method that does not read the trace (PGD, FGSM, noise); the
    config records it and ``note`` (e.g. the CLI's stderr) is told. Returns the summary plus
    ``run_id`` and ``outputs``."""
    check_args(prefix="", seed=seed, n=int(n_seeds) if seed_indices is None else None)
    cls = generator_class(method)      # unknown method: fail before loading anything
    keras_model = load_model(model)
    converted = _float32_for(cls, keras_model)
    if converted is not None:
        keras_model, was = converted
        if note is not None:
            note(f"the model computes in {was}; method {method!r} reads only its outputs and "
                 f"gradients, so it runs on a float32 copy (the same weights, cast)")
    head = model_head(keras_model).require_classifier(f"method {method!r}")
    keras_model, x_all, y_all, ds_name, split = _seed_data(
        model, keras_model, cls, head, inputs, labels, dataset, split, kind)
    idx = _seed_indices(seed_indices, keras_model, x_all, y_all, n_seeds, correct_only, split)
    if cls.needs_others:
        if not others:
            raise InputError(f"method {method!r} compares models: give the other models as "
                             f"others= (CLI: --models a,b)")
        params["others"] = [load_model(o) for o in others]
    if batch_size is not None:
        params["batch_size"] = batch_size
    gen = get_generator(method, keras_model, seed=seed, **params)

    store = store if store is not None else RunStore()
    config = generation_config(model, gen, dataset=ds_name, split=split, n_seeds=len(idx),
                               seed=seed, correct_only=correct_only,
                               seed_indices_given=seed_indices is not None, others=others) \
        | ({"kind": kind} if kind else {}) \
        | ({"inputs_source": inputs_source} if inputs_source else {}) \
        | ({"model_dtype": f"{converted[1]}, run as a float32 copy"} if converted else {})
    name = str(model)
    if workers or ray_address:                 # before the run exists: a wrong argument
        _check_ray(gen, model, ray_address)    # leaves no failed run behind
    with store.start("generate", model=name, method=method, config=config) as run:
        run.save_npz("seeds", seed_index=idx, y_seed=y_all[idx])
        run.progress(0, len(idx), "starting", unit="seeds")

        result = _generate(run, gen, x_all[idx], y_all[idx], idx, name, progress, should_stop,
                           workers, ray_address, model, method, seed, params)
        _check_validity(result, ds_name)
        summary = result.summary(name)
        if result.stopped:       # the finished seeds' outputs, whole, once (if there are any)
            if result.n:
                run.save_npz("outputs", **result.arrays(idx[:result.n]))
            run.save_json("targets", result.target_info)
            raise JobCancelled(f"run {run.run_id} was cancelled after {result.n} of {len(idx)} "
                               f"seeds; they are kept in {run.path}")
        outputs = run.save_npz("outputs", **result.arrays(idx))
        run.save_json("targets", result.target_info)
        run.finish(summary)
    return {"run_id": run.run_id, **summary, "outputs": str(outputs)}


def _float32_for(cls, keras_model):
    """(a float32 copy, its dtypes) of a model that does not compute in float32 when method
    ``cls`` does not read the trace (which runs float32 only); else None (the trace's own
    check refuses it, naming trace.to_float32)."""
    dtypes = other_dtypes(keras_model)
    if cls.traces or not dtypes:
        return None
    return to_float32(keras_model), ", ".join(dtypes)


def _check_validity(result, dataset) -> None:
    """The generated inputs checked by the data set's validity oracle, where its checks are
    fitted (``validity``; text generators check their own edits): ``valid`` and
    ``invalid_reason`` per seed in the outputs, the valid-adversarial rate in the summary."""
    if not result.n or "valid" in result.extras or result.input_kind == "text" or \
            dataset in (None, "inputs") or not is_fitted(dataset):
        return
    v = oracle_for(dataset, result.input_kind, train=False).check(
        result.x_gen, result.y_seed, result.x_seed)
    result.extras["valid"] = v.valid
    result.extras["invalid_reason"] = v.reason


def _seed_data(model, keras_model, cls, head, inputs, labels, dataset, split, kind):
    """The inputs and labels the seeds are picked from (the user's own arrays, or a split of a
    data set), checked against the model and the strategy; returns the model fixed to their
    number of steps, the inputs, the labels, the data's name and the split."""
    method = cls.method
    if (inputs is None) != (labels is None):
        raise InputError("give inputs and labels together (CLI: --inputs X.npy --labels "
                         "Y.npy), one label per input")
    if inputs is not None:
        if dataset:
            raise InputError("give either a data set or your own inputs and labels, not both")
        x_all = check_model_inputs(keras_model, inputs, "inputs", kind)
        ds_name, split, ds_kind = "inputs", "inputs", \
            "text" if input_domain(keras_model) == "ids" else "image"
        y_all, _ = class_labels(labels, len(x_all))
    else:
        ds = load_dataset(dataset or model_dataset(keras_model, model), kind)
        ds_name, ds_kind = ds.name, kind or ds.kind
        x_all, y_all = ds.split(split)
        x_all = check_model_inputs(keras_model, x_all, f"the {ds_name} {split} inputs",
                                   kind or (ds.kind if ds.kind == "sequence" else None))
    y_all = head.check_labels(y_all)
    told = getattr(keras_model, "__dict__", {}).get("_rnncon_kind")
    keras_model = with_steps(keras_model, x_all.shape[1])   # keras.Input((None, F)) models
    set_kind(keras_model, told)                             # a copy keeps what --kind said
    if cls.input_kind == "image" and ds_kind == "text":
        raise InputError(f"method {method!r} perturbs images, but {model} reads {ds_kind}; use "
                         f"a text method ({', '.join(m for m in ('eda', 'synonym-gradient'))})")
    if cls.input_kind == "text" and ds_kind != "text":
        raise InputError(f"method {method!r} edits text, but {model} reads {ds_kind}")
    if cls.input_kind == "image":
        seed_box(keras_model, x_all, method)               # before any seed is picked
    return keras_model, x_all, y_all, ds_name, split


def _seed_indices(seed_indices, keras_model, x_all, y_all, n_seeds, correct_only, split):
    """The seeds: the given indices (checked), or the first ``n_seeds`` inputs the model
    predicts right (``select_seeds``)."""
    if seed_indices is not None:
        idx = np.asarray(seed_indices, np.int64).reshape(-1)
        if len(idx) == 0:
            raise InputError("the seed set is empty: give at least one seed index")
        if idx.min() < 0 or idx.max() >= len(x_all):
            raise InputError(f"seed indices must lie in [0, {len(x_all)}) for the {split} split")
    else:
        idx = select_seeds(keras_model, x_all, y_all, int(n_seeds), correct_only)
    return idx


def _check_ray(gen, model, ray_address) -> None:
    """What a generation on Ray needs, checked before its run is recorded."""
    if gen.needs_others or not isinstance(model, str):
        raise InputError("--workers needs a model every worker can load (a shipped "
                         "name or a .keras path) and is not for a method that "
                         "compares models")
    if ray_address:
        check_address(ray_address)


def _generate(run, gen, x, y, idx, name, progress, should_stop, workers, ray_address, model,
              method, seed, params):
    """Run the strategy on the seeds inside ``run`` (each finished batch appended to the run's
    outputs, progress and cancel requests through the run), on Ray actors with ``workers`` or
    ``ray_address``; returns the GenerationResult."""
    written = [0]            # seeds whose outputs are on disk: each batch is appended once

    def on_batch(partial: GenerationResult) -> None:
        arrays = partial.arrays(idx[:partial.n])
        run.append_npz("outputs", **{k: v[written[0]:] for k, v in arrays.items()})
        written[0] = partial.n
        run.save_json("summary", {**partial.summary(name), "partial": True})

    def report(done: int, total: int) -> None:
        run.progress(done, total, unit="seeds")
        if progress is not None:
            progress(done, total)

    stop = (lambda: run.cancel_requested() or bool(should_stop and should_stop()))
    if workers or ray_address:
        result = on_ray(model, x, y, method, workers=workers or 2,
                        address=ray_address, progress=report, should_stop=stop, seed=seed,
                        **params)
    else:
        result = gen.generate(x, y, progress=report, should_stop=stop,
                              on_batch=on_batch)
    return result
