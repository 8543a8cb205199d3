"""testRNN's criteria (Huang et al., "Coverage-guided testing for recurrent neural networks",
IEEE TR 2021), ported from its code at github.com/TrustAI/testRNN: boundary (BC), step-wise
(SC) and temporal (TC) coverage over views of one recurrent layer's hidden state per step t
(``profile.flow_views``; ξ^h_t = Σ_j h_t,j, ξ^h_(−1) = 0), over a window of steps.

What testRNN's code does (src/utils.py ``aggregate_inf``, src/testObjective.py
``BCTestObjectiveEvaluation`` / ``SCTestObjectiveEvaluation`` / ``TCTestObjectiveEvaluation``,
src/mnistTestSuite_adv_test.py ``mnist_lstm_adv_test``, main.py's defaults), and our defaults:

- one layer (``layer``; testRNN's MNIST example tests its last LSTM) and a window of steps
  t1..t2 (``steps``; testRNN's ``--seq``, e.g. [4, 24] for MNIST; default here: every step);
- one training range over all inputs and all steps of the window (``max_BC``/``min_BC``,
  ``max_SC``/``min_SC`` are single numbers): ``ranges="global"``; ``"per-step"`` is our
  earlier range per step;
- bc: the view |ξ^h_t| (``alpha_TC``; ``view="hidden"``), items: the window's steps; a step is
  covered when (v − min)/(max − min) reaches the threshold (0.8, main.py's ``threshold_BC``)
  for some input. ``view="forget"`` reads the paper's ξ^f_t (mean forget gate; GRU: mean
  update gate, our extension) and ``sides="both"`` adds a low side per step, covered when
  (max − v)/(max − min) reaches the threshold (our earlier BC);
- sc: the view |ξ^h_t − ξ^h_(t−1)| (``alpha_SC``; ``change="net"``), items: the window's
  steps, covered when (v − min)/(max − min) reaches the threshold (0.6, ``threshold_SC``).
  ``change="parts"``: |Δξ^h+_t| + |Δξ^h−_t| (the paper's Δξ^h, our earlier SC);
- tc: the series |ξ^h_t| over the window (``view="abs"``; ``"signed"``: ξ^h_t, our earlier)
  z-normalized with the training mean and standard deviation over inputs and the window's
  steps, reduced to ``length`` values by saxpy's ``paa`` (each value repeated ``length``
  times, cut into ``length`` equal runs, each averaged) and each value turned into one of
  ``symbols`` letters at the standard normal quantiles (saxpy's ``ts_to_string`` with
  ``cuts_for_asize``). Items: all symbols^length words, covered when some input's word is it.

testRNN covers a step when the normalized value is >= the threshold; here > (they differ only
for a value exactly at it). A range with max = min scores 0 (testRNN divides by zero).
"""
from __future__ import annotations

from statistics import NormalDist

import numpy as np

from ..errors import InputError
from ..lazy import tf
from .base import Segment, threshold_grid
from .params import (CURVE_THRESHOLDS, PROFILE_PATH, IntRange, OneOf, Param, Params,
                     StepWindow, Text, profile_inputs, threshold)
from .profile import ProfiledCriterion, flow_views


def paa_matrix(steps: int, length: int) -> np.ndarray:
    """(steps, length) A with series @ A = the PAA of the series (see the module docstring)."""
    rep = np.repeat(np.eye(steps), length, axis=1)           # (T, T * L): each value L times
    return rep.reshape(steps, length, steps).mean(axis=2)


def sax_cuts(symbols: int) -> np.ndarray:
    return np.array([NormalDist().inv_cdf(i / symbols) for i in range(1, symbols)])


LAYER = Param("layer", None, Text(choices=("all",), layers="recurrent",
                                  what="a recurrent layer"),
              "The recurrent layer tested (default: the last one, as testRNN tests one layer); "
              "all: every recurrent layer, each with its own ranges.")
STEPS = Param("steps", None, StepWindow(), "The window of steps FIRST:LAST (testRNN's --seq; "
                                           "default: every step).")
RANGES = Param("ranges", "global", OneOf(("global", "per-step")),
               "global: one training min / max over every step of the window (testRNN's "
               "aggregate_inf); per-step: a range per step.")


class _FlowCriterion(ProfiledCriterion):
    kinds = ("lstm", "gru", "simple_rnn")
    what = "a recurrent layer"
    view_key = ""

    def _layout(self) -> list[Segment]:
        rec = self._recurrent_specs(self.what, self.kinds)
        names = [s.name for s in rec]
        if self.layer not in (None, "all") and self.layer not in names:
            raise InputError(f"no {self.what} {self.layer!r}; choose one of {', '.join(names)} "
                             f"or all")
        self._specs = rec if self.layer == "all" else \
            [s for s in rec if s.name == (self.layer or names[-1])]
        self._load_profile()
        segs, off = [], 0
        for s in self._specs:
            t1, t2 = self._window(s)
            shape = self._item_shape(s, t2 - t1 + 1)
            segs.append(Segment(s.name, s.kind, self.part, (), s.name, off, shape))
            off += int(np.prod(shape))
        return segs

    def _window(self, s) -> tuple[int, int]:
        if self.steps is None:
            return 0, s.steps - 1
        t1, t2 = map(int, self.steps.split(":"))
        if t2 >= s.steps:
            raise InputError(f"steps {self.steps} go past layer {s.name}'s {s.steps} steps "
                             f"(0..{s.steps - 1})")
        return t1, t2

    def _curve_grid(self) -> tuple:
        if not self.uses_threshold:
            return super()._curve_grid()
        return threshold_grid(self.threshold, self.curve_thresholds)

    def _range(self, key, s):
        """lo, 1 / (hi − lo) (0 where hi = lo), hi over the window: per step (W,) or one
        global value broadcast to (W,)."""
        t1, t2 = self._window(s)
        lo = self._prof[f"{key}_lo@{s.name}"][t1:t2 + 1].astype(np.float32)
        hi = self._prof[f"{key}_hi@{s.name}"][t1:t2 + 1].astype(np.float32)
        if self.ranges == "global":
            lo, hi = np.full_like(lo, lo.min()), np.full_like(hi, hi.max())
        r = hi - lo
        return lo, np.where(r > 0, 1.0 / np.where(r > 0, r, 1.0), 0.0).astype(np.float32), hi

    def _view(self, tr, s):
        t1, t2 = self._window(s)
        return flow_views(tr.layers[s.name])[self.view_key][:, t1:t2 + 1]

    def describe(self, index: int) -> dict:
        seg, pos = self.report.segment_of(index)
        d = {"layer": seg.layer, "kind": seg.kind, "step": None, "gate": None, "part": seg.part,
             "unit": None, "source": None}
        d.update(self._describe_pos(pos, self._window(self.tracer.spec[seg.layer])[0]))
        return d


class BoundaryCoverage(_FlowCriterion):
    """testRNN's BC: steps whose |ξ^h_t| reaches the top of the training range (see the
    module docstring)."""

    name = "bc"
    params = Params(threshold(0.8),
                    Param("view", "hidden", OneOf(("hidden", "forget")),
                          "hidden: |ξ^h_t|, the sum of h_t (testRNN's code); forget: the mean "
                          "forget gate ξ^f_t (the paper; GRU: the update gate)."),
                    Param("sides", "upper", OneOf(("upper", "both")),
                          "upper: a step is covered near the top of the range (testRNN's "
                          "code); both: also a low side near the bottom."),
                    RANGES, LAYER, STEPS, profile_inputs("all"), PROFILE_PATH,
                    CURVE_THRESHOLDS)

    @property
    def part(self):
        return "xi_f" if self.view == "forget" else "abs_xi_h"

    @property
    def view_key(self):
        return "xif" if self.view == "forget" else "axih"

    def _layout(self):
        if self.view == "forget":
            self.kinds = ("lstm", "gru")
            self.what = "an LSTM or GRU layer (view='forget' reads the forget / update gate)"
        return super()._layout()

    def _item_shape(self, s, w):
        return (w, 2) if self.sides == "both" else (w,)

    def _scores_graph(self, tr):
        parts = []
        for s in self._specs:
            lo, inv, hi = self._range(self.view_key, s)
            v = self._view(tr, s)                                     # (N, W)
            if self.sides == "both":
                v = tf.reshape(tf.stack([(hi - v) * inv, (v - lo) * inv], axis=2),
                               (tf.shape(v)[0], -1))
            else:
                v = (v - lo) * inv
            parts.append(v)
        return tf.concat(parts, axis=1)

    def _describe_pos(self, pos, t1):
        d = {"step": t1 + int(pos[0])}
        if self.sides == "both":
            d["side"] = ("low", "high")[int(pos[1])]
        return d


class StepwiseCoverage(_FlowCriterion):
    """testRNN's SC: steps whose hidden-state change reaches the top of the training range
    (see the module docstring)."""

    name = "sc"
    params = Params(threshold(0.6),
                    Param("change", "net", OneOf(("net", "parts")),
                          "net: |ξ^h_t − ξ^h_(t−1)| (testRNN's code); parts: |Δξ^h+| + "
                          "|Δξ^h−| (the paper)."),
                    RANGES, LAYER, STEPS, profile_inputs("all"), PROFILE_PATH,
                    CURVE_THRESHOLDS)

    @property
    def part(self):
        return "d_xi_h"

    @property
    def view_key(self):
        return "dnet" if self.change == "net" else "dparts"

    def _item_shape(self, s, w):
        return (w,)

    def _scores_graph(self, tr):
        parts = []
        for s in self._specs:
            lo, inv, _ = self._range(self.view_key, s)
            parts.append((self._view(tr, s) - lo) * inv)
        return tf.concat(parts, axis=1)

    def _describe_pos(self, pos, t1):
        return {"step": t1 + int(pos[0])}


class TemporalCoverage(_FlowCriterion):
    """testRNN's TC: SAX words of the |ξ^h| series over the window (see the module
    docstring)."""

    name = "tc"
    uses_threshold = False
    params = Params(Param("symbols", 3, IntRange(1, 26), "SAX letters per value."),
                    Param("length", 5, IntRange(1), "Values per SAX word (PAA segments)."),
                    Param("view", "abs", OneOf(("abs", "signed")),
                          "abs: the series |ξ^h_t| (testRNN's code); signed: ξ^h_t."),
                    LAYER, STEPS, profile_inputs("all"), PROFILE_PATH)

    @property
    def part(self):
        return "abs_xi_h" if self.view == "abs" else "xi_h"

    @property
    def view_key(self):
        return "axih" if self.view == "abs" else "xih"

    def _item_shape(self, s, w):
        if self.symbols < 2:
            raise InputError("symbols must be at least 2")
        if self.length > w:
            raise InputError(f"length must be at most the window's {w} steps, got "
                             f"{self.length}")
        if self.symbols ** self.length > 10 ** 6:
            raise InputError(f"symbols ** length = {self.symbols ** self.length:,} patterns; "
                             f"keep it at most 1,000,000")
        return (self.symbols ** self.length,)

    def _moments(self, s) -> tuple[float, float]:
        """Training mean and standard deviation over inputs and the window's steps."""
        t1, t2 = self._window(s)
        s1 = float(self._prof[f"{self.view_key}_s1@{s.name}"][t1:t2 + 1].sum())
        s2 = float(self._prof[f"{self.view_key}_s2@{s.name}"][t1:t2 + 1].sum())
        n = float(self._prof[f"count@{s.name}"]) * (t2 - t1 + 1)
        mean = s1 / n
        return mean, float(np.sqrt(max(s2 / n - mean * mean, 0.0)))

    def _scores_graph(self, tr):
        cuts = tf.constant(sax_cuts(self.symbols), tf.float32)
        place = tf.constant(self.symbols ** np.arange(self.length - 1, -1, -1), tf.int32)
        parts = []
        for s in self._specs:
            mean, std = self._moments(s)
            z = (self._view(tr, s) - mean) / (std or 1.0)                     # (N, W)
            t1, t2 = self._window(s)
            paa = tf.matmul(z, tf.constant(paa_matrix(t2 - t1 + 1, self.length), tf.float32))
            sym = tf.reduce_sum(tf.cast(paa[:, :, None] >= cuts, tf.int32), axis=2)
            word = tf.reduce_sum(sym * place, axis=1)
            parts.append(tf.one_hot(word, self.symbols ** self.length, dtype=tf.float32))
        return tf.concat(parts, axis=1)

    def _describe_pos(self, pos, t1):
        word, letters = int(pos[0]), []
        for _ in range(self.length):
            word, r = divmod(word, self.symbols)
            letters.append(chr(97 + r))
        return {"pattern": "".join(reversed(letters))}
