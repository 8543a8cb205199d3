"""One set of checks over every registered generation strategy (scikit-learn's check_estimator
style): construction with defaults, a tiny batch on a tiny model, shapes and bounds of what
comes back, the same result under the same seed, and a clear error for the wrong data kind."""
from __future__ import annotations

import numpy as np
import pytest

from rnncon_core.errors import InputError
from rnncon_core.generate import get_generator, list_generators
from tests.test_text_generators import setup as text_setup  # noqa: F401  (a fixture)

METHODS = list_generators()
# the smallest settings that exercise each strategy (defaults otherwise)
CHEAP = {"rconc": dict(iterations=3, threshold=0.9), "nc": dict(iterations=3, threshold=0.9),
         "rnntest": dict(iterations=3), "differential": dict(iterations=3),
         "pgd": dict(iterations=3), "fgsm": {}, "noise": {}, "eda": {},
         "synonym-gradient": {}}


def test_every_registered_method_is_checked():
    assert set(CHEAP) == set(METHODS)


@pytest.fixture(scope="module")
def image_setup():
    import keras
    from rnncon_core.data import load_dataset
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8, 8)), keras.layers.LSTM(6, name="lstm_1"),
                              keras.layers.Dense(10, activation="softmax", name="output")])
    other = keras.models.clone_model(model)
    other.set_weights([w * 0.9 for w in model.get_weights()])
    x = load_dataset("digits").x_test[:6]
    return model, other, x, np.asarray(model(x)).argmax(1)


def _make(method, image_setup, text_setup, seed=0):
    if METHODS[method] == "text":
        model, lex, x, y = text_setup
        extra = {"lexicon": lex, "threshold": 0.5}
    else:
        model, other, x, y = image_setup
        extra = {"others": [other]} if method == "differential" else {}
    return get_generator(method, model, seed=seed, batch_size=4, **CHEAP[method], **extra), x, y


@pytest.mark.parametrize("method", sorted(METHODS))
def test_common_generator_checks(method, image_setup, text_setup):
    gen, x, y = _make(method, image_setup, text_setup)
    assert gen.method == method and gen.input_kind == METHODS[method]
    config = gen.get_config()
    assert config["method"] == method and config["seed"] == 0
    res = gen.generate(x, y)
    n = len(x)
    assert res.x_gen.shape == x.shape and res.n == n
    for arr in (res.adversarial, res.pred_seed, res.pred_gen, res.conf_gen, res.iterations):
        assert len(arr) == n
    assert np.all((res.conf_gen >= 0) & (res.conf_gen <= 1))
    if gen.input_kind == "image":
        assert res.x_gen.min() >= 0 and res.x_gen.max() <= 1
    else:
        vocab = text_setup[0].layers[0].input_dim
        assert res.x_gen.dtype.kind == "i" and res.x_gen.min() >= 0 and res.x_gen.max() < vocab
    summary = res.summary("tiny")
    assert summary["n_seeds"] == n and 0 <= summary["adv_rate"] <= 1
    again, _, _ = _make(method, image_setup, text_setup)
    np.testing.assert_array_equal(again.generate(x, y).x_gen, res.x_gen)   # same seed


@pytest.mark.parametrize("method", sorted(METHODS))
def test_a_run_cancelled_before_its_first_batch_is_empty(method, image_setup, text_setup):
    # the dashboard's Cancel can land before the first batch (differential's oracle crashed)
    gen, x, y = _make(method, image_setup, text_setup)
    res = gen.generate(x, y, should_stop=lambda: True)
    assert res.stopped and res.n == 0 and res.summary("tiny")["n_seeds"] == 0


@pytest.mark.parametrize("method", sorted(METHODS))
def test_wrong_data_kind_is_refused(method, image_setup, text_setup):
    gen, _, _ = _make(method, image_setup, text_setup)
    if gen.input_kind == "image":
        wrong = np.ones((2, 8, 8), np.int64)                    # word ids, not images
    else:
        wrong = np.random.default_rng(0).random((2, text_setup[2].shape[1])).astype("float32")
    with pytest.raises(InputError):
        gen.generate(wrong, np.zeros(2, np.int64))


@pytest.mark.parametrize("method", sorted(METHODS))
def test_config_round_trip(method, image_setup, text_setup):
    """get_config() -> get_generator(method, model, **config) gives an equal generator, and
    the config is what the run store can keep (JSON)."""
    import json
    gen, _, _ = _make(method, image_setup, text_setup, seed=3)
    config = gen.get_config()
    assert json.loads(json.dumps(config)) == config
    model = text_setup[0] if METHODS[method] == "text" else image_setup[0]
    objects = ({"lexicon": text_setup[1]} if METHODS[method] == "text" else
               {"others": [image_setup[1]]} if method == "differential" else {})
    again = get_generator(method, model, **objects, **config)
    assert type(again) is type(gen) and again.get_config() == config


@pytest.mark.parametrize("method", sorted(METHODS))
def test_declared_parameters_are_checked(method, image_setup, text_setup):
    """Every declared number is checked on construction: a value outside its range is an
    InputError that names the parameter, what it allows and the value."""
    from rnncon_core.generate import generator_class
    from rnncon_core.params import IntRange, Interval
    cls = generator_class(method)
    model = text_setup[0] if METHODS[method] == "text" else image_setup[0]
    numbers = [p for p in cls.params if isinstance(p.check, (Interval, IntRange))]
    assert numbers, f"{method} declares no number"
    for p in numbers:
        bad = p.check.lo - 1
        with pytest.raises(InputError, match=rf"^{p.name} must be .*{p.check.lo:g}.*got {bad}"):
            cls(model, **{p.name: bad})
    with pytest.raises(InputError, match=f"no_such_thing.*it takes {cls.params.names[0]}"):
        get_generator(method, model, no_such_thing=1)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_stored_settings_are_read_back_by_the_declaration(method, image_setup, text_setup):
    """Retraining and Table 2 read a stored run's settings through its method's declaration:
    every declared value comes back (run settings such as batch size and seed do not)."""
    from rnncon_core.retrain import generator_params
    gen, _, _ = _make(method, image_setup, text_setup)
    config = gen.get_config()
    params = generator_params({"method": method, "generator": config})
    assert params == {k: v for k, v in config.items() if k in gen.params}


def test_settings_of_runs_stored_before_the_declarations():
    """The layout runs were stored in before: the constraint as a dict, rconc's criterion
    settings apart (normalize and values were dropped then), extra keys."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from dashboard.tables import generator_settings
    from rnncon_core.retrain import generator_params
    old = {"method": "rconc", "generator": {
        "method": "rconc", "batch_size": 256, "seed": 0, "step": 0.02, "iterations": 50,
        "window": 128, "constraint": {"name": "occlusion", "size": [10, 10], "position": None},
        "target": "lstm_1", "k": 2, "pool": "auto", "short": "error", "threshold": 0.25,
        "stop_on_target": False, "criterion": "rconc",
        "criterion_params": {"granularity": "edge", "normalize": "layer", "values": "abs"}}}
    params = generator_params(old)
    assert params["constraint"] == "occlusion" and params["size"] == [10, 10]
    assert "position" not in params and "criterion" not in params and "seed" not in params
    assert (params["granularity"], params["normalize"], params["values"]) == ("edge", "layer",
                                                                              "abs")
    assert generator_settings(old) == {"layer": "lstm_1", "constraint": "occlusion"}
    assert generator_settings({"method": "gone", "generator": {}}) == {"layer": "Random",
                                                                     "constraint": "none"}
