"""Test generation: one class per strategy on one base class, a registry, one entry point.

    gen = get_generator("rconc", model, target="lstm_1", k=2, constraint="light")
    result = gen.generate(x_seeds, y_seeds)          # GenerationResult

A stored run of a strategy (the CLI's and the dashboard's) is ``rnncon_core.jobs.run_generation``.

Image methods: rconc (RNNCon-Test), nc (DeepXplore's NC objective), rnntest (RNN-Test),
differential (DeepXplore), fgsm, pgd, noise. Text methods (``eda``, ``synonym-gradient``)
live in ``rnncon_core.text``. All are in one lazy registry (``_LAZY``).
"""
from __future__ import annotations

import importlib

from ..errors import InputError
from .base import BatchOutput, GenerationResult, Generator, GradientGenerator, predict_proba
from .constraints import CONSTRAINTS, get_constraint

IMAGE_METHODS = ("rconc", "nc", "rnntest", "differential", "fgsm", "pgd", "noise")
TEXT_METHODS = ("eda", "synonym-gradient")
# One registry: method -> (module, class), imported on first use (the strategies pull in the
# coverage engine, the text ones NLTK and WordNet). Adding a strategy is one line here.
_LAZY = {"rconc": ("rnncon_core.generate.guided", "ContributionGuided"),
         "nc": ("rnncon_core.generate.guided", "NeuronGuided"),
         "rnntest": ("rnncon_core.generate.guided", "StateGuided"),
         "differential": ("rnncon_core.generate.differential", "Differential"),
         "fgsm": ("rnncon_core.generate.baselines", "FGSM"),
         "pgd": ("rnncon_core.generate.baselines", "PGD"),
         "noise": ("rnncon_core.generate.baselines", "Noise"),
         "eda": ("rnncon_core.text.generators", "CoverageEDA"),
         "synonym-gradient": ("rnncon_core.text.generators", "SynonymGradient")}
_REGISTRY: dict[str, type] = {}


def register_generator(name: str):
    """Class decorator: make a Generator subclass available as ``get_generator(name, ...)``
    (for strategies outside this package; ours are listed in ``_LAZY``). Its ``input_kind``
    ("image" or "text") says what seeds it takes."""
    def deco(cls):
        if not (isinstance(cls, type) and issubclass(cls, Generator)):
            raise TypeError(f"{cls!r} is not a Generator subclass")
        if not cls.method:
            cls.method = name
        _REGISTRY[name] = cls
        return cls
    return deco


def generator_class(method: str) -> type:
    if method not in _REGISTRY and method in _LAZY:
        module, cls = _LAZY[method]
        try:
            loaded = importlib.import_module(module)
        except ImportError as e:
            raise InputError(f"method {method!r} needs the Python package "
                             f"{getattr(e, 'name', None) or e}, which is missing here ({e}); "
                             f"run `make setup` (it installs requirements.txt)") from None
        register_generator(method)(getattr(loaded, cls))
    if method not in _REGISTRY:
        known = sorted(set(_LAZY) | set(_REGISTRY))
        raise InputError(f"unknown generation method {method!r}; choose one of "
                         f"{', '.join(known)}")
    return _REGISTRY[method]


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
    """method -> input kind, for every registered method."""
    for m in _LAZY:
        generator_class(m)
    return {name: cls.input_kind for name, cls in sorted(_REGISTRY.items())}


def __getattr__(name: str):
    # the strategy classes load on first use (they pull in the coverage engine)
    for module, cls in _LAZY.values():
        if name == cls and module.startswith(__name__):
            return getattr(importlib.import_module(module), cls)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BatchOutput", "GenerationResult", "Generator", "GradientGenerator", "predict_proba",
           "CONSTRAINTS", "get_constraint", "IMAGE_METHODS", "TEXT_METHODS",
           "register_generator", "get_generator", "generator_class", "list_generators",
           "ContributionGuided",
           "NeuronGuided", "StateGuided", "Differential", "FGSM", "PGD", "Noise"]
