"""DeepGauge's criteria (Ma et al., ASE 2018) on neurons and on RConC's unit contributions.

Neurons are NC's (every traced layer's output element, one per step where a layer returns
sequences; raw outputs, no scaling). Contributions are RConC's unit contributions
(x^t·U_g, h^(t-1)·W_g per gate unit and step, Dense x·W per unit), as signed raw values before
any normalization: DeepGauge's criteria compare a value with the range the training inputs gave
that same item, and RConC's per-input min-max scaling would give every input a maximum of 1 in
every scope and hide exactly the out-of-range magnitudes NBC and SNAC look for.

With [lo, hi] an item's training range (the profile):

- kmnc (k-multisection): [lo, hi] cut into k equal sections; items (item, section); a section is
  covered when some input puts the value in it (the last section includes hi; a value outside
  [lo, hi] covers no section; an item with lo == hi has only its section 0 reachable).
- nbc (neuron boundary): items (item, side); lower covered when some value < lo, upper when > hi.
- snac (strong activation): items: item, covered when some value > hi.
- tknc (top-k neuron): per layer and input the k largest outputs of the layer (over all its
  elements; ties at the k-th value count too) are covered. No profile.
- tknp (top-k patterns): an input's pattern is, for every layer, the set of its top-k neurons;
  rate = distinct patterns seen / all possible patterns (the product over layers of C(n_l, k));
  ``patterns`` is the count. No profile.
"""
from __future__ import annotations

from math import comb

import numpy as np
import pandas as pd

from ..errors import InputError
from .base import Segment
from .params import PROFILE_PATH, IntRange, Param, Params
from .profile import ProfiledCriterion


def neuron_segments(tracer) -> list[Segment]:
    segs, off = [], 0
    for name, kind, shape in tracer.neuron_layers:
        segs.append(Segment(name, kind, "out", (), name, off, tuple(shape)))
        off += int(np.prod(shape))
    return segs


def neuron_values(tracer, trace):
    """(N, neurons) raw outputs in neuron_segments order."""
    import tensorflow as tf
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
            from .rconc import ContributionCoverage
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
        import tensorflow as tf
        if self.on == "neurons":
            return neuron_values(self.tracer, tr)
        parts = self._cc._unit_parts(tr)
        n = tf.shape(parts[0])[1]
        return tf.concat([tf.reshape(tf.transpose(p, [1, 0, 2]), (n, -1)) for p in parts], 1)

    def _scores_graph(self, tr):
        import tensorflow as tf
        v = self._values(tr)
        return tf.reshape(self._score(v, tf.constant(self._lo), tf.constant(self._hi)),
                          (tf.shape(v)[0], -1))

    def describe(self, index: int) -> dict:
        seg, pos = self._segment_of(index)
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
                                                      "into."), PROFILE_PATH)

    @property
    def slots(self):
        return self.k

    def _score(self, v, lo, hi):
        import tensorflow as tf
        w = (hi - lo) / self.k
        inv = tf.where(w > 0, 1.0 / tf.where(w > 0, w, tf.ones_like(w)), tf.zeros_like(w))
        idx = tf.clip_by_value(tf.cast(tf.floor((v - lo) * inv), tf.int32), 0, self.k - 1)
        inside = tf.cast((v >= lo) & (v <= hi), tf.float32)
        return tf.one_hot(idx, self.k, dtype=tf.float32) * inside[..., None]


class NeuronBoundary(_RangeCriterion):
    """DeepGauge's NBC on neurons: (item, lower | upper) beyond the training range."""

    name = "nbc"
    slots = 2
    slot_name = "side"              # 0: below lo, 1: above hi
    params = Params(PROFILE_PATH)

    def _score(self, v, lo, hi):
        import tensorflow as tf
        return tf.cast(tf.stack([v < lo, v > hi], axis=-1), tf.float32)


class StrongActivation(_RangeCriterion):
    """DeepGauge's SNAC on neurons: an item above its training maximum."""

    name = "snac"
    params = Params(PROFILE_PATH)

    def _score(self, v, lo, hi):
        import tensorflow as tf
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


def _layer_slices(tracer):
    """(name, start, size) of each layer's neurons in neuron_segments order."""
    return [(s.layer, s.offset, s.size) for s in neuron_segments(tracer)]


class TopKNeuron(ProfiledCriterion):
    """DeepGauge's TKNC: per layer and input, its top-k neurons are covered."""

    name = "tknc"
    uses_threshold = False
    params = Params(Param("k", 2, IntRange(1), "Top neurons per layer and input."))

    def _layout(self) -> list[Segment]:
        return neuron_segments(self.tracer)

    def _scores_graph(self, tr):
        import tensorflow as tf
        v = neuron_values(self.tracer, tr)
        parts = []
        for _, start, size in _layer_slices(self.tracer):
            lv = v[:, start:start + size]
            kth = tf.math.top_k(lv, k=min(self.k, size)).values[:, -1:]
            parts.append(tf.cast(lv >= kth, tf.float32))
        return tf.concat(parts, axis=1)

    def describe(self, index: int) -> dict:
        seg, pos = self._segment_of(index)
        return {"layer": seg.layer, "kind": seg.kind,
                "step": int(pos[0]) if len(seg.shape) == 2 else None, "gate": None,
                "part": "out", "unit": int(pos[-1]), "source": None}


class TopKPatterns(ProfiledCriterion):
    """DeepGauge's TKNP: distinct top-k patterns (one top-k set per layer) over all possible.

    An item is a pattern; its flat index is the mixed-radix number of each layer's top-k set's
    rank (combinatorial number system of the sorted indices), first layer most significant.
    Ties are broken by the lower index (tf.math.top_k)."""

    name = "tknp"
    uses_threshold = False
    params = Params(Param("k", 2, IntRange(1), "Top neurons per layer and input."))
    _ENUMERABLE = 10 ** 7

    def _layout(self) -> list[Segment]:
        self._layers = _layer_slices(self.tracer)
        self._kl = [min(self.k, size) for _, _, size in self._layers]
        self._radix = [comb(size, k) for (_, _, size), k in zip(self._layers, self._kl)]
        total = 1
        for r in self._radix:
            total *= r
        self._total_patterns = total
        return [Segment("all", "pattern", "pattern", (), "all", 0, (1,))]

    def __init__(self, model, **params):
        super().__init__(model, **params)
        self.total = self._total_patterns

    def _build(self) -> None:
        import tensorflow as tf

        def sets(tr):
            v = neuron_values(self.tracer, tr)
            out = [tf.sort(tf.math.top_k(v[:, s:s + n], k=k).indices, axis=1)
                   for (_, s, n), k in zip(self._layers, self._kl)]
            return tf.concat(out, axis=1)
        self._sets_fn = self._compile(sets)

    def _chunk_size(self) -> int:
        return 1024

    def reset(self) -> None:
        self._seen: dict = {}            # pattern id -> index of the first input that showed it
        self._n = 0
        self._inputs, self._kept = [], 0

    def _merge_state(self, other) -> None:
        for pid, first in other._seen.items():
            self._seen.setdefault(pid, first + self._n)
        self._n += other._n

    def _state_arrays(self) -> dict:
        return {"ids": np.array([str(p) for p in self._seen], dtype=str),
                "first": np.fromiter(self._seen.values(), np.int64, len(self._seen)),
                "n": np.int64(self._n)}

    def _load_state(self, arrays: dict) -> None:
        self._seen = {int(p): int(f) for p, f in zip(arrays["ids"], arrays["first"])}
        self._n = int(arrays["n"])

    @property
    def n_inputs(self) -> int:
        return self._n

    @staticmethod
    def _rank(idx: np.ndarray) -> int:
        """Rank of a sorted k-subset in the combinatorial number system (colex)."""
        return sum(comb(int(c), i + 1) for i, c in enumerate(idx))

    def _pattern_ids(self, sets: np.ndarray) -> list[int]:
        ids = []
        for row in sets:
            pid, pos = 0, 0
            for k, r in zip(self._kl, self._radix):
                pid = pid * r + self._rank(row[pos:pos + k])
                pos += k
            ids.append(pid)
        return ids

    def _update_chunk(self, x, embedded) -> None:
        for pid in self._pattern_ids(self._sets_fn(x, embedded).numpy()):
            self._seen.setdefault(pid, self._n)
            self._n += 1

    def patterns(self) -> int:
        return len(self._seen)

    def covered_at(self, threshold=None) -> int:
        self._cover_at(threshold)
        return len(self._seen)

    def rate(self, threshold=None) -> float:
        return self.covered_at(threshold) / self.total

    def curve(self, threshold=None) -> np.ndarray:
        self._cover_at(threshold)
        hits = np.bincount(np.fromiter(self._seen.values(), np.int64, len(self._seen)),
                           minlength=self._n)
        return np.cumsum(hits) / self.total

    def by_layer(self, threshold=None, by: str = "layer") -> pd.DataFrame:
        return pd.DataFrame([{"layer": "all", "kind": "pattern", "total": self.total,
                              "covered": self.covered_at(threshold), "rate": self.rate(threshold)}])

    def uncovered(self, layer: str | None = None, threshold=None) -> np.ndarray:
        if self.total > self._ENUMERABLE:
            raise InputError(f"tknp has {self.total:,} possible patterns, too many to list; "
                             f"read patterns() for the count seen")
        seen = np.fromiter(self._seen.keys(), np.int64, len(self._seen))
        return np.setdiff1d(np.arange(self.total, dtype=np.int64), seen)

    def profile(self, x, embedded: bool = False) -> np.ndarray:
        """(N,) each input's pattern id (a Python int as object when it exceeds int64)."""
        ids = self._pattern_ids(self._sets_fn(self.tracer.check_inputs(x, embedded),
                                              embedded).numpy())
        return np.array(ids, dtype=np.int64 if self.total < 2 ** 62 else object)

    def describe(self, index: int) -> dict:
        index = int(index)
        if not 0 <= index < self.total:
            raise InputError(f"index {index} out of range [0, {self.total})")
        out = {}
        for (name, _, size), k, r in reversed(list(zip(self._layers, self._kl, self._radix))):
            index, rank = divmod(index, r)
            units, c = [], size
            for i in range(k, 0, -1):          # unrank (colex): largest element first
                c -= 1
                while comb(c, i) > rank:
                    c -= 1
                rank -= comb(c, i)
                units.append(c)
            out[name] = sorted(units)
        return {"layer": "all", "kind": "pattern", "step": None, "gate": None, "part": "pattern",
                "unit": None, "source": None, "pattern": dict(reversed(list(out.items())))}

    def summary(self, threshold=None) -> dict:
        out = super().summary(threshold)
        out["patterns"] = self.patterns()
        return out


__all__ = ["KMultisection", "NeuronBoundary", "StrongActivation", "ContributionKMultisection",
           "ContributionBoundary", "ContributionStrongActivation", "TopKNeuron", "TopKPatterns"]
