"""What each generation method asks for in the form, and the parameters sent to the engine."""
from __future__ import annotations

import math

DESCRIPTIONS = {
    "rconc": "RNNCon-Test (Algorithm 2): gradient ascent to activate k inactivated contributions",
    "nc": "DeepXplore's objective: activate k inactivated neurons",
    "rnntest": "RNN-Test: prediction loss plus a hidden-state coverage term",
    "differential": "DeepXplore's differential testing against other models",
    "fgsm": "FGSM: one signed gradient step of size ε",
    "pgd": "PGD: projected signed steps inside an L∞ ball of radius ε",
    "noise": "random Gaussian noise of a given L2 norm",
    "eda": "EDA word operations guided by contribution coverage",
    "synonym-gradient": "synonym swaps chosen by the gradient w.r.t. the embeddings",
}

# the fields of the form per method (besides the number of seeds)
FIELDS = {
    "rconc": ("target", "k", "step", "iterations", "constraint", "threshold", "granularity"),
    "nc": ("target", "k", "step", "iterations", "constraint", "threshold"),
    "rnntest": ("target", "k", "step", "iterations", "constraint"),
    "differential": ("others", "step", "iterations", "constraint"),
    "fgsm": ("eps", "constraint"),
    "pgd": ("eps", "step", "iterations", "constraint"),
    "noise": ("l2",),
    "eda": ("layer", "n_targets", "max_fraction", "threshold"),
    "synonym-gradient": ("layer", "n_targets", "max_fraction", "threshold"),
}


def generation_params(method: str, values: dict) -> dict:
    """The keyword arguments of run_generation for ``method`` from the form's values
    (fields the method does not take are dropped; "all layers" is None for text methods)."""
    if method not in FIELDS:
        raise ValueError(f"unknown method {method!r}")
    params = {}
    for name in FIELDS[method]:
        if name not in values:
            continue
        v = values[name]
        if name == "layer" and v == "random":
            v = None
        if name == "others":
            v = list(v)
        if name in ("k", "iterations", "n_targets"):
            v = int(v)
        params[name] = v
    return params


def batch_size(n_seeds: int) -> int:
    """Batches small enough for about ten progress updates, large enough to stay vectorized."""
    return int(min(128, max(4, math.ceil(n_seeds / 10))))
