"""Coverage criteria over a trace: contribution coverage (RConC), neuron coverage (NC) and
RNN-Test's hidden-state (HS_C) and cell-state (CS_C) coverage.

Every criterion has the life cycle of a Keras metric: parameters in ``__init__``, ``update(x)``
(union over every input so far), ``rate(threshold=None)``, ``reset()``, ``get_config()``. The
state is, per item (contribution, neuron, ...), the largest score any input gave it, plus the
index of the first input that lifted it past each threshold of a small grid; so the rate at any
threshold, ``by_layer`` and ``curve`` need no new forward pass. Conventions: docs/coverage.md.

Where things are: ``params`` (parameter checks), ``base`` (the ``Criterion`` base and its
state), ``rconc`` (RConC), ``edge`` (the edge-granularity envelope engine), ``nc``, ``rnntest``
(HS_C, CS_C), ``threshold`` (default thresholds and §5.2's selection). The reports that use
them are in ``rnncon_core.reports``.
"""
from __future__ import annotations

from ..registry import CRITERIA
from .base import REPORT_THRESHOLDS, Criterion, Segment
from .deepgauge import (ContributionBoundary, ContributionKMultisection,
                        ContributionStrongActivation, KMultisection, NeuronBoundary,
                        StrongActivation, TopKNeuron, TopKPatterns)
from .deepstellar import (StateBoundaryCoverage, StateCoverage, TransitionCoverage,
                          WeightedStateCoverage, WeightedTransitionCoverage)
from .nc import NeuronCoverage
from .rconc import ContributionCoverage
from .rnntest import CELL_BOUNDARIES, CellStateCoverage, HiddenStateCoverage
from .profile import build_profile, ensure_profile, fingerprint, load_profile
from .testrnn import BoundaryCoverage, StepwiseCoverage, TemporalCoverage
from .threshold import default_threshold, select_threshold

# One registry (rnncon_core.registry): the built-in criteria, those registered with
# @register_criterion, and those of installed packages (entry points "rnncon.criteria").
register_criterion = CRITERIA.register


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
