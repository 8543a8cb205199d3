"""Jobs: the work the CLI and the dashboard start, stored in the run store.

``run_generation`` (``runner``) runs a generation strategy on a model's test inputs and stores it
as one run (``find_generation``: the stored run that answers the same request);
``run_retraining`` (``retraining``) retrains a model with a stored run's adversarial inputs;
``distributed`` shards coverage and generation over Ray actors. Both sit above the
engine (data, models, trace, coverage, generation) and the run store, and below the reports.
"""
from __future__ import annotations

from .runner import (find_generation, generation_config, model_dataset, run_generation,
                     select_seeds)

__all__ = ["run_generation", "find_generation", "generation_config", "select_seeds",
           "model_dataset"]
