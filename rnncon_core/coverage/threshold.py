"""Thresholds: the default per data set and the paper's selection rule (§5.2)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..data import DATASETS, dataset_kind, is_dataset_file, load_dataset
from ..errors import InputError
from .engine import tracer_for
from .params import Interval
from .rconc import ContributionCoverage

# The paper's thresholds (§5.2): 0.25 for its image (MNIST) models, 0.5 for its text (IMDB) ones.
DEFAULT_THRESHOLDS = {"image": 0.25, "text": 0.5}


def default_threshold(data=None) -> float:
    """The default coverage threshold for a data set: a name ("mnist", "imdb", ...), a loaded
    Dataset, a kind ("image" | "text"), or a model (text when it starts with an Embedding).
    Every command, page, generator and report reads it here."""
    if data is None:
        return DEFAULT_THRESHOLDS["image"]
    if isinstance(data, str):
        if data in DEFAULT_THRESHOLDS:
            return DEFAULT_THRESHOLDS[data]
        if data not in DATASETS:
            if is_dataset_file(data):               # a user's .npz: by its kind
                return default_threshold(load_dataset(data))
            raise InputError(f"unknown data set {data!r}; choose one of {', '.join(DATASETS)}")
        return DEFAULT_THRESHOLDS[dataset_kind(data)]
    kind = getattr(data, "kind", None)
    if kind in DEFAULT_THRESHOLDS:
        return DEFAULT_THRESHOLDS[kind]
    if kind == "sequence":              # a user's real-valued data set: as for float inputs
        return DEFAULT_THRESHOLDS["image"]
    tracer = tracer_for(data)
    return DEFAULT_THRESHOLDS["text" if tracer.embedding is not None else "image"]


def select_threshold(model, x, y, candidates=(0.1, 0.25, 0.5, 0.75), embedded: bool = False,
                     **params) -> tuple[float, pd.DataFrame]:
    """§5.2: the candidate threshold where the largest difference of RConC between labels is
    greatest. Returns (threshold, table: one row per candidate, one column per label, and
    max_difference)."""
    y = np.asarray(y).ravel()
    if len(y) != len(x):
        raise InputError(f"x has {len(x)} inputs but y has {len(y)} labels")
    if not len(candidates):
        raise InputError("give at least one candidate threshold")
    cands = [Interval(0, 1).check("candidate threshold", c) for c in candidates]
    labels = np.unique(y)
    if len(labels) < 2:
        raise InputError("threshold selection compares labels: y holds only one label")
    tracer = tracer_for(model)
    table = pd.DataFrame({"threshold": cands})
    for label in labels:
        cov = ContributionCoverage(tracer, threshold=cands[0], **params)
        cov.update(np.asarray(x)[y == label], embedded=embedded)
        table[f"label_{label}"] = [cov.rate(c) for c in cands]
    rates = table[[f"label_{label}" for label in labels]]
    table["max_difference"] = rates.max(axis=1) - rates.min(axis=1)
    best = float(table.loc[table["max_difference"].idxmax(), "threshold"])
    return best, table
