"""Test campaigns: find a model's faults within a budget, guided by any coverage criterion.

    from rnncon_core.campaign import run_campaign
    summary = run_campaign("mnist-lstm", guide="rconc", budget="2m")   # stored in the run store

Where things are: ``mutations`` (the declared mutations and their validity bounds), ``queue``
(the seed queue and the distinct faults), ``loop`` (one campaign's loop, its state a value),
``prepare`` (model, seeds, guide, fault abstraction), ``record`` (budgets, checkpoints,
summary, curve), ``run`` (``run_campaign``: the run store, resume), ``distributed`` (one queue
per Ray worker, states merged). Guide: any name of ``coverage.CRITERIA``, or a baseline
without one: ``none`` (keeps every mutant predicted right) or ``faults`` (keeps only the new
distinct faults).
"""
from __future__ import annotations

from .loop import CAMPAIGN_PARAMS, CURVE_COLUMNS, LOOP_PARAMS, Campaign
from .mutations import MUTATION_PARAMS, Mutator, input_kind
from .prepare import (BASELINE_TEXT, BASELINES, DEFAULT_SEEDS, GUIDE_FAULTS, GUIDE_NONE,
                      faults_only, guide_names, make_guide)
from .record import Budget, live_state, load_campaign, parse_budget
from .run import run_campaign

__all__ = ["CAMPAIGN_PARAMS", "CURVE_COLUMNS", "LOOP_PARAMS", "MUTATION_PARAMS", "Campaign",
           "Mutator", "input_kind", "DEFAULT_SEEDS", "GUIDE_NONE", "GUIDE_FAULTS", "BASELINES",
           "BASELINE_TEXT", "Budget", "faults_only", "guide_names", "live_state",
           "load_campaign", "make_guide", "parse_budget", "run_campaign"]
