"""Fault classes: valid faults grouped the way a reader would tell them apart.

Following the fault estimation of Aghababaeyan et al. (TSE 2023, "Black-box testing of deep
neural networks through test case diversity"; also DeepGD, TOSEM 2024): mispredicted inputs
are clustered by their features with HDBSCAN after a dimensionality reduction, and each
cluster stands for one fault. Here, within each (true, predicted) pair, the faults' outputs of
the model's penultimate layer are standardized, reduced by PCA (at most ``COMPONENTS`` axes)
and clustered by scikit-learn's HDBSCAN (``MIN_CLUSTER``); a point HDBSCAN leaves as noise
joins its nearest cluster, and a pair whose faults form no cluster (fewer than
``MIN_CLUSTER``, or all noise) is one class. So a fault class is a group of faults of one
pair that the model itself sees as alike, and the count does not grow with near-duplicates.
"""
from __future__ import annotations

import numpy as np

from ..lazy import keras

COMPONENTS = 5
MIN_CLUSTER = 5


def feature_model(model):
    """A Keras model giving (model output, the input of the last layer with weights): the
    features a fault is clustered by (for the shipped models, the Dense(32) layer's output)."""
    last = next((layer for layer in reversed(model.layers) if layer.weights), None)
    if last is None:
        return keras.Model(model.inputs, [model.outputs[0], model.outputs[0]])
    return keras.Model(model.inputs, [model.outputs[0], last.input])


def cluster_pair(features: np.ndarray) -> np.ndarray:
    """Class ids 0..k-1 of one pair's faults (see the module doc)."""
    n = len(features)
    if n < MIN_CLUSTER:
        return np.zeros(n, np.int64)
    from sklearn.cluster import HDBSCAN
    from sklearn.decomposition import PCA
    f = np.asarray(features, np.float64).reshape(n, -1)
    f = (f - f.mean(0)) / np.maximum(f.std(0), 1e-9)
    k = min(COMPONENTS, f.shape[1], n - 1)
    z = PCA(k, random_state=0).fit_transform(f) if k >= 1 else f
    labels = HDBSCAN(min_cluster_size=MIN_CLUSTER, copy=True).fit_predict(z)
    if labels.max() < 0:
        return np.zeros(n, np.int64)
    ids = np.unique(labels[labels >= 0])
    centres = np.stack([z[labels == c].mean(0) for c in ids])
    noise = labels < 0
    if noise.any():
        d = ((z[noise][:, None, :] - centres[None]) ** 2).sum(-1)
        labels[noise] = ids[d.argmin(1)]
    return np.searchsorted(ids, labels).astype(np.int64)


def fault_classes(label, pred, feature, valid) -> np.ndarray:
    """Per fault row: its class id (unique over the campaign), -1 for an invalid fault."""
    label, pred = np.asarray(label), np.asarray(pred)
    valid = np.asarray(valid, bool)
    out = np.full(len(label), -1, np.int64)
    nxt = 0
    for t, p in sorted(set(zip(label[valid].tolist(), pred[valid].tolist()))):
        rows = np.flatnonzero(valid & (label == t) & (pred == p))
        ids = cluster_pair(np.asarray(feature)[rows])
        out[rows] = nxt + ids
        nxt += int(ids.max()) + 1
    return out


def valid_counts(faults: dict) -> dict:
    """Counts of a campaign's fault rows (rows without a verdict count as valid): valid and
    invalid faults, the (true, predicted) pairs and the root seeds of the valid ones."""
    n = len(faults.get("label", ()))
    valid = np.asarray(faults.get("valid", np.ones(n, bool)), bool)
    return {"valid_faults": int(valid.sum()), "invalid_faults": int(n - valid.sum()),
            "valid_pairs": len(set(zip(np.asarray(faults.get("label", []))[valid].tolist(),
                                       np.asarray(faults.get("pred", []))[valid].tolist()))),
            "fault_roots": len(set(np.asarray(faults.get("root", []))[valid].tolist()))}


def class_counts(faults: dict) -> dict:
    """The headline figures of a campaign's fault rows: ``valid_counts`` and the fault
    classes of the valid faults; and ``fault_class`` per row (empty rows or rows without
    features: classes not measured, None)."""
    n = len(faults.get("label", ()))
    valid = np.asarray(faults.get("valid", np.ones(n, bool)), bool)
    out = {**valid_counts(faults), "fault_classes": None, "fault_class": None}
    if n == 0:
        out["fault_classes"], out["fault_class"] = 0, np.zeros(0, np.int64)
    elif "feature" in faults:
        cls = fault_classes(faults["label"], faults["pred"], faults["feature"], valid)
        out["fault_class"] = cls
        out["fault_classes"] = int(len(np.unique(cls[cls >= 0])))
    return out


def classes_over(faults: dict, fault_class, axis: str = "calls") -> tuple[np.ndarray, np.ndarray]:
    """(x, classes found by x): each class counted from its first member's ``axis`` value
    (seconds or calls), for the curve of fault classes over time."""
    cls = np.asarray(fault_class)
    at = np.asarray(faults[axis], np.float64)
    firsts = [at[cls == c].min() for c in np.unique(cls[cls >= 0])]
    x = np.sort(np.asarray(firsts))
    return x, np.arange(1, len(x) + 1)
