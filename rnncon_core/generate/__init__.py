"""Test generation: one class per strategy on one base class, a registry, one entry point.

    gen = get_generator("rconc", model, target="lstm_1", k=2, constraint="light")
    result = gen.generate(x_seeds, y_seeds)          # GenerationResult

A stored run of a strategy (the CLI's and the dashboard's) is ``rnncon_core.jobs.run_generation``.

Image methods: rconc (RNNCon-Test), nc (DeepXplore's NC objective), rnntest (RNN-Test),
differential (DeepXplore), fgsm, pgd, noise. Text methods (``eda``, ``synonym-gradient``)
live in ``rnncon_core.text``. All are in one registry, ``GENERATORS`` (rnncon_core.registry).
"""
from __future__ import annotations

import importlib

from ..errors import InputError
from ..registry import GENERATORS
from .base import BatchOutput, GenerationResult, Generator, GradientGenerator, predict_proba
from .constraints import CONSTRAINTS, get_constraint, register_constraint

# One registry (rnncon_core.registry.GENERATORS): the built-in image strategies, imported on
# first use (they pull in the coverage engine), the text ones (rnncon_core.text declares them),
# the ones registered with @register_generator, and those of installed packages (entry points
# "rnncon.generators").
_BUILTINS = {
    "rconc": "rnncon_core.generate.guided:ContributionGuided",
    "nc": "rnncon_core.generate.guided:NeuronGuided",
    "rnntest": "rnncon_core.generate.guided:StateGuided",
    "differential": "rnncon_core.generate.differential:Differential",
    "fgsm": "rnncon_core.generate.baselines:FGSM",
    "pgd": "rnncon_core.generate.baselines:PGD",
    "noise": "rnncon_core.generate.baselines:Noise"}
GENERATORS.declare(_BUILTINS, base="rnncon_core.generate.base:Generator")


def register_generator(name: str):
    """Class decorator: make a Generator subclass available as ``get_generator(name, ...)``.
    Its ``input_kind`` ("image" or "text") says what seeds it takes."""
    def deco(cls):
        GENERATORS.add(name, cls)
        if not cls.method:
            cls.method = name
        return cls
    return deco


def generator_class(method: str) -> type:
    """The class of strategy ``method`` (InputError naming the known ones if there is none)."""
    cls = GENERATORS.load(method)
    if not cls.method:
        cls.method = method
    return cls


def get_generator(method: str, model, /, **params) -> Generator:
    """An instance of the strategy ``method`` for ``model`` (bad parameters: InputError).
    ``params`` may be a generator's ``get_config()``: the same method gives an equal one."""
    if params.pop("method", method) != method:
        raise InputError(f"a configuration of another method given to {method!r}")
    cls = generator_class(method)
    try:
        return cls(model, **params)
    except TypeError as e:
        raise InputError(f"bad parameters for method {method!r}: {e}; it takes "
                         f"{', '.join(cls.params.names) or 'none'}") from None


def list_generators() -> dict[str, str]:
    """method -> input kind, for every registered method (imports them all)."""
    return {name: generator_class(name).input_kind for name in sorted(GENERATORS.names())}


def __getattr__(name: str):
    # the strategy classes load on first use (they pull in the coverage engine)
    for path in _BUILTINS.values():
        module, _, cls = path.partition(":")
        if name == cls:
            return getattr(importlib.import_module(module), cls)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BatchOutput", "GenerationResult", "Generator", "GradientGenerator", "predict_proba",
           "CONSTRAINTS", "get_constraint", "register_constraint",
           "GENERATORS", "register_generator", "get_generator", "generator_class", "list_generators",
           "ContributionGuided",
           "NeuronGuided", "StateGuided", "Differential", "FGSM", "PGD", "Noise"]
