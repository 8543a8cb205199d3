"""RNNCon-Test: contribution coverage and test generation for recurrent networks.

The public names are imported lazily, so ``import rnncon_core`` stays cheap and
TensorFlow is loaded only when a model is touched.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_D = "rnncon_core.data:"
_Z = "rnncon_core.zoo:"
_C = "rnncon_core.coverage:"
_EXPORTS = {
    "load_dataset": _D + "load_dataset", "Dataset": _D + "Dataset",
    "to_images": _D + "to_images", "from_images": _D + "from_images",
    "build_model": _Z + "build_model", "load_model": _Z + "load_model",
    "train_model": _Z + "train_model", "ARCHITECTURES": _Z + "ARCHITECTURES",
    "ContributionCoverage": _C + "ContributionCoverage", "NeuronCoverage": _C + "NeuronCoverage",
    "HiddenStateCoverage": _C + "HiddenStateCoverage",
    "CellStateCoverage": _C + "CellStateCoverage",
    "get_criterion": _C + "get_criterion", "select_threshold": _C + "select_threshold",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        module, _, attr = _EXPORTS[name].partition(":")
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'rnncon_core' has no attribute {name!r}")
