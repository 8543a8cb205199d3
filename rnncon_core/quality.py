"""Quality of generated inputs: L1/L2 distances, FID and IS, text edit metrics, the t-SNE map
of Figure 10 (``tsne_embedding``, for the generation report and the dashboard), and the
paper's choice of the retraining set (Table 5: smallest L1, then smallest FID, then largest IS).

FID and IS are computed with this project's MNIST feature CNN (``zoo.FEATURE_NET``: layer
``features``, 128-d, for FID; its ``output`` softmax for IS), not with Inception-v3 as in the
paper. Our scores are comparable with each other, not with the paper's figures;
:data:`FEATURE_NOTE` says so wherever a score is shown.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from functools import lru_cache
from typing import Sequence

import numpy as np

from .errors import InputError
from .lazy import keras
from .textdiff import tokens, words_changed
from .zoo import FEATURE_NET, load_model

FEATURE_NOTE = ("FID and IS are computed with this project's MNIST feature CNN "
                "(mnist-features: 128-d 'features' layer for FID, its softmax for IS), not with "
                "Inception-v3: they are comparable with each other, not with the paper's figures.")


# ---------------------------------------------------------------- distances

def _pair(a, b) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise InputError(f"the two sets differ in shape: {a.shape} vs {b.shape}; give each "
                         f"generated input with its own seed, in the same order")
    if a.ndim < 2 or len(a) == 0:
        raise InputError(f"expected a non-empty batch (N, ...), got shape {a.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise InputError("inputs contain NaN or inf; remove those inputs first")
    return a.reshape(len(a), -1), b.reshape(len(b), -1)


def _reduce(values: np.ndarray, reduction: str | None):
    if reduction is None:
        return values
    if reduction == "mean":
        return float(values.mean())
    if reduction == "sum":
        return float(values.sum())
    raise InputError(f"unknown reduction {reduction!r}: use None (per input), 'mean' or 'sum'")


def l1(a, b, reduction: str | None = None):
    """L1 distance of each input of ``a`` to its partner in ``b`` (per input, shape (N,));
    ``reduction='mean'`` or ``'sum'`` gives one figure for the set."""
    a, b = _pair(a, b)
    return _reduce(np.abs(a - b).sum(axis=1), reduction)


def l2(a, b, reduction: str | None = None):
    """L2 distance of each input to its partner, per input or reduced like :func:`l1`."""
    a, b = _pair(a, b)
    return _reduce(np.sqrt(((a - b) ** 2).sum(axis=1)), reduction)


# ---------------------------------------------------------------- the feature network

@lru_cache(maxsize=2)
def _shipped_feature_net():
    return load_model(FEATURE_NET)


def _feature_model(feature_net):
    """A Keras model mapping inputs to (features, softmax) of the feature CNN."""
    net = _shipped_feature_net() if feature_net is None else feature_net
    if isinstance(net, str):
        net = load_model(net)
    try:
        feats = net.get_layer("features").output
        probs = net.get_layer("output").output
    except ValueError:
        raise InputError("the feature network needs a layer named 'features' (for FID) and one "
                         "named 'output' (softmax, for IS); use zoo.build_model('mnist-features')"
                         ) from None
    return net, keras.Model(net.inputs[0], [feats, probs])


_SUBMODELS: "OrderedDict[str | None, tuple]" = OrderedDict()   # by name, least recent first
_SUBMODELS_MAX = 4
_SUBMODELS_LOCK = threading.Lock()


def feature_outputs(x, feature_net=None, batch_size: int = 500) -> tuple[np.ndarray, np.ndarray]:
    """(features (N, 128), class probabilities (N, 10)) of ``x`` under the feature CNN.

    ``x``: (N, 28, 28) image sequences in [0, 1], like the RNNs' inputs. ``feature_net``: None
    (the shipped ``mnist-features``), a model name or path, or a Keras model.
    """
    net, sub = _cached_submodel(feature_net)
    x = np.asarray(x, dtype=np.float32)
    want = tuple(net.input_shape[1:])
    if x.ndim != 1 + len(want) or tuple(x.shape[1:]) != want:
        raise InputError(f"the feature network takes inputs shaped (N, {', '.join(map(str, want))}),"
                         f" got {x.shape}; FID and IS are defined for MNIST-like images only")
    if len(x) == 0:
        raise InputError("no inputs given: FID and IS need at least two inputs")
    if not np.isfinite(x).all():
        raise InputError("inputs contain NaN or inf; remove those inputs first")
    if x.min() < -1e-6 or x.max() > 1 + 1e-6:
        raise InputError(f"image values must lie in [0, 1] (got {x.min():.3g} .. {x.max():.3g}); "
                         f"scale the images first")
    feats, probs = [], []
    for i in range(0, len(x), batch_size):
        f, p = sub(x[i:i + batch_size], training=False)
        feats.append(np.asarray(f, dtype=np.float64))
        probs.append(np.asarray(p, dtype=np.float64))
    return np.concatenate(feats), np.concatenate(probs)


def _cached_submodel(feature_net):
    """The feature network by name, built once; the few most recent are kept (thread-safe: the
    dashboard's job threads share them)."""
    if feature_net is not None and not isinstance(feature_net, str):
        return _feature_model(feature_net)
    with _SUBMODELS_LOCK:
        if feature_net in _SUBMODELS:
            _SUBMODELS.move_to_end(feature_net)
        else:
            _SUBMODELS[feature_net] = _feature_model(feature_net)
            while len(_SUBMODELS) > _SUBMODELS_MAX:
                _SUBMODELS.popitem(last=False)
        return _SUBMODELS[feature_net]


# ---------------------------------------------------------------- FID

def _sqrtm_psd(m: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eigh((m + m.T) / 2)
    return (v * np.sqrt(np.clip(w, 0, None))) @ v.T


def fid_from_features(fa, fb) -> float:
    """Fréchet distance of two Gaussians fitted to feature sets (N, D) and (M, D):
    |mu_a - mu_b|^2 + Tr(S_a + S_b - 2 (S_a S_b)^(1/2)).

    The trace of the matrix square root is taken as Tr((S_a^(1/2) S_b S_a^(1/2))^(1/2)), a
    symmetric positive semi-definite product, through two eigen-decompositions: no complex
    parts and no failure on singular covariances (fewer inputs than feature dimensions).
    """
    fa, fb = np.asarray(fa, dtype=np.float64), np.asarray(fb, dtype=np.float64)
    if fa.ndim != 2 or fb.ndim != 2 or fa.shape[1] != fb.shape[1]:
        raise InputError(f"feature sets must be (N, D) and (M, D), got {fa.shape} and {fb.shape}")
    if len(fa) < 2 or len(fb) < 2:
        raise InputError(f"FID needs at least two inputs in each set (got {len(fa)} and "
                         f"{len(fb)}): a covariance cannot be estimated from one")
    mu_a, mu_b = fa.mean(0), fb.mean(0)
    sa, sb = np.cov(fa, rowvar=False), np.cov(fb, rowvar=False)
    sa, sb = np.atleast_2d(sa), np.atleast_2d(sb)
    root_a = _sqrtm_psd(sa)
    inner = root_a @ sb @ root_a
    tr_cross = np.sqrt(np.clip(np.linalg.eigvalsh((inner + inner.T) / 2), 0, None)).sum()
    value = float(((mu_a - mu_b) ** 2).sum() + np.trace(sa) + np.trace(sb) - 2 * tr_cross)
    return max(value, 0.0)


def fid(a, b, feature_net=None) -> float:
    """FID between two sets of images (N, 28, 28), from the feature CNN's 128-d features."""
    fa, _ = feature_outputs(a, feature_net)
    fb, _ = feature_outputs(b, feature_net)
    return fid_from_features(fa, fb)


# ---------------------------------------------------------------- IS

def inception_score_from_probs(probs, splits: int = 1, return_std: bool = False):
    """exp(E_x KL(p(y|x) || p(y))) of class probabilities (N, C), averaged over ``splits``
    equal parts (the usual protocol uses 10); with ``return_std`` also their std."""
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2 or len(p) == 0:
        raise InputError(f"class probabilities must be (N, C) with N > 0, got {p.shape}")
    if not 1 <= splits <= len(p):
        raise InputError(f"splits must be between 1 and the number of inputs ({len(p)}), "
                         f"got {splits}")
    eps = 1e-12
    scores = []
    for part in np.array_split(p, splits):
        marginal = part.mean(axis=0, keepdims=True)
        kl = (part * (np.log(part + eps) - np.log(marginal + eps))).sum(axis=1)
        scores.append(float(np.exp(kl.mean())))
    mean = float(np.mean(scores))
    return (mean, float(np.std(scores))) if return_std else mean


def inception_score(x, feature_net=None, splits: int = 1, return_std: bool = False):
    """IS of a set of images (N, 28, 28) from the feature CNN's softmax: between 1 (every
    input gets the same class distribution) and 10 (confident and spread over the classes)."""
    _, probs = feature_outputs(x, feature_net)
    return inception_score_from_probs(probs, splits=splits, return_std=return_std)


def set_quality(x_gen, x_seed, x_reference, feature_net=None) -> dict:
    """The Table 5 figures of one generated set: mean and total L1 / L2 to the seeds, FID of
    the set against real images ``x_reference`` (e.g. the test split) and its IS."""
    x_gen = np.asarray(x_gen, dtype=np.float32)
    fg, pg = feature_outputs(x_gen, feature_net)
    fr, _ = feature_outputs(x_reference, feature_net)
    dist1, dist2 = l1(x_gen, x_seed), l2(x_gen, x_seed)
    return {"n": int(len(x_gen)), "l1_mean": float(dist1.mean()), "l1_sum": float(dist1.sum()),
            "l2_mean": float(dist2.mean()), "fid": fid_from_features(fg, fr),
            "is": inception_score_from_probs(pg), "n_reference": int(len(x_reference)),
            "feature_net": "mnist-features", "note": FEATURE_NOTE}


# ---------------------------------------------------------------- text

def text_quality(seeds: Sequence[Sequence], generated: Sequence[Sequence]) -> dict:
    """Mean words changed (:func:`rnncon_core.textdiff.words_changed`: word positions that
    differ after alignment) and its mean share of the seed's words, over (seed, generated)
    pairs of word lists or id arrays."""
    if len(seeds) != len(generated) or len(seeds) == 0:
        raise InputError(f"give one generated text per seed (got {len(seeds)} seeds and "
                         f"{len(generated)} generated texts, at least one of each)")
    changed = np.array([words_changed(s, g) for s, g in zip(seeds, generated)], float)
    n_words = np.array([len(tokens(s)) for s in seeds])
    share = np.where(n_words > 0, changed / np.maximum(n_words, 1), 0.0)
    return {"n": len(changed), "words_changed_mean": float(changed.mean()),
            "share_changed_mean": float(share.mean())}


# ---------------------------------------------------------------- t-SNE (Figure 10)

def tsne_embedding(points, seed: int = 0, perplexity: float = 30.0,
                   max_iter: int = 1000) -> np.ndarray:
    """2-D t-SNE (scikit-learn, PCA init) of ``points`` (N, ...), each flattened, e.g. the
    perturbations x_gen - x_seed of Figure 10: (N, 2). The perplexity is capped at (N - 1) / 3
    (at least 1) so that small sets work; the same seed gives the same map."""
    from sklearn.manifold import TSNE
    x = np.asarray(points, dtype=np.float32)
    x = x.reshape(len(x), -1)
    if len(x) < 3:
        raise InputError(f"t-SNE needs at least 3 points, got {len(x)}")
    perplexity = float(min(perplexity, max(1.0, (len(x) - 1) / 3)))
    return TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed,
                max_iter=max_iter).fit_transform(x)


# ---------------------------------------------------------------- selection (Table 5)

def select_retraining_set(candidates: Sequence[dict], l1_tol: float = 0.05,
                          fid_tol: float = 0.05) -> dict:
    """The paper's rule: the smallest L1; among candidates whose L1 is indistinguishable from
    the smallest (within ``l1_tol``, relative), the smallest FID; among those whose FID is also
    indistinguishable (within ``fid_tol``), the largest IS.

    Each candidate is a dict with ``l1``, ``fid`` and ``is`` (plus anything else, e.g.
    ``run_id``); returns a copy of the chosen one with ``selected_by`` ("l1", "fid" or "is")
    and ``tied_l1`` / ``tied_fid`` (indices of the candidates still in the race).
    """
    if not candidates:
        raise InputError("no candidate sets to choose from: generate inputs first "
                         "(`rnncon generate ...`)")
    for i, c in enumerate(candidates):
        for key in ("l1", "fid", "is"):
            if key not in c or not np.isfinite(c[key]):
                raise InputError(f"candidate {i} lacks a finite {key!r} (it has "
                                 f"{sorted(c)}); compute it with quality.set_quality")
    if l1_tol < 0 or fid_tol < 0:
        raise InputError("tolerances must be >= 0 (0 = strict order)")
    idx = list(range(len(candidates)))
    best_l1 = min(candidates[i]["l1"] for i in idx)
    tied_l1 = [i for i in idx if candidates[i]["l1"] <= best_l1 + l1_tol * abs(best_l1)]
    best_fid = min(candidates[i]["fid"] for i in tied_l1)
    tied_fid = [i for i in tied_l1
                if candidates[i]["fid"] <= best_fid + fid_tol * abs(best_fid)]
    chosen = max(tied_fid, key=lambda i: (candidates[i]["is"], -candidates[i]["fid"],
                                          -candidates[i]["l1"]))
    by = "l1" if len(tied_l1) == 1 else "fid" if len(tied_fid) == 1 else "is"
    return {**candidates[chosen], "index": chosen, "selected_by": by,
            "tied_l1": tied_l1, "tied_fid": tied_fid}
