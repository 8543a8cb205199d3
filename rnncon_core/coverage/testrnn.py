"""testRNN's criteria (Huang et al., "Coverage-guided testing for recurrent neural networks"):
boundary (BC), step-wise (SC) and temporal (TC) coverage over information-flow views of every
recurrent layer, per step t (``profile.flow_views``):

- ξ^f_t: the mean of the forget gate f_t over the units (how much of the cell is kept); for a
  GRU the mean of its update gate z_t, which keeps h^(t-1) in the same way (our extension;
  testRNN is LSTM only). The model's own gate activation is used.
- ξ^h_t = ξ^h+_t + ξ^h−_t, the sums of the positive and of the negative parts of h_t.
- Δξ^h_t = |ξ^h+_t − ξ^h+_(t−1)| + |ξ^h−_t − ξ^h−_(t−1)|, with ξ^h±_(−1) = 0.

With the training profile's ranges per (layer, step):

- bc: items (layer, step, side). The high side is covered when (ξ^f_t − lo_t)/(hi_t − lo_t)
  exceeds the threshold for some input, the low side when (hi_t − ξ^f_t)/(hi_t − lo_t) does
  (so at threshold θ: the top or bottom (1 − θ) of the training range, or beyond it; at θ = 1
  only values outside the training range). A step with hi_t = lo_t scores 0.
- sc: items (layer, step), covered when (Δξ^h_t − lo_t)/(hi_t − lo_t) exceeds the threshold.
- tc: items (layer, pattern). An input's series ξ^h_0..ξ^h_(T−1) of a layer is z-normalized with
  the training mean and standard deviation of ξ^h (over inputs and steps), reduced to
  ``length`` values by piecewise aggregate approximation (PAA: each of the T values repeated
  ``length`` times, cut into ``length`` equal runs, each averaged), and each value becomes one of
  ``symbols`` letters at the standard normal quantiles (SAX; letter i when
  cut_i <= v < cut_(i+1)). Items: all symbols^length words; covered when some input's word is it.
"""
from __future__ import annotations

from statistics import NormalDist

import numpy as np

from ..errors import InputError
from .base import Segment, threshold_grid
from .params import CURVE_THRESHOLDS, PROFILE_PATH, IntRange, Param, Params, threshold
from .profile import ProfiledCriterion, flow_views


def paa_matrix(steps: int, length: int) -> np.ndarray:
    """(steps, length) A with series @ A = the PAA of the series (see the module docstring)."""
    rep = np.repeat(np.eye(steps), length, axis=1)           # (T, T * L): each value L times
    return rep.reshape(steps, length, steps).mean(axis=2)


def sax_cuts(symbols: int) -> np.ndarray:
    return np.array([NormalDist().inv_cdf(i / symbols) for i in range(1, symbols)])


class _FlowCriterion(ProfiledCriterion):
    kinds = ("lstm", "gru", "simple_rnn")
    what = "a recurrent layer"

    def _layout(self) -> list[Segment]:
        self._specs = self._recurrent_specs(self.what, self.kinds)
        self._load_profile()
        segs, off = [], 0
        for s in self._specs:
            shape = self._item_shape(s)
            segs.append(Segment(s.name, s.kind, self.part, (), s.name, off, shape))
            off += int(np.prod(shape))
        return segs

    def _curve_grid(self) -> tuple:
        if not self.uses_threshold:
            return super()._curve_grid()
        return threshold_grid(self.threshold, self.curve_thresholds)

    def _range(self, key, s):
        lo = self._prof[f"{key}_lo@{s.name}"].astype(np.float32)
        hi = self._prof[f"{key}_hi@{s.name}"].astype(np.float32)
        r = hi - lo
        return lo, np.where(r > 0, 1.0 / np.where(r > 0, r, 1.0), 0.0).astype(np.float32), hi

    def describe(self, index: int) -> dict:
        seg, pos = self._segment_of(index)
        d = {"layer": seg.layer, "kind": seg.kind, "step": None, "gate": None, "part": seg.part,
             "unit": None, "source": None}
        d.update(self._describe_pos(pos))
        return d


class BoundaryCoverage(_FlowCriterion):
    """testRNN's BC over the keep-gate view ξ^f (see the module docstring)."""

    name = "bc"
    part = "xi_f"
    kinds = ("lstm", "gru")
    what = "an LSTM or GRU layer (it reads the forget / update gate)"
    params = Params(threshold(0.8), PROFILE_PATH, CURVE_THRESHOLDS)

    def _item_shape(self, s):
        return (s.steps, 2)

    def _scores_graph(self, tr):
        import tensorflow as tf
        parts = []
        for s in self._specs:
            lo, inv, hi = self._range("xif", s)
            xif = flow_views(tr.layers[s.name])[0]                    # (N, T)
            parts.append(tf.reshape(tf.stack([(hi - xif) * inv, (xif - lo) * inv], axis=2),
                                    (tf.shape(xif)[0], -1)))
        return tf.concat(parts, axis=1)

    def _describe_pos(self, pos):
        return {"step": int(pos[0]), "side": ("low", "high")[int(pos[1])]}


class StepwiseCoverage(_FlowCriterion):
    """testRNN's SC over the hidden-state change Δξ^h (see the module docstring)."""

    name = "sc"
    part = "dxi_h"
    params = Params(threshold(0.6), PROFILE_PATH, CURVE_THRESHOLDS)

    def _item_shape(self, s):
        return (s.steps,)

    def _scores_graph(self, tr):
        import tensorflow as tf
        parts = []
        for s in self._specs:
            lo, inv, _ = self._range("dxih", s)
            parts.append((flow_views(tr.layers[s.name])[2] - lo) * inv)
        return tf.concat(parts, axis=1)

    def _describe_pos(self, pos):
        return {"step": int(pos[0])}


class TemporalCoverage(_FlowCriterion):
    """testRNN's TC: SAX words of the ξ^h series (see the module docstring)."""

    name = "tc"
    part = "xi_h"
    uses_threshold = False
    params = Params(Param("symbols", 3, IntRange(1, 26), "SAX letters per value."),
                    Param("length", 5, IntRange(1), "Values per SAX word (PAA segments)."),
                    PROFILE_PATH)

    def _item_shape(self, s):
        if self.symbols < 2:
            raise InputError("symbols must be at least 2")
        if self.length > s.steps:
            raise InputError(f"length must be at most the layer's {s.steps} steps, got "
                             f"{self.length}")
        if self.symbols ** self.length > 10 ** 6:
            raise InputError(f"symbols ** length = {self.symbols ** self.length:,} patterns; "
                             f"keep it at most 1,000,000")
        return (self.symbols ** self.length,)

    def _scores_graph(self, tr):
        import tensorflow as tf
        cuts = tf.constant(sax_cuts(self.symbols), tf.float32)
        place = tf.constant(self.symbols ** np.arange(self.length - 1, -1, -1), tf.int32)
        parts = []
        for s in self._specs:
            mean = float(self._prof[f"xih_mean@{s.name}"])
            std = float(self._prof[f"xih_std@{s.name}"]) or 1.0
            z = (flow_views(tr.layers[s.name])[1] - mean) / std               # (N, T)
            paa = tf.matmul(z, tf.constant(paa_matrix(s.steps, self.length), tf.float32))
            sym = tf.reduce_sum(tf.cast(paa[:, :, None] >= cuts, tf.int32), axis=2)
            word = tf.reduce_sum(sym * place, axis=1)
            parts.append(tf.one_hot(word, self.symbols ** self.length, dtype=tf.float32))
        return tf.concat(parts, axis=1)

    def _describe_pos(self, pos):
        word, letters = int(pos[0]), []
        for _ in range(self.length):
            word, r = divmod(word, self.symbols)
            letters.append(chr(97 + r))
        return {"pattern": "".join(reversed(letters))}
