"""The heavy libraries every layer may use but no command should pay for before it needs them:
TensorFlow, Keras, Ray and NLTK. Each is a stand-in module object, imported at the top like any
other import (``from rnncon_core.lazy import tf, keras``), that imports the real library on its
first attribute read (``tf.constant``, ``keras.Model``). Until then the library is not in
``sys.modules``: ``rnncon --help``, the CLI's checks of its arguments and the dashboard's first
page start without TensorFlow (tests/test_layers.py imports every module and fails on one that
loads any of the four; tests/test_bad_inputs.py holds the CLI's checks to it).

This is the one place the project imports these four lazily; every other import sits at the top
of its module (docs/internals.md, "Imports", lists the exceptions and why).
"""
from __future__ import annotations

import importlib
import sys
import types


class LazyModule(types.ModuleType):
    """A module that imports ``name`` on its first attribute read and reads through to it."""

    def __init__(self, name: str):
        super().__init__(name)
        self.__dict__["_target"] = name

    def __getattr__(self, attr: str):
        if attr.startswith("__") and attr.endswith("__"):   # copy, pickle, doctest probing
            raise AttributeError(attr)
        return getattr(importlib.import_module(self.__dict__["_target"]), attr)

    def __dir__(self):
        return dir(importlib.import_module(self.__dict__["_target"]))

    def __repr__(self) -> str:
        loaded = "loaded" if self.__dict__["_target"] in sys.modules else "not loaded yet"
        return f"<lazy module {self.__dict__['_target']!r} ({loaded})>"


tf = LazyModule("tensorflow")
keras = LazyModule("keras")
ray = LazyModule("ray")
nltk = LazyModule("nltk")


def available(module: LazyModule) -> bool:
    """Whether the library behind ``module`` is installed (it is imported now if it is): an
    optional one (Ray) is checked with this before its first use, for a clear error."""
    try:
        importlib.import_module(module.__dict__["_target"])
    except ImportError:
        return False
    return True
