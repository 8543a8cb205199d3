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

from ..errors import InputError
from .base import REPORT_THRESHOLDS, Criterion, Segment
from .deepgauge import (ContributionBoundary, ContributionKMultisection,
                        ContributionStrongActivation, KMultisection, NeuronBoundary,
                        StrongActivation, TopKNeuron, TopKPatterns)
from .deepstellar import (StateBoundaryCoverage, StateCoverage, TransitionCoverage,
                          WeightedStateCoverage, WeightedTransitionCoverage)
from .nc import NeuronCoverage
from .rconc import ContributionCoverage
from .rnntest import CELL_BOUNDARIES, CellStateCoverage, HiddenStateCoverage
from .profile import build_profile, fingerprint, load_profile
from .testrnn import BoundaryCoverage, StepwiseCoverage, TemporalCoverage
from .threshold import default_threshold, select_threshold

CRITERIA: dict[str, type[Criterion]] = {c.name: c for c in
                                        (ContributionCoverage, NeuronCoverage,
                                         HiddenStateCoverage, CellStateCoverage,
                                         BoundaryCoverage, StepwiseCoverage, TemporalCoverage,
                                         StateCoverage, StateBoundaryCoverage,
                                         WeightedStateCoverage, TransitionCoverage,
                                         WeightedTransitionCoverage, KMultisection,
                                         NeuronBoundary, StrongActivation, TopKNeuron,
                                         TopKPatterns, ContributionKMultisection,
                                         ContributionBoundary, ContributionStrongActivation)}


def get_criterion(name: str, model, **params) -> Criterion:
    """A criterion by short name (the keys of CRITERIA)."""
    if name not in CRITERIA:
        raise InputError(f"unknown criterion {name!r}; choose one of {', '.join(CRITERIA)}")
    return CRITERIA[name](model, **params)


__all__ = ["CRITERIA", "CELL_BOUNDARIES", "REPORT_THRESHOLDS", "CellStateCoverage",
           "ContributionCoverage", "Criterion", "HiddenStateCoverage", "NeuronCoverage",
           "Segment", "default_threshold", "get_criterion", "select_threshold",
           "BoundaryCoverage", "StepwiseCoverage", "TemporalCoverage", "StateCoverage",
           "StateBoundaryCoverage", "WeightedStateCoverage", "TransitionCoverage",
           "WeightedTransitionCoverage", "KMultisection", "NeuronBoundary", "StrongActivation",
           "TopKNeuron", "TopKPatterns", "ContributionKMultisection", "ContributionBoundary",
           "ContributionStrongActivation", "build_profile", "fingerprint", "load_profile"]
