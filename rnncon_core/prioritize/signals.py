"""The signals that rank inputs for inspection (docs/prioritize.md gives each one's source).

Uncertainty, from the class probabilities p (a one-unit sigmoid as two classes,
``zoo.class_probabilities``), higher first:

- ``gini``: DeepGini's impurity 1 - sum_c p_c^2 (Feng et al., ISSTA 2020);
- ``margin``: 1 - (p_top1 - p_top2), the softmax margin turned so that a smaller margin
  ranks first (Weiss & Tonella, ISSTA 2022);
- ``entropy``: -sum_c p_c log p_c (0 log 0 = 0).

Surprise adequacy (Kim et al., ICSE 2019, ported from github.com/coinse/sadl ``sa.py``) over
the activation trace of the last recurrent layer: its hidden state after the last step.
The training traces are grouped by the class the model predicts for them (sadl's
``train_pred``); a test input is compared with the group of the class predicted for it.

- ``lsa``: -log KDE(at), one Gaussian KDE per class (scipy's ``gaussian_kde``, Scott's
  bandwidth), over the units whose training variance is at least ``VAR_THRESHOLD`` (1e-5)
  in every class (sadl drops a unit whose variance is below it in any class);
- ``dsa``: dist(at, x_a) / dist(x_a, x_b): x_a the nearest training trace of the predicted
  class, x_b the training trace of another class nearest to x_a (every unit).

DeepState (Liu et al., ICSE 2022, ported from github.com/SSCT-Lab/DeepState ``statics.py``,
``selection_tools.py``): the layers after the last recurrent layer applied to its hidden
state after each step give one prediction per step; a step's label counts where its
probability is at least 0.5 (the last step's always); the weighted change rate is
sum_i i^2 [l_i != l_(i-1)] / sum_i i^2 over that label sequence; inputs rank by it, and
within a rate an input whose set of label transitions is Jaccard-similar (> 0.5) to one
ranked before it goes to the end (``deepstate_selection_for_sort``). Where the layers after
the last recurrent layer read a sequence (no per-step prediction), the label sequence is the
DeepStellar abstract state of every step instead.

Coverage of each criterion, from each input's own covered items (``Criterion.profile``:
scores above the criterion's threshold; tknp: its pattern): ``-total`` ranks by the number
of items (weight, for a weighted criterion) an input covers; ``-additional`` is greedy: next
the input that adds the most items not covered yet, the covered set reset once no input adds
any (Rothermel et al.'s additional strategy, as DeepGini's CAM).

Ties are broken by a random order of the inputs (``rng``) or, without one, by their index.
"""
from __future__ import annotations

import numpy as np

from ..coverage.base import CACHE_LOCK, forward_outputs, model_cache, tracer_for
from ..errors import InputError
from ..lazy import tf
from ..trace import merge_directions
from ..zoo import class_probabilities, output_head

UNCERTAINTY = ("gini", "margin", "entropy")
SURPRISE = ("lsa", "dsa")
VAR_THRESHOLD = 1e-5          # sadl's run.py default (--var_threshold)
STEP_CONFIDENCE = 0.5         # DeepState: a step's label counts from this probability on
JACCARD_SIMILAR = 0.5         # DeepState: a later input this similar goes to the end


# ---------------------------------------------------------------- uncertainty

def probabilities(p) -> np.ndarray:
    """Class probabilities (N, C >= 2) as float64 (a one-unit sigmoid as two classes)."""
    return class_probabilities(np.asarray(p, np.float64))


def gini(p) -> np.ndarray:
    p = probabilities(p)
    return 1.0 - np.sum(p * p, axis=1)


def margin(p) -> np.ndarray:
    p = probabilities(p)
    top = np.sort(p, axis=1)
    return 1.0 - (top[:, -1] - top[:, -2])


def entropy(p) -> np.ndarray:
    p = probabilities(p)
    logs = np.log(np.where(p > 0, p, 1.0))
    return -np.sum(p * logs, axis=1)


UNCERTAINTY_FN = {"gini": gini, "margin": margin, "entropy": entropy}


# ---------------------------------------------------------------- surprise adequacy

class Surprise:
    """LSA and DSA against the training traces ``at_train`` (N, units) of a model, grouped by
    the classes ``pred_train`` the model predicts for them."""

    def __init__(self, at_train, pred_train, var_threshold: float = VAR_THRESHOLD):
        self.at = np.asarray(at_train, np.float64)
        self.pred = np.asarray(pred_train, np.int64).reshape(-1)
        if len(self.at) != len(self.pred) or not len(self.at):
            raise InputError("surprise adequacy needs training traces, one predicted class "
                             "each")
        self.classes = np.unique(self.pred)
        removed = np.zeros(self.at.shape[1], bool)
        for c in self.classes:               # (a class of one input has no variance at all)
            if np.count_nonzero(self.pred == c) > 1:
                removed |= np.var(self.at[self.pred == c], axis=0) < var_threshold
        self.keep = ~removed
        self._kdes: dict = {}
        self._b_dist: dict = {}

    def _kde(self, c):
        if c not in self._kdes:
            from scipy.stats import gaussian_kde
            pts = self.at[self.pred == c][:, self.keep]
            if not self.keep.any():
                raise InputError(f"LSA: every hidden unit varies less than {VAR_THRESHOLD} "
                                 f"over the training inputs of some class")
            try:
                self._kdes[c] = gaussian_kde(pts.T)
            except (np.linalg.LinAlgError, ValueError):
                raise InputError(f"LSA: the {len(pts)} training inputs predicted as class {c} "
                                 f"are too few (or too alike) for a density over "
                                 f"{int(self.keep.sum())} hidden units; profile more training "
                                 f"inputs") from None
        return self._kdes[c]

    def _per_class(self, at, pred, score) -> np.ndarray:
        """(N,) score(c, traces) of the traces predicted as each class c (inf for a class no
        training input is predicted as)."""
        at, pred = np.asarray(at, np.float64), np.asarray(pred, np.int64).reshape(-1)
        out = np.full(len(at), np.inf)
        for c in np.unique(pred):
            if c in self.classes:
                rows = np.flatnonzero(pred == c)
                out[rows] = score(c, at[rows])
        return out

    def lsa(self, at, pred) -> np.ndarray:
        """(N,) -log density of each trace under its predicted class's KDE."""
        return self._per_class(at, pred, lambda c, a: -self._kde(c).logpdf(a[:, self.keep].T))

    def _nearest_other(self, c) -> np.ndarray:
        """Per training trace of class c: the distance to the nearest one of another class."""
        if c not in self._b_dist:
            own, other = self.at[self.pred == c], self.at[self.pred != c]
            self._b_dist[c] = _nearest(own, other)[0] if len(other) else \
                np.full(len(own), np.inf)
        return self._b_dist[c]

    def dsa(self, at, pred) -> np.ndarray:
        """(N,) dist(at, x_a) / dist(x_a, x_b) of each trace and its predicted class."""
        def score(c, a):
            a_dist, a_idx = _nearest(a, self.at[self.pred == c])
            with np.errstate(divide="ignore", invalid="ignore"):
                return a_dist / self._nearest_other(c)[a_idx]
        return self._per_class(at, pred, score)


def _nearest(a: np.ndarray, b: np.ndarray, chunk: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a: the Euclidean distance to the nearest row of b, and that row's index."""
    bb = np.sum(b * b, axis=1)
    dist, idx = np.empty(len(a)), np.empty(len(a), np.int64)
    for s in range(0, len(a), chunk):
        part = a[s:s + chunk]
        d2 = np.sum(part * part, axis=1)[:, None] + bb[None] - 2.0 * part @ b.T
        i = np.argmin(d2, axis=1)
        idx[s:s + chunk] = i
        # the nearest one's distance computed directly (no cancellation in the expansion)
        dist[s:s + chunk] = np.linalg.norm(part - b[i], axis=1)
    return dist, idx


def last_hidden(model, x, batch: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """(model outputs (N, classes), the last recurrent layer's hidden state after the last
    step (N, units)) from one traced pass (``coverage.base.forward_outputs``)."""
    fn = forward_outputs(model)
    outs, hids = [], []
    for s in range(0, len(x), batch):
        o, h = fn(x[s:s + batch])
        outs.append(o)
        hids.append(h)
    if not outs:
        return np.zeros((0, 1)), np.zeros((0, 0))
    return np.concatenate(outs), np.concatenate(hids)


# ---------------------------------------------------------------- DeepState

def step_probabilities(model, x, batch: int = 256) -> np.ndarray | None:
    """(N, T, C) the class probabilities after each step: the layers after the last recurrent
    layer applied to its hidden state after that step (a Bidirectional one's two directions
    after the same number of steps, merged). None where those layers read a sequence."""

    tr = tracer_for(model)
    cache = model_cache(tr)
    with CACHE_LOCK:
        if "deepstate-steps" not in cache:
            cache["deepstate-steps"] = _step_fn(tr, output_head(tr.model), tf, merge_directions)
    fn = cache["deepstate-steps"]
    if fn is None:
        return None
    out = [fn(tr.check_inputs(x[s:s + batch])).numpy() for s in range(0, len(x), batch)]
    return np.concatenate(out) if out else None


def _step_fn(tr, head, tf, merge):
    ops = tr._ops
    last = max((i for i, op in enumerate(ops) if op[0] in ("rnn", "bidi")), default=None)
    if last is None:
        return None
    op = ops[last]
    spec = op[1] if op[0] == "rnn" else op[2]
    tail = ops[last + 1:]
    if spec.return_sequences or any(o[0] not in ("dense", "keras") for o in tail) \
            or any(o[0] == "dense" and o[1].steps for o in tail):
        return None

    @tf.autograph.experimental.do_not_convert
    def body(x):
        raw, _ = tr.forward_steps(x, ())
        h = raw[spec.name]["h"] if op[0] == "rnn" else \
            merge(op[1].merge_mode, raw[op[2].name]["h"], raw[op[3].name]["h"])
        steps, n = tf.shape(h)[0], tf.shape(h)[1]
        v = tf.reshape(h, (steps * n, -1))
        for o in tail:
            v = tr._dense(o[1], v)["out"] if o[0] == "dense" else o[1](v, training=False)
        p = head.probabilities(v)
        return tf.transpose(tf.reshape(p, (steps, n, -1)), (1, 0, 2))
    sig = tf.TensorSpec((None,) + tr.embedded_shape, tf.float32)
    f_float = tf.function(body, input_signature=[sig])
    if tr.embedding is None:
        return f_float
    @tf.autograph.experimental.do_not_convert
    def from_ids(ids):
        return body(tr.embed_tf(ids))
    f_ids = tf.function(from_ids, input_signature=[tf.TensorSpec((None,) + tr.input_shape,
                                                                 tf.int32)])
    return lambda x: f_ids(x) if x.dtype == tf.int32 else f_float(x)


def step_labels(step_probs: np.ndarray) -> list[np.ndarray]:
    """Per input, DeepState's label sequence: each step's predicted class where its
    probability is at least STEP_CONFIDENCE, and the last step's in any case."""
    p = class_probabilities(np.asarray(step_probs))
    lab, conf = p.argmax(-1), p.max(-1)
    keep = conf >= STEP_CONFIDENCE
    keep[:, -1] = True
    return [lab[i][keep[i]] for i in range(len(lab))]


def change_rate(labels) -> float:
    """DeepState's weighted change rate of a label sequence: sum_i i^2 [l_i != l_(i-1)] over
    sum_i i^2, i = 1 .. len - 1 (0 for fewer than two labels)."""
    labels = np.asarray(labels)
    if len(labels) < 2:
        return 0.0
    w = np.arange(1, len(labels), dtype=np.float64) ** 2
    return float(w[labels[1:] != labels[:-1]].sum() / w.sum())


def transitions(labels) -> frozenset:
    """The set of (label, next label) pairs of a sequence (DeepState's change trend)."""
    labels = np.asarray(labels).tolist()
    return frozenset(zip(labels[:-1], labels[1:]))


def jaccard(a: frozenset, b: frozenset) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def deepstate_order(rates, trends, rng=None) -> np.ndarray:
    """DeepState's order: highest change rate first; within one rate, an input whose
    transitions are similar (Jaccard > 0.5) to those of one already ranked at that rate is
    put aside, and the inputs put aside follow at the very end (in the inputs' order)."""
    rates = np.asarray(rates, np.float64)
    n = len(rates)
    pos = rng.permutation(n) if rng is not None else np.arange(n)
    rank = np.empty(n, np.int64)
    rank[pos] = np.arange(n)
    ids, trend_id = {}, np.empty(n, np.int64)
    for i, t in enumerate(trends):
        trend_id[i] = ids.setdefault(t, len(ids))
    sets = list(ids)
    similar = np.array([[jaccard(a, b) > JACCARD_SIMILAR for b in sets] for a in sets],
                       bool).reshape(len(sets), len(sets))
    order, aside = [], np.zeros(n, bool)
    by_rate = np.lexsort((rank, -rates))
    start = 0
    while start < n:
        stop = start
        while stop < n and rates[by_rate[stop]] == rates[by_rate[start]]:
            stop += 1
        blocked = np.zeros(len(sets), bool)
        for i in by_rate[start:stop]:
            if blocked[trend_id[i]]:
                aside[i] = True
            else:
                order.append(i)
                blocked |= similar[trend_id[i]]
        start = stop
    rest = pos[aside[pos]]
    return np.concatenate([np.asarray(order, np.int64), rest]).astype(np.int64)


def deepstate_rates(model, x, abstraction=None) -> tuple[np.ndarray, list]:
    """(change rates (N,), transition sets) of DeepState; ``abstraction`` (a DeepStellar
    criterion with ``abstract_states``) gives the label sequences where the model has no
    per-step prediction (``step_probabilities`` is None)."""
    probs = step_probabilities(model, x)
    if probs is not None:
        seqs = step_labels(probs)
    else:
        if abstraction is None:
            raise InputError("DeepState on this model reads the DeepStellar abstraction (the "
                             "layers after its last recurrent layer read a sequence): give "
                             "the training inputs to build it")
        keys = np.concatenate([abstraction.abstract_states(x[s:s + 256])
                               for s in range(0, len(x), 256)])
        seqs = list(keys)
    return np.array([change_rate(s) for s in seqs]), [transitions(s) for s in seqs]


# ---------------------------------------------------------------- coverage

def covered_items(crit, x, batch: int = 64) -> tuple[np.ndarray, int, np.ndarray | None]:
    """(packed bits (N, ceil(items / 8)) of each input's own covered items, the item count,
    the items' weights or None) of criterion ``crit`` (its state is not touched). tknp's
    items are the distinct patterns of these inputs."""
    n = len(x)
    if crit.name == "tknp":
        ids = np.concatenate([np.asarray(crit.profile(x[s:s + batch]), object)
                              for s in range(0, n, batch)]) if n else np.zeros(0, object)
        _, inv = np.unique(ids.astype(str), return_inverse=True)
        items = int(inv.max()) + 1 if n else 0
        mask = np.zeros((n, items), bool)
        mask[np.arange(n), inv] = True
        return np.packbits(mask, axis=1), items, None
    cut = crit.cut(None)
    bits = np.concatenate([np.packbits(crit.profile(x[s:s + batch]) > cut, axis=1)
                           for s in range(0, n, batch)]) if n else \
        np.zeros((0, (crit.total + 7) // 8), np.uint8)
    weights = np.asarray(crit._weights, np.float64) if getattr(crit, "weighted", False) \
        else None
    return bits, int(crit.total), weights


def _gains(bits, items, weights, covered=None) -> np.ndarray:
    new = bits if covered is None else bits & ~covered
    if weights is None:
        return np.bitwise_count(new).sum(axis=-1).astype(np.float64)
    return np.unpackbits(new, axis=-1, count=items).astype(bool) @ weights


def total_scores(bits, items, weights=None) -> np.ndarray:
    """Per input: how many items (or how much weight) it covers."""
    return _gains(bits, items, weights)


def additional_order(bits, items, weights=None, rng=None) -> np.ndarray:
    """Greedy order: next the input that adds the most items not covered yet (ties: the
    earlier in ``rng``'s order of the inputs, else the lower index); once none adds any, the
    covered set is reset; inputs that cover nothing come last. Each step updates every
    input's gain by the items the chosen one covered first (only their bytes): on 1,800
    mnist-lstm test digits 0.1 s (nc), 0.2 s (hsc), 2.7 s (rconc), where a lazy greedy took
    18, 1.3 and 4.2 s (measured once, loaded 2-core machine; same orders)."""
    n = len(bits)
    pos = rng.permutation(n) if rng is not None else np.arange(n)
    b = np.asarray(bits)[pos]
    w = None if weights is None else \
        np.concatenate([weights, np.zeros(b.shape[1] * 8 - items)]).reshape(-1, 8)
    base = _gains(b, items, weights)
    gains, left = base.copy(), np.ones(n, bool)
    covered = np.zeros(b.shape[1], np.uint8)
    order = []
    while len(order) < n:
        i = int(np.argmax(np.where(left, gains, -1.0)))
        if gains[i] <= 0:
            if covered.any():                # every item found again: start over
                covered[:] = 0
                gains = base.copy()
                continue
            order += np.flatnonzero(left).tolist()      # the rest cover nothing
            break
        order.append(i)
        left[i] = False
        new = b[i] & ~covered
        cols = np.flatnonzero(new)
        covered |= new
        hit = b[:, cols] & new[cols]
        if w is None:
            gains -= np.bitwise_count(hit).sum(axis=1)
        else:
            gains -= np.unpackbits(hit[:, :, None], axis=2).reshape(n, -1) @ w[cols].ravel()
    return pos[np.asarray(order, np.int64)]


# ---------------------------------------------------------------- orders and their worth

def score_order(scores, rng=None) -> np.ndarray:
    """Indices, the highest score first (NaN last); ties in ``rng``'s random order of the
    inputs, else by index."""
    s = np.asarray(scores, np.float64)
    s = np.where(np.isnan(s), -np.inf, s)
    key = rng.permutation(len(s)) if rng is not None else np.arange(len(s))
    return np.lexsort((key, -s)).astype(np.int64)


def apfd(order, faults) -> float:
    """Average percentage of faults detected: 1 - sum(TF_i) / (n m) + 1 / (2 n), TF_i the
    1-based positions of the m faulty inputs in the order of n (NaN without a fault)."""
    f = np.asarray(faults, bool)[np.asarray(order)]
    n, m = len(f), int(f.sum())
    if not m:
        return float("nan")
    return float(1.0 - (np.flatnonzero(f) + 1).sum() / (n * m) + 1.0 / (2 * n))


def found_within(order, faults, share: float) -> float:
    """The share of the faulty inputs among the first ceil(share * n) of the order."""
    f = np.asarray(faults, bool)[np.asarray(order)]
    m = int(f.sum())
    if not m:
        return float("nan")
    k = int(np.ceil(share * len(f) - 1e-9))
    return float(f[:k].sum() / m)


def detection_curve(order, faults) -> tuple[np.ndarray, np.ndarray]:
    """(share of inputs inspected, share of faults found), both from 0."""
    f = np.asarray(faults, bool)[np.asarray(order)]
    n, m = len(f), max(1, int(f.sum()))
    return np.arange(n + 1) / max(1, n), np.concatenate([[0.0], np.cumsum(f) / m])
