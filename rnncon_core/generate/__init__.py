"""Test generation: one class per strategy on one base class, a registry, one entry point.

    gen = get_generator("rconc", model, target="lstm_1", k=2, constraint="light")
    result = gen.generate(x_seeds, y_seeds)          # GenerationResult
    summary = run_generation("mnist-lstm", "rconc", n_seeds=100)   # stored in the run store

Image methods: rconc (RNNCon-Test), nc (DeepXplore's NC objective), rnntest (RNN-Test),
differential (DeepXplore), fgsm, pgd, noise. Text methods (``eda``, ``synonym-gradient``)
live in ``rnncon_core.text`` and register themselves with ``register_generator``.
"""
from __future__ import annotations

import importlib

from ..errors import InputError
from .base import BatchOutput, GenerationResult, Generator, GradientGenerator, predict_proba
from .constraints import CONSTRAINTS, get_constraint

IMAGE_METHODS = ("rconc", "nc", "rnntest", "differential", "fgsm", "pgd", "noise")
TEXT_METHODS = ("eda", "synonym-gradient")
_REGISTRY: dict[str, type] = {}
_LAZY = {"rconc": ("guided", "ContributionGuided"), "nc": ("guided", "NeuronGuided"),
         "rnntest": ("guided", "StateGuided"), "differential": ("differential", "Differential"),
         "fgsm": ("baselines", "FGSM"), "pgd": ("baselines", "PGD"),
         "noise": ("baselines", "Noise")}


def register_generator(name: str):
    """Class decorator: make a Generator subclass available as ``get_generator(name, ...)``.
    Its ``input_kind`` ("image" or "text") says what seeds it takes."""
    def deco(cls):
        if not (isinstance(cls, type) and issubclass(cls, Generator)):
            raise TypeError(f"{cls!r} is not a Generator subclass")
        if not cls.method:
            cls.method = name
        _REGISTRY[name] = cls
        return cls
    return deco


def _load_text() -> None:
    try:
        importlib.import_module("rnncon_core.text")
    except ImportError:     # the text package is optional here
        pass


def generator_class(method: str) -> type:
    if method in _LAZY and method not in _REGISTRY:
        module, cls = _LAZY[method]
        register_generator(method)(getattr(importlib.import_module(f".{module}", __name__), cls))
    if method not in _REGISTRY:
        _load_text()
    if method not in _REGISTRY:
        known = sorted(set(IMAGE_METHODS) | set(_REGISTRY))
        extra = "" if all(t in _REGISTRY for t in TEXT_METHODS) else \
            f" (text methods {', '.join(TEXT_METHODS)} need rnncon_core.text)"
        raise InputError(f"unknown generation method {method!r}; choose one of "
                         f"{', '.join(known)}{extra}")
    return _REGISTRY[method]


def get_generator(method: str, model, **params) -> Generator:
    """An instance of the strategy ``method`` for ``model`` (bad parameters: InputError)."""
    cls = generator_class(method)
    try:
        return cls(model, **params)
    except TypeError as e:
        raise InputError(f"bad parameters for method {method!r}: {e}") from None


def list_generators() -> dict[str, str]:
    """method -> input kind, for every method available here."""
    for m in IMAGE_METHODS:
        generator_class(m)
    _load_text()
    return {name: cls.input_kind for name, cls in sorted(_REGISTRY.items())}


def __getattr__(name: str):
    # the strategy classes load on first use (they pull in the coverage engine)
    for method, (module, cls) in _LAZY.items():
        if name == cls:
            return getattr(importlib.import_module(f".{module}", __name__), cls)
    if name in ("run_generation", "select_seeds", "model_dataset"):
        return getattr(importlib.import_module(".runner", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BatchOutput", "GenerationResult", "Generator", "GradientGenerator", "predict_proba",
           "CONSTRAINTS", "get_constraint", "IMAGE_METHODS", "TEXT_METHODS",
           "register_generator", "get_generator", "generator_class", "list_generators",
           "run_generation", "select_seeds", "model_dataset", "ContributionGuided",
           "NeuronGuided", "StateGuided", "Differential", "FGSM", "PGD", "Noise"]
