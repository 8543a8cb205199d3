"""Common checks a plugin author runs on a new strategy or criterion (scikit-learn's
``check_estimator`` style): one call that fails with an AssertionError saying what is wrong.

    from rnncon_core.checks import check_criterion, check_generator
    check_generator(Shift)                      # a tiny model and inputs are made for you
    check_criterion(ActiveCoverage, model, x)   # or on your own model and inputs

Our own strategies and criteria pass the same checks (tests/test_generators_common.py,
tests/test_coverage.py).
"""
from __future__ import annotations

import inspect
import json

import numpy as np

from . import text  # noqa: F401  (its strategies join GENERATORS)
from .coverage import CRITERIA, get_criterion
from .coverage.base import Criterion
from .errors import InputError
from .generate import generator_class, get_generator
from .generate.base import Generator
from .lazy import keras
from .params import IntRange, Interval


def tiny_image_model(seed: int = 0):
    """An untrained 8 x 8 LSTM classifier (10 classes) and 6 inputs in [0, 1] with the
    labels it gives them: enough to run a strategy or a criterion once."""
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((8, 8)), keras.layers.LSTM(6, name="lstm_1"),
                              keras.layers.Dense(10, activation="softmax", name="output")])
    x = np.random.default_rng(seed).random((6, 8, 8)).astype(np.float32)
    return model, x, np.asarray(model(x)).argmax(1)


# ---------------------------------------------------------------- declarations

def check_declaration(cls, base: type, extra=()) -> None:
    """Every keyword ``__init__`` takes (but ``model``, ``**kw`` and the ``extra`` run
    settings) is declared in ``cls.params``, and each declared default passes its own check."""
    assert isinstance(cls, type) and issubclass(cls, base), \
        f"{cls!r} is not a {base.__name__} subclass"
    declared = set(cls.params.names)
    for name, p in inspect.signature(cls.__init__).parameters.items():
        if name in ("self", "model") or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        assert name in declared or name in extra, \
            f"{cls.__name__}.__init__ takes {name!r}, which is not declared in params " \
            f"(declare it as Param({name!r}, ...), or list it in accepts)"
    for p in cls.params:
        if p.default is not None:
            p.validate(p.default)


def _out_of_range(cls):
    """(name, bad value) for every declared number: one below its lower bound."""
    return [(p.name, p.check.lo - 1) for p in cls.params
            if isinstance(p.check, (Interval, IntRange))]


def _raises(fn, what: str) -> None:
    try:
        fn()
    except InputError:
        return
    raise AssertionError(f"{what}: no InputError")


# ---------------------------------------------------------------- strategies

def check_generator(cls, model=None, x=None, y=None, **params) -> None:
    """The common checks of a generation strategy (a Generator subclass or a registered
    name): declaration, construction with defaults, a run on a tiny batch (shapes, bounds,
    confidences), the same result under the same seed, an empty run when stopped before the
    first batch, ``get_config`` round-trip through JSON and ``get_generator``, and an
    InputError for an out-of-range value or an unknown keyword. Without ``model``, an image
    strategy runs on ``tiny_image_model()``; ``params``: extra keywords (e.g. ``others=``)."""
    cls = generator_class(cls) if isinstance(cls, str) else cls
    check_declaration(cls, Generator, extra=cls.accepted())
    assert cls.method, f"{cls.__name__} has no method name (register it)"
    assert cls.input_kind in ("image", "text"), f"input_kind {cls.input_kind!r}"
    if model is None:
        assert cls.input_kind == "image", "give a text model, seeds and labels to check a " \
                                          "text strategy"
        model, x, y = tiny_image_model()
    make = lambda **kw: get_generator(cls.method, model,  # noqa: E731
                                      **{"seed": 0, "batch_size": 4, **params, **kw})
    gen = make()
    res = gen.generate(x, y)
    n = len(x)
    assert res.x_gen.shape == np.asarray(x).shape and res.n == n, "one output per seed"
    for name in ("adversarial", "pred_seed", "pred_gen", "conf_gen", "iterations"):
        assert len(getattr(res, name)) == n, f"result.{name} has not one value per seed"
    assert np.all((res.conf_gen >= 0) & (res.conf_gen <= 1)), "confidences outside [0, 1]"
    if cls.input_kind == "image":
        assert res.x_gen.min() >= 0 and res.x_gen.max() <= 1, "images leave [0, 1]"
    summary = res.summary("check")
    assert summary["n_seeds"] == n and 0 <= summary["adv_rate"] <= 1
    np.testing.assert_array_equal(make().generate(x, y).x_gen, res.x_gen,
                                  err_msg="the same seed gave another result")
    stopped = make().generate(x, y, should_stop=lambda: True)
    assert stopped.stopped and stopped.n == 0, "stopped before the first batch: not empty"
    config = gen.get_config()
    assert json.loads(json.dumps(config)) == config, "get_config() is not plain JSON"
    again = get_generator(cls.method, model, **{**params, **config})
    assert type(again) is cls and again.get_config() == config, "get_config() round-trip"
    for name, bad in _out_of_range(cls):
        _raises(lambda: make(**{name: bad}), f"{name}={bad}")
    _raises(lambda: make(no_such_keyword=1), "an unknown keyword")


# ---------------------------------------------------------------- criteria

def check_criterion(cls, model=None, x=None) -> None:
    """The common checks of a coverage criterion (a Criterion subclass or a registered name):
    declaration, rate and covered within bounds, monotone under update, ``reset`` gives 0,
    ``merge`` of two halves equals one update over the whole, ``get_config`` round-trip
    through JSON and ``get_criterion``, and an InputError for an out-of-range value or an
    unknown keyword. Without ``model``, it runs on ``tiny_image_model()`` (a profile-based
    criterion needs its profile built first)."""
    cls = CRITERIA.load(cls) if isinstance(cls, str) else cls
    check_declaration(cls, Criterion)
    assert cls.name, f"{cls.__name__} has no name (register it)"
    if model is None:
        model, x, _ = tiny_image_model()
    cov = cls(model)
    assert cov.rate() == 0 and cov.covered == 0, "a new criterion covers something"
    cov.update(x[: len(x) // 2])
    first = cov.rate()
    cov.update(x[len(x) // 2:])
    rate = cov.rate()
    assert 0 <= first <= rate <= 1, f"rate not monotone in [0, 1]: {first} then {rate}"
    assert 0 <= cov.covered <= cov.total and cov.n_inputs == len(x)
    whole = cls(model).update(x)
    assert whole.rate() == rate and whole.covered == cov.covered, "two updates != one"
    halves = cls(model).update(x[: len(x) // 2]).merge(cls(model).update(x[len(x) // 2:]))
    assert halves.covered == whole.covered, "merge of two halves != one update"
    cov.reset()
    assert cov.rate() == 0 and cov.n_inputs == 0, "reset() does not give an empty state"
    config = json.loads(json.dumps(whole.get_config()))
    again = get_criterion(cls.name, model, **{k: v for k, v in config.items() if k != "name"})
    assert again.get_config() == whole.get_config(), "get_config() round-trip"
    for name, bad in _out_of_range(cls):
        _raises(lambda: cls(model, **{name: bad}), f"{name}={bad}")
    _raises(lambda: cls(model, no_such_keyword=1), "an unknown keyword")
