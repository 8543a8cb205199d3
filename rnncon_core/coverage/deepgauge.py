"""DeepGauge's criteria (Ma et al., ASE 2018) on neurons and on RConC's unit contributions,
ported from their implementation in NeuraL-Coverage (github.com/Yuanyuan-Yuan/NeuraL-Coverage,
coverage.py ``KMNC``, ``NBC``, ``SNAC``, ``TKNC``, ``TKNP``; tool.py ``get_layer_output``) with
DeepHunter's (deephunter/coverage.py ``Coverage.kmnc_update_coverage``, as kept at
github.com/Shimmer93/Deephunter-backup) as a switch.

Neurons are NC's (every traced layer's output element, one per step where a layer returns
sequences: NLC's ``get_layer_output`` unrolls a recurrent layer's output into one layer per
step; Keras layer outputs, after the activation, as DeepGauge's and DeepHunter's Keras code
reads them). Contributions are RConC's unit contributions (x^t·U_g, h^(t-1)·W_g per gate unit
and step, Dense x·W per unit), as signed raw values before any normalization (our
extension). With [lo, hi] an item's training range (the profile, over all training inputs:
NLC's ``KMNC.build`` / ``set_range``):

- kmnc (k-multisection): items (item, section), k sections per item. ``rule="nlc"`` (NLC's
  ``KMNC.calculate``): section ceil((v − lo)/(hi − lo)·k) for lo <= v <= hi, so a value equal
  to lo covers none and hi covers the last; ``rule="deephunter"``: floor((v − lo)/((hi −
  lo)/k)), hi in the last section, lo in the first. In both an item that never varies in
  training (lo = hi: a dead unit, a step-0 output, x·U at step 0) covers no section but stays
  in the total, and a value outside [lo, hi] covers none.
- nbc (neuron boundary): items (item, side); lower covered when some value < lo, upper when
  > hi (NLC's ``NBC``: the mean of the two rates is the same count over 2 × items).
- snac (strong activation): items: item, covered when some value > hi (NLC's ``SNAC``).
- tknc (top-k neuron, NLC's ``TKNC``): per group and input the k largest outputs of the group
  are covered; ``groups="step"``: each step of a sequence-returning layer is a group of its
  own (NLC's unrolled layers), ``"layer"``: one group per layer over all its steps and units
  (our earlier choice). ``ties="first"``: exactly k per input, the lower index first among
  equal values (torch.topk leaves their order open; DeepHunter's stable sort takes the lower
  index); ``"all"``: every value equal to the k-th counts too (our earlier choice). No profile.
- tknp (top-k patterns, NLC's ``TKNP``, network mode): an input's pattern is, for every
  group, its top-k neurons; ``patterns="ordered"``: the indices in order of value (NLC keeps
  torch.topk's sorted indices), ``"set"``: as a set (the DeepGauge paper, our earlier
  choice). ``patterns()`` is the count of distinct patterns seen (NLC's TKNP figure); rate =
  that count over all possible patterns (the product over groups of k-permutations or
  k-subsets of the group). No profile. (NLC's ``TKNP.init_variable`` refers to an undefined
  ``self.layer_pattern``; we port what ``calculate`` means.)
"""
from __future__ import annotations

from math import comb

import numpy as np
import pandas as pd

from ..errors import InputError
from ..lazy import tf
from .base import Segment
from .params import PROFILE_PATH, IntRange, OneOf, Param, Params, profile_inputs
from .profile import ProfiledCriterion, ProfiledEngine
from .rconc import ContributionCoverage
from .report import Report


def neuron_segments(tracer) -> list[Segment]:
    segs, off = [], 0
    for name, kind, shape in tracer.neuron_layers:
        segs.append(Segment(name, kind, "out", (), name, off, tuple(shape)))
        off += int(np.prod(shape))
    return segs


def neuron_values(tracer, trace):
    """(N, neurons) raw outputs in neuron_segments order."""
    n = tf.shape(trace.inputs)[0]
    return tf.concat([tf.reshape(trace.layers[nm].output if nm in trace.layers
                                 else trace.outputs[nm], (n, -1))
                      for nm, _, _ in tracer.neuron_layers], axis=1)


class _RangeCriterion(ProfiledCriterion):
    """Base of kmnc / nbc / snac: per value item ``slots`` items scored against [lo, hi]."""

    uses_threshold = False
    on = "neurons"             # or "contributions"
    slots = 1

    def _layout(self) -> list[Segment]:
        prof = self._load_profile()
        if self.on == "neurons":
            base = neuron_segments(self.tracer)
            lo, hi = prof["neuron_lo"], prof["neuron_hi"]
        else:
            self._cc = ContributionCoverage(self.tracer, values="signed")
            self._record = ("xU", "hW")
            base = self._cc.segments
            lo, hi = prof["contrib_lo"], prof["contrib_hi"]
        n = sum(s.size for s in base)
        if lo.shape != (n,):
            raise InputError(f"the profile holds {lo.shape[0]} {self.on} ranges but the model has "
                             f"{n}; build the profile again")
        self._lo, self._hi = lo.astype(np.float32), hi.astype(np.float32)
        self._base = base
        segs, off = [], 0
        for s in base:
            shape = s.shape + ((self.slots,) if self.slots > 1 else ())
            segs.append(Segment(s.layer, s.kind, s.part, s.gates, s.source_layer, off, shape))
            off += int(np.prod(shape))
        return segs

    def _values(self, tr):
        if self.on == "neurons":
            return neuron_values(self.tracer, tr)
        parts = self._cc._unit_parts(tr)
        n = tf.shape(parts[0])[1]
        return tf.concat([tf.reshape(tf.transpose(p, [1, 0, 2]), (n, -1)) for p in parts], 1)

    def _scores_graph(self, tr):
        v = self._values(tr)
        return tf.reshape(self._score(v, tf.constant(self._lo), tf.constant(self._hi)),
                          (tf.shape(v)[0], -1))

    def describe(self, index: int) -> dict:
        seg, pos = self.report.segment_of(index)
        bseg = self._base[self.segments.index(seg)]
        vpos = pos[:-1] if self.slots > 1 else pos
        flat = bseg.offset + int(np.ravel_multi_index(tuple(int(p) for p in vpos), bseg.shape))
        if self.on == "neurons":
            step = int(vpos[0]) if len(bseg.shape) == 2 else None
            d = {"layer": seg.layer, "kind": seg.kind, "step": step, "gate": None,
                 "part": "out", "unit": int(vpos[-1]), "source": None}
        else:
            d = self._cc.describe(flat)
        d.update({"low": float(self._lo[flat]), "high": float(self._hi[flat])})
        if self.slots > 1:
            d[self.slot_name] = int(pos[-1])
        return d


class KMultisection(_RangeCriterion):
    """DeepGauge's KMNC on neurons (see the module docstring)."""

    name = "kmnc"
    slot_name = "section"
    params = Params(Param("k", 10, IntRange(1, 1000), "Sections each training range is cut "
                                                      "into."),
                    Param("rule", "nlc", OneOf(("nlc", "deephunter")),
                          "nlc: section ceil((v - lo) / (hi - lo) * k), a value equal to lo "
                          "covers none (NeuraL-Coverage); deephunter: floor, lo in the first "
                          "section, hi in the last."),
                    profile_inputs("all"), PROFILE_PATH)

    @property
    def slots(self):
        return self.k

    def _score(self, v, lo, hi):
        varies = hi > lo
        if self.rule == "nlc":               # NLC: ceil((v - lo) / div * k), 0 = no section
            div = tf.where(varies, hi - lo, tf.fill(tf.shape(hi), 1e-6))
            sec = tf.cast(tf.math.ceil((v - lo) / div * self.k), tf.int32) - 1
        else:                                # DeepHunter: int((v - lo) / unit), k -> k - 1
            unit = tf.where(varies, (hi - lo) / self.k, tf.ones_like(hi))
            sec = tf.minimum(tf.cast(tf.floor((v - lo) / unit), tf.int32), self.k - 1)
        ok = varies & (v >= lo) & (v <= hi) & (sec >= 0)
        sec = tf.clip_by_value(sec, 0, self.k - 1)
        return tf.one_hot(sec, self.k, dtype=tf.float32) * tf.cast(ok, tf.float32)[..., None]


class NeuronBoundary(_RangeCriterion):
    """DeepGauge's NBC on neurons: (item, lower | upper) beyond the training range."""

    name = "nbc"
    slots = 2
    slot_name = "side"              # 0: below lo, 1: above hi
    params = Params(profile_inputs("all"), PROFILE_PATH)

    def _score(self, v, lo, hi):
        return tf.cast(tf.stack([v < lo, v > hi], axis=-1), tf.float32)


class StrongActivation(_RangeCriterion):
    """DeepGauge's SNAC on neurons: an item above its training maximum."""

    name = "snac"
    params = Params(profile_inputs("all"), PROFILE_PATH)

    def _score(self, v, lo, hi):
        return tf.cast(v > hi, tf.float32)


class ContributionKMultisection(KMultisection):
    """KMNC over RConC's unit contributions (signed raw values)."""
    name = "rconc-kmnc"
    on = "contributions"


class ContributionBoundary(NeuronBoundary):
    """NBC over RConC's unit contributions (signed raw values)."""
    name = "rconc-nbc"
    on = "contributions"


class ContributionStrongActivation(StrongActivation):
    """SNAC over RConC's unit contributions (signed raw values)."""
    name = "rconc-snac"
    on = "contributions"


GROUPS = Param("groups", "step", OneOf(("step", "layer")),
               "step: each step of a sequence-returning layer is a group of its own (NLC "
               "unrolls recurrent layers); layer: one group per layer over all its steps.")


def top_groups(tracer, by: str) -> list[tuple]:
    """(layer, step or None, start, size) of each top-k group in neuron_segments order."""
    out = []
    for s in neuron_segments(tracer):
        if by == "step" and len(s.shape) == 2:
            out += [(s.layer, t, s.offset + t * s.shape[1], s.shape[1])
                    for t in range(s.shape[0])]
        else:
            out.append((s.layer, None, s.offset, s.size))
    return out


def _layer_views(tracer, v, by: str) -> list:
    """Per layer its values as (N, groups, group size)."""
    out = []
    for s in neuron_segments(tracer):
        lv = v[:, s.offset:s.offset + s.size]
        g = s.shape[0] if by == "step" and len(s.shape) == 2 else 1
        out.append(tf.reshape(lv, (tf.shape(v)[0], g, s.size // g)))
    return out


class TopKNeuron(ProfiledCriterion):
    """DeepGauge's TKNC: per group and input, its top-k neurons are covered."""

    name = "tknc"
    uses_threshold = False
    params = Params(Param("k", 2, IntRange(1), "Top neurons per group and input."), GROUPS,
                    Param("ties", "first", OneOf(("first", "all")),
                          "first: exactly k per input, the lower index first among equal "
                          "values; all: every value equal to the k-th counts too."))

    def _layout(self) -> list[Segment]:
        return neuron_segments(self.tracer)

    def _scores_graph(self, tr):
        v = neuron_values(self.tracer, tr)
        parts = []
        for lv in _layer_views(self.tracer, v, self.groups):
            size = lv.shape[-1]
            top = tf.math.top_k(lv, k=min(self.k, size))
            if self.ties == "all":
                hit = tf.cast(lv >= top.values[..., -1:], tf.float32)
            else:
                hit = tf.reduce_max(tf.one_hot(top.indices, size, dtype=tf.float32), axis=2)
            parts.append(tf.reshape(hit, (tf.shape(v)[0], -1)))
        return tf.concat(parts, axis=1)

    def describe(self, index: int) -> dict:
        seg, pos = self.report.segment_of(index)
        return {"layer": seg.layer, "kind": seg.kind,
                "step": int(pos[0]) if len(seg.shape) == 2 else None, "gate": None,
                "part": "out", "unit": int(pos[-1]), "source": None}


def _perm(n: int, k: int) -> int:
    out = 1
    for i in range(k):
        out *= n - i
    return out


class PatternState:
    """tknp's state: per pattern seen, the index of the first input that showed it."""

    def __init__(self):
        self.seen: dict = {}             # pattern id -> index of the first input that showed it
        self.n = 0

    def merge(self, other: "PatternState") -> None:
        for pid, first in other.seen.items():
            self.seen.setdefault(pid, first + self.n)
        self.n += other.n

    def arrays(self) -> dict:
        return {"ids": np.array([str(p) for p in self.seen], dtype=str),
                "first": np.fromiter(self.seen.values(), np.int64, len(self.seen)),
                "n": np.int64(self.n)}

    def load(self, arrays: dict) -> None:
        self.seen = {int(p): int(f) for p, f in zip(arrays["ids"], arrays["first"])}
        self.n = int(arrays["n"])


class _PatternEngine(ProfiledEngine):
    """A chunk's top-k indices in a graph, their pattern ids in Python."""
    one_graph = False

    def new_state(self) -> PatternState:
        return PatternState()

    def chunk_size(self) -> int:
        return 1024

    def step(self, x, embedded, with_outputs: bool = False):
        crit, state = self.crit, self.crit._state
        got = crit._sets_fn(x, embedded, with_outputs=with_outputs)
        tops, outs = got if with_outputs else (got, None)
        for pid in crit._pattern_ids(tops.numpy()):
            state.seen.setdefault(pid, state.n)
            state.n += 1
        return outs


class _PatternReport(Report):
    def covered_at(self, threshold=None) -> int:
        self.crit.cut(threshold)
        return len(self.crit._state.seen)

    def by_layer(self, threshold=None, by: str = "layer") -> pd.DataFrame:
        crit = self.crit
        return pd.DataFrame([{"layer": "all", "kind": "pattern", "total": crit.total,
                              "covered": self.covered_at(threshold), "rate": crit.rate(threshold)}])

    def uncovered(self, layer: str | None = None, threshold=None) -> np.ndarray:
        crit = self.crit
        if crit.total > crit._ENUMERABLE:
            raise InputError(f"tknp has {crit.total:,} possible patterns, too many to list; "
                             f"read patterns_seen() for the count seen")
        seen = np.fromiter(crit._state.seen.keys(), np.int64, len(crit._state.seen))
        return np.setdiff1d(np.arange(crit.total, dtype=np.int64), seen)

    def summary(self, threshold=None) -> dict:
        out = super().summary(threshold)
        out["patterns"] = self.crit.patterns_seen()
        return out


class TopKPatterns(ProfiledCriterion):
    """DeepGauge's TKNP: distinct top-k patterns (one top-k per group) over all possible.

    An item is a pattern; its flat index is the mixed-radix number of each group's rank, first
    group most significant: an ordered top-k (indices by value, ties: lower index first) is
    ranked by its Lehmer code, a set by the combinatorial number system of its sorted indices."""

    name = "tknp"
    uses_threshold = False
    params = Params(Param("k", 2, IntRange(1), "Top neurons per group and input."), GROUPS,
                    Param("patterns", "ordered", OneOf(("ordered", "set")),
                          "ordered: a group's top-k indices in order of value "
                          "(NeuraL-Coverage); set: as a set (the DeepGauge paper)."))
    _ENUMERABLE = 10 ** 7
    engine_class, report_class = _PatternEngine, _PatternReport

    def _layout(self) -> list[Segment]:
        self._groups = top_groups(self.tracer, self.groups)
        self._kl = [min(self.k, size) for *_, size in self._groups]
        count = _perm if self.patterns == "ordered" else comb
        self._radix = [count(size, k) for (*_, size), k in zip(self._groups, self._kl)]
        total = 1
        for r in self._radix:
            total *= r
        self._total_patterns = total
        return [Segment("all", "pattern", "pattern", (), "all", 0, (1,))]

    def __init__(self, model, **params):
        super().__init__(model, **params)
        self.total = self._total_patterns

    def _build(self) -> None:

        def tops(tr):
            v = neuron_values(self.tracer, tr)
            out = []
            for lv in _layer_views(self.tracer, v, self.groups):
                idx = tf.math.top_k(lv, k=min(self.k, lv.shape[-1])).indices
                if self.patterns == "set":
                    idx = tf.sort(idx, axis=-1)
                out.append(tf.reshape(idx, (tf.shape(v)[0], -1)))
            return tf.concat(out, axis=1)
        self._sets_fn = self.engine.compile(tops)

    def _rank(self, idx, n: int) -> int:
        """A group's rank: Lehmer code of an ordered top-k, colex rank of a sorted set."""
        if self.patterns == "set":
            return sum(comb(int(c), i + 1) for i, c in enumerate(idx))
        r, used = 0, []
        for i, a in enumerate(int(a) for a in idx):
            r = r * (n - i) + a - sum(u < a for u in used)
            used.append(a)
        return r

    def _unrank(self, r: int, n: int, k: int) -> list[int]:
        if self.patterns == "set":
            units, c = [], n
            for i in range(k, 0, -1):          # colex: largest element first
                c -= 1
                while comb(c, i) > r:
                    c -= 1
                r -= comb(c, i)
                units.append(c)
            return sorted(units)
        digits = []
        for i in range(k - 1, -1, -1):
            r, d = divmod(r, n - i)
            digits.append(d)
        free, out = list(range(n)), []
        for d in reversed(digits):
            out.append(free.pop(d))
        return out

    def _pattern_ids(self, tops: np.ndarray) -> list[int]:
        ids = []
        for row in tops:
            pid, pos = 0, 0
            for (*_, size), k, r in zip(self._groups, self._kl, self._radix):
                pid = pid * r + self._rank(row[pos:pos + k], size)
                pos += k
            ids.append(pid)
        return ids

    def patterns_seen(self) -> int:
        return len(self._state.seen)

    def rate(self, threshold=None) -> float:
        return self.report.covered_at(threshold) / self.total

    def curve(self, threshold=None) -> np.ndarray:
        self.cut(threshold)
        hits = np.bincount(np.fromiter(self._state.seen.values(), np.int64, len(self._state.seen)),
                           minlength=self._state.n)
        return np.cumsum(hits) / self.total

    def profile(self, x, embedded: bool = False) -> np.ndarray:
        """(N,) each input's pattern id (a Python int as object when it exceeds int64)."""
        ids = self._pattern_ids(self._sets_fn(self.tracer.check_inputs(x, embedded),
                                              embedded).numpy())
        return np.array(ids, dtype=np.int64 if self.total < 2 ** 62 else object)

    def describe(self, index: int) -> dict:
        index = int(index)
        if not 0 <= index < self.total:
            raise InputError(f"index {index} out of range [0, {self.total})")
        out = []
        for (layer, step, _, size), k, r in reversed(list(zip(self._groups, self._kl,
                                                               self._radix))):
            index, rank = divmod(index, r)
            out.append((layer if step is None else f"{layer}@{step}",
                        self._unrank(rank, size, k)))
        return {"layer": "all", "kind": "pattern", "step": None, "gate": None, "part": "pattern",
                "unit": None, "source": None, "pattern": dict(reversed(out))}


__all__ = ["KMultisection", "NeuronBoundary", "StrongActivation", "ContributionKMultisection",
           "ContributionBoundary", "ContributionStrongActivation", "TopKNeuron", "TopKPatterns",
           "top_groups"]
