"""One rule for "is there a stored run for this request?" (RunStore.find_finished, through
jobs.find_generation): the same model file, the same seeds, the generator's whole
get_config(). A run made at any other setting is never reused, by retraining or any report."""
from __future__ import annotations

import numpy as np
import pytest

from rnncon_core.generate import get_generator
from rnncon_core.jobs import find_generation, generation_config
from rnncon_core.runs import RunStore


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    """A tiny digits-shaped classifier saved as a .keras file (8 steps of 8 features)."""
    import keras
    keras.utils.set_random_seed(4)
    m = keras.Sequential([keras.Input((8, 8)), keras.layers.LSTM(4, name="lstm_1"),
                          keras.layers.Dense(10, activation="softmax", name="output")])
    path = tmp_path_factory.mktemp("m") / "m.keras"
    m.save(path)
    return str(path), m


def _store_run(store, model_file, method, n_seeds=4, seeds=None, **params):
    """A finished run stored the way run_generation stores it (nothing is generated)."""
    path, keras_model = model_file
    gen = get_generator(method, keras_model, seed=0, **params)
    idx = np.arange(n_seeds) if seeds is None else np.asarray(seeds)
    config = generation_config(path, gen, dataset="digits", split="test", n_seeds=len(idx),
                               seed=0, correct_only=True, seed_indices_given=seeds is not None)
    with store.start("generate", model=path, method=method, config=config) as run:
        run.save_npz("seeds", seed_index=idx)
        run.save_npz("outputs", adversarial=np.zeros(len(idx), bool))
        run.finish({"n_seeds": len(idx), "n_adversarial": 0})
    return run.run_id


def _find(store, model_file, method, n_seeds=4, **params):
    path, keras_model = model_file
    info = find_generation(store, path, method, n_seeds, dataset="digits",
                           keras_model=keras_model, **params)
    return None if info is None else info.run_id


@pytest.mark.parametrize("method,stored,asked", [
    ("pgd", {}, {"step": 0.05}),                               # a setting left at its default
    ("pgd", {"step": 0.05}, {}),                               # ... either way round
    ("pgd", {}, {"iterations": 7}),
    ("pgd", {"constraint": "occlusion"}, {"constraint": "occlusion", "size": [3, 3]}),
    ("pgd", {}, {"batch_size": 2}),                            # batches have their own streams
    ("rconc", {}, {"pool": "seed"}),
    ("rconc", {}, {"target": "lstm_1"}),
    ("fgsm", {}, {"eps": 0.2}),
    # DeepXplore's blackout settings (the generation report's) against our defaults
    ("rconc", {"constraint": "blackout"}, {"constraint": "blackout", "size": 6, "patches": 1,
                                           "scale": 500.0}),
])
def test_a_run_at_other_settings_is_never_reused(tmp_path, model_file, method, stored, asked):
    store = RunStore(tmp_path / "runs")
    run_id = _store_run(store, model_file, method, **stored)
    assert _find(store, model_file, method, **stored) == run_id          # the same request
    assert _find(store, model_file, method, **asked) is None


def test_explicit_defaults_are_the_same_request(tmp_path, model_file):
    store = RunStore(tmp_path / "runs")
    run_id = _store_run(store, model_file, "pgd")
    assert _find(store, model_file, "pgd", step=get_generator(
        "pgd", model_file[1]).get_config()["step"]) == run_id


def test_a_run_of_another_revision_of_the_method_is_never_reused(tmp_path, model_file,
                                                                   monkeypatch):
    """A run made before the method's algorithm changed (e.g. its minimization stage) has the
    same settings but other outputs: it is not the answer."""
    from rnncon_core.generate.base import GradientGenerator
    store = RunStore(tmp_path / "runs")
    run_id = _store_run(store, model_file, "pgd")
    assert _find(store, model_file, "pgd") == run_id
    monkeypatch.setattr(GradientGenerator, "revision", GradientGenerator.revision + 1)
    assert _find(store, model_file, "pgd") is None


def test_other_seeds_method_or_model_file_are_other_requests(tmp_path, model_file):
    path, keras_model = model_file
    store = RunStore(tmp_path / "runs")
    _store_run(store, model_file, "pgd", seeds=[3, 5, 7])
    given = _store_run(store, model_file, "pgd", n_seeds=4)
    assert _find(store, model_file, "pgd", n_seeds=5) is None
    assert _find(store, model_file, "fgsm") is None
    assert find_generation(store, path, "pgd", seed_indices=[3, 5, 8], dataset="digits",
                           keras_model=keras_model) is None
    assert find_generation(store, path, "pgd", seed_indices=[3, 5, 7], dataset="digits",
                           keras_model=keras_model) is not None
    assert _find(store, model_file, "pgd") == given
    # the same name, another file (retrained weights): nothing stored answers it
    import keras
    other = keras.models.clone_model(keras_model)
    other.save(tmp_path / "m.keras")
    moved = str(tmp_path / "m.keras")
    assert find_generation(store, moved, "pgd", 4, dataset="digits", keras_model=other) is None


def test_every_caller_asks_the_same_rule(tmp_path, model_file, monkeypatch):
    """Retraining's held-out sets and the generation, text and retraining reports find a run
    through jobs.find_generation, and run a new one when the stored run is at other settings."""
    from rnncon_core import jobs
    from rnncon_core.jobs import retraining as retraining_job
    from rnncon_core.reports import generation, retraining, text
    path, keras_model = model_file
    store = RunStore(tmp_path / "runs")
    run_id = _store_run(store, model_file, "pgd", seeds=[0, 1, 2, 3], step=0.05)
    ran = []
    monkeypatch.setattr(jobs, "run_generation",
                        lambda *a, **k: ran.append((a, k)) or {"run_id": "new"})
    asked = []
    real = jobs.find_generation

    def spy(*a, **k):
        asked.append(k)
        if "constraints" in k:            # the text report's request (an IMDB method's)
            return None
        return real(*a, **{"dataset": "digits", **k})
    monkeypatch.setattr(jobs, "find_generation", spy)

    class Digits:
        name = "digits"
    assert retraining_job.generation_on_seeds(path, keras_model, "pgd", np.arange(4), Digits(), store,
                                       step=0.05) == run_id
    assert retraining_job.generation_on_seeds(path, keras_model, "pgd", np.arange(4), Digits(), store,
                                       step=0.06) == "new"
    first4 = _store_run(store, model_file, "pgd", step=0.05)           # the first 4 seeds
    assert retraining.find_or_run_generation(store, path, "pgd", 4, print, step=0.05) == first4
    assert retraining.find_or_run_generation(store, path, "pgd", 4, print) == "new"
    assert generation._reusable(store, path, "pgd", 4, {"step": 0.05})["run_id"] == first4
    assert generation._reusable(store, path, "pgd", 4, {}) is None
    assert text._stored_run(store, path, "pgd", "none", 4, 0.1, None, {}) is None
    assert asked[-1] == {"dataset": "imdb", "max_fraction": 0.1, "max_changes": None,
                         "constraints": "none"}
    assert len(asked) == 7 and len(ran) == 2
