"""RNNCon-Test: contribution coverage and test generation for recurrent networks.

The public names are imported lazily, so ``import rnncon_core`` stays cheap and
TensorFlow is loaded only when a model is touched.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "load_dataset": "data", "Dataset": "data", "to_images": "data", "from_images": "data",
    "build_model": "zoo", "load_model": "zoo", "train_model": "zoo", "ARCHITECTURES": "zoo",
    "ContributionCoverage": "coverage", "NeuronCoverage": "coverage",
    "HiddenStateCoverage": "coverage", "CellStateCoverage": "coverage",
    "get_criterion": "coverage", "select_threshold": "coverage",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        module = importlib.import_module(f".{_EXPORTS[name]}", __name__)
        return getattr(module, name)
    raise AttributeError(f"module 'rnncon_core' has no attribute {name!r}")
