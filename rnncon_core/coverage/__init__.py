"""Coverage criteria over a trace: contribution coverage (RConC), neuron coverage (NC) and
RNN-Test's hidden-state (HS_C) and cell-state (CS_C) coverage.

Every criterion has the life cycle of a Keras metric: parameters in ``__init__``, ``update(x)``
(union over every input so far), ``rate(threshold=None)``, ``reset()``, ``get_config()``. The
state is, per item (contribution, neuron, ...), the largest score any input gave it, plus the
index of the first input that lifted it past each threshold of a small grid; so the rate at any
threshold, ``by_layer`` and ``curve`` need no new forward pass. Conventions: docs/coverage.md.

Where things are: ``params`` (parameter checks), ``base`` (the ``Criterion`` base: its life
cycle), its collaborators ``engine`` (compiled graphs, the chunked update), ``state`` (per-item
maxima and first inputs), ``report`` (tables, uncovered items, the summary), ``targets`` (item
values for generators), ``statefile`` (a state saved and loaded), ``rconc`` (RConC), ``edge``
(the edge-granularity envelope engine), ``nc``, ``rnntest`` (HS_C, CS_C), ``threshold``
(default thresholds and §5.2's selection). The reports that use
them are in ``rnncon_core.reports``.
"""
from __future__ import annotations

import importlib

from ..registry import CRITERIA

_C = "rnncon_core.coverage."
# One registry (rnncon_core.registry): the built-in criteria (below, each module imported on
# first use), those registered with @register_criterion, and those of installed packages
# (entry points "rnncon.criteria").
CRITERIA.declare({
    "rconc": _C + "rconc:ContributionCoverage", "nc": _C + "nc:NeuronCoverage",
    "hsc": _C + "rnntest:HiddenStateCoverage", "csc": _C + "rnntest:CellStateCoverage",
    "bc": _C + "testrnn:BoundaryCoverage", "sc": _C + "testrnn:StepwiseCoverage",
    "tc": _C + "testrnn:TemporalCoverage", "state": _C + "deepstellar:StateCoverage",
    "state-boundary": _C + "deepstellar:StateBoundaryCoverage",
    "state-weighted": _C + "deepstellar:WeightedStateCoverage",
    "transition": _C + "deepstellar:TransitionCoverage",
    "transition-weighted": _C + "deepstellar:WeightedTransitionCoverage",
    "kmnc": _C + "deepgauge:KMultisection", "nbc": _C + "deepgauge:NeuronBoundary",
    "snac": _C + "deepgauge:StrongActivation", "tknc": _C + "deepgauge:TopKNeuron",
    "tknp": _C + "deepgauge:TopKPatterns", "rconc-kmnc": _C + "deepgauge:ContributionKMultisection",
    "rconc-nbc": _C + "deepgauge:ContributionBoundary",
    "rconc-snac": _C + "deepgauge:ContributionStrongActivation"},
    base=_C + "base:Criterion")
register_criterion = CRITERIA.register

# The package's other public names, each loaded from its module on first use: so the
# registry's names (the CLI's help) cost no import of pandas or the engine.
_EXPORTS = {name: _C + path for path, names in {
    "base": ("REPORT_THRESHOLDS", "Criterion", "Segment"),
    "deepgauge": ("ContributionBoundary", "ContributionKMultisection",
                  "ContributionStrongActivation", "KMultisection", "NeuronBoundary",
                  "StrongActivation", "TopKNeuron", "TopKPatterns"),
    "deepstellar": ("StateBoundaryCoverage", "StateCoverage", "TransitionCoverage",
                    "WeightedStateCoverage", "WeightedTransitionCoverage"),
    "nc": ("NeuronCoverage",), "rconc": ("ContributionCoverage",),
    "rnntest": ("CELL_BOUNDARIES", "CellStateCoverage", "HiddenStateCoverage"),
    "profile": ("build_profile", "ensure_profile", "fingerprint", "load_profile"),
    "testrnn": ("BoundaryCoverage", "StepwiseCoverage", "TemporalCoverage"),
    "threshold": ("default_threshold", "select_threshold")}.items() for name in names}
_EXPORTS = {name: f"{module}:{name}" for name, module in _EXPORTS.items()}


def __getattr__(name: str):
    if name in _EXPORTS:
        module, _, attr = _EXPORTS[name].partition(":")
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Each criterion in words (what a table shows beside the short name) and whose it is.
TITLES = {"rconc": "Contribution coverage (RConC)",
          "nc": "Neuron coverage (DeepXplore), layer outputs without the input",
          "hsc": "Hidden-state coverage (RNN-Test)",
          "csc": "Cell-state coverage (RNN-Test): (cell, section) pairs",
          "bc": "Boundary coverage (testRNN)", "sc": "Step-wise coverage (testRNN)",
          "tc": "Temporal coverage (testRNN)", "state": "Basic state coverage (DeepStellar)",
          "state-boundary": "k-step state boundary coverage (DeepStellar)",
          "state-weighted": "Weighted state coverage (DeepStellar)",
          "transition": "Basic transition coverage (DeepStellar)",
          "transition-weighted": "Weighted transition coverage (DeepStellar)",
          "kmnc": "k-multisection neuron coverage (DeepGauge)",
          "nbc": "Neuron boundary coverage (DeepGauge)",
          "snac": "Strong neuron activation coverage (DeepGauge)",
          "tknc": "Top-k neuron coverage (DeepGauge)",
          "tknp": "Top-k neuron patterns (DeepGauge)",
          "rconc-kmnc": "k-multisection coverage of contributions",
          "rconc-nbc": "Boundary coverage of contributions",
          "rconc-snac": "Strong activation coverage of contributions"}


def title(name: str) -> str:
    """The criterion in words: its class's ``title``, else the table above, else the name."""
    return getattr(CRITERIA.get(name), "title", "") or TITLES.get(name, name)


def needs_profile(name: str) -> bool:
    """Whether the criterion reads a training profile (and so takes x_train / y_train)."""
    return "profile_path" in CRITERIA[name].params


def get_criterion(name: str, model, **params) -> Criterion:
    """A criterion by short name (the keys of CRITERIA). A profile-based one also takes the
    training data to build its profile on demand: ``x_train=``, ``y_train=`` (and
    ``progress=fn(done, total)``); see coverage.profile."""
    return CRITERIA.load(name)(model, **params)


__all__ = ["CRITERIA", "register_criterion", "CELL_BOUNDARIES", "REPORT_THRESHOLDS", "CellStateCoverage",
           "ContributionCoverage", "Criterion", "HiddenStateCoverage", "NeuronCoverage",
           "Segment", "default_threshold", "get_criterion", "select_threshold",
           "BoundaryCoverage", "StepwiseCoverage", "TemporalCoverage", "StateCoverage",
           "StateBoundaryCoverage", "WeightedStateCoverage", "TransitionCoverage",
           "WeightedTransitionCoverage", "KMultisection", "NeuronBoundary", "StrongActivation",
           "TopKNeuron", "TopKPatterns", "ContributionKMultisection", "ContributionBoundary",
           "ContributionStrongActivation", "build_profile", "ensure_profile", "fingerprint",
           "load_profile", "needs_profile", "TITLES", "title"]
