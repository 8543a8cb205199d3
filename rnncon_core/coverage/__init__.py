"""Coverage criteria over a trace: contribution coverage (RConC), neuron coverage (NC) and
RNN-Test's hidden-state (HS_C) and cell-state (CS_C) coverage.

Every criterion has the life cycle of a Keras metric: parameters in ``__init__``, ``update(x)``
(union over every input so far), ``rate(threshold=None)``, ``reset()``, ``get_config()``. The
state is, per item (contribution, neuron, ...), the largest score any input gave it, plus the
index of the first input that lifted it past each threshold of a small grid; so the rate at any
threshold, ``by_layer`` and ``curve`` need no new forward pass. Conventions: docs/coverage.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import InputError, UnsupportedModelError
from ..trace import Tracer

REPORT_THRESHOLDS = (0.0, 0.25, 0.5, 0.75)
_CHUNK_ELEMENTS = 2 ** 24          # floats of scores held at once per update chunk
_UNIT_CHUNK_ELEMENTS = 2 ** 26     # unit RConC keeps only the trace's own parts (no copies)
_SUB = 32                          # unit RConC: maxima kept per sub-batch of this many inputs
_UNIT_RECORD = ("xU", "hW")        # what unit RConC reads from the trace
_EDGE_RECORD = ("h_prev", "hsrc")  # what edge RConC reads


# ---------------------------------------------------------------- parameters (checked in one place)

@dataclass(frozen=True)
class _Interval:
    lo: float
    hi: float

    def check(self, name, v):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) \
                or not (self.lo <= float(v) <= self.hi):
            raise InputError(f"{name} must be a number in [{self.lo}, {self.hi}], got {v!r}")
        return float(v)


@dataclass(frozen=True)
class _OneOf:
    options: tuple

    def check(self, name, v):
        if v not in self.options:
            raise InputError(f"{name} must be one of {', '.join(map(repr, self.options))}, "
                             f"got {v!r}")
        return v


class _Bool:
    def check(self, name, v):
        if not isinstance(v, (bool, np.bool_)):
            raise InputError(f"{name} must be True or False, got {v!r}")
        return bool(v)


class _Thresholds:
    def check(self, name, v):
        if v is None:
            return None
        try:
            vals = tuple(sorted({_Interval(0, 1).check(name, float(t)) for t in v}))
        except TypeError:
            raise InputError(f"{name} must be a list of thresholds in [0, 1], got {v!r}") from None
        return vals


class _PositiveIntOrNone:
    def check(self, name, v):
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise InputError(f"{name} must be a positive integer (or None), got {v!r}")
        return int(v)


# ---------------------------------------------------------------- item layout

@dataclass(frozen=True)
class Segment:
    """A contiguous run of items in the flat index: one part of one layer."""
    layer: str
    kind: str
    part: str                      # rconc: "x" | "h"; nc/hsc/csc: "out" | "input"
    gates: tuple
    source_layer: str              # layer whose neurons emit (rconc) / own the items
    offset: int
    shape: tuple                   # the items' array shape, e.g. (T, J) or (T, K, J)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))


# ---------------------------------------------------------------- running maxima

class _MaxState:
    """Per item: the largest score so far, and the first input index above each grid threshold."""

    def __init__(self, total: int, grid: tuple):
        self.total, self.grid = total, tuple(grid)
        self.max = np.full(total, -np.inf, np.float32)
        self.first = {t: np.full(total, -1, np.int64) for t in self.grid}
        self.n = 0

    def add(self, batch_max: np.ndarray, n_batch: int, first_in_batch) -> None:
        """Add n_batch new inputs, in order, whose per-item maxima are batch_max.
        first_in_batch(t, cols) gives, for items cols, the index in the batch of the first input
        above t; it is asked only for items newly lifted past a grid threshold, so after the
        first batches it has little to do."""
        for t, first in self.first.items():
            cols = np.flatnonzero((batch_max > t) & (first < 0))
            if cols.size:
                first[cols] = self.n + first_in_batch(t, cols)
        np.maximum(self.max, batch_max, out=self.max)
        self.n += int(n_batch)

    def add_batch(self, scores, batch_max: np.ndarray) -> None:
        """add() from the batch's scores (B, total), a tf.Tensor."""
        import tensorflow as tf

        def first_in_batch(t, cols):
            sub = tf.gather(scores, cols, axis=1) if cols.size < self.total else scores
            return tf.argmax(tf.cast(sub > t, tf.int8), axis=0, output_type=tf.int32).numpy()
        self.add(batch_max, int(scores.shape[0]), first_in_batch)

    def curve_counts(self, t: float) -> np.ndarray:
        first = self.first[t]
        hits = np.bincount(first[first >= 0], minlength=self.n)
        return np.cumsum(hits)


# ---------------------------------------------------------------- base class

class Criterion:
    """Base of every coverage criterion (see the module docstring)."""

    name = ""
    _params: dict = {}
    uses_threshold = True

    def __init__(self, model, **params):
        unknown = set(params) - set(self._params)
        if unknown:
            raise InputError(f"{type(self).__name__} has no parameter(s) "
                             f"{', '.join(sorted(unknown))}; it takes "
                             f"{', '.join(self._params) or 'none'}")
        for key, (default, check) in self._params.items():
            setattr(self, key, check.check(key, params.get(key, default)))
        self.model = model
        self.tracer = model if isinstance(model, Tracer) else Tracer(model)
        self.segments: list[Segment] = self._layout()
        self.total = int(sum(s.size for s in self.segments))
        self._offsets = np.array([s.offset for s in self.segments])
        self._build()
        self.reset()

    # -- what subclasses provide
    def _layout(self) -> list[Segment]:
        raise NotImplementedError

    def _build(self) -> None:
        """Compile the TF functions once."""

    def _curve_grid(self) -> tuple:
        return (self._cover_at(None),)

    # -- life cycle
    def reset(self) -> None:
        self._state = _MaxState(self.total, self._curve_grid())
        self._inputs: list = []

    def update(self, x, embedded: bool = False):
        """Add a batch of inputs to the covered set (union with every earlier input)."""
        x = self.tracer.check_inputs(x, embedded)
        n = int(x.shape[0])
        chunk = self._chunk_size()
        for start in range(0, n, chunk):
            self._update_chunk(x[start:start + chunk], embedded)
        self._inputs.append((x.numpy(), embedded))
        return self

    def _elements_per_input(self) -> int:
        return self.total

    def _chunk_size(self) -> int:
        return max(1, min(1024, _CHUNK_ELEMENTS // max(1, self._elements_per_input())))

    def _update_chunk(self, x, embedded) -> None:
        if getattr(self, "_reduce_fn", None) is None:
            self._reduce_fn = self._compile(_with_max(self._scores_graph))
        scores, bm = self._reduce_fn(x, embedded)
        self._state.add_batch(scores, bm.numpy())

    @property
    def n_inputs(self) -> int:
        return self._state.n

    def _cover_at(self, threshold):
        """Scores strictly above this count as covered."""
        if not self.uses_threshold:
            if threshold is not None:
                raise InputError(f"{self.name} has no threshold (items are covered or not)")
            return 0.5
        t = self.threshold if threshold is None else threshold
        return _Interval(0, 1).check("threshold", t)

    def _covered_mask(self, threshold=None) -> np.ndarray:
        return self._max_values() > self._cover_at(threshold)

    def _max_values(self) -> np.ndarray:
        return self._state.max

    # -- reading
    @property
    def covered(self) -> int:
        return self.covered_at(None)

    def covered_at(self, threshold=None) -> int:
        return int(np.count_nonzero(self._covered_mask(threshold)))

    def rate(self, threshold=None) -> float:
        """covered / total at the criterion's threshold, or at any other one."""
        return self.covered_at(threshold) / self.total if self.total else 0.0

    def by_layer(self, threshold=None, by: str = "layer") -> pd.DataFrame:
        """One row per layer: layer, kind, total, covered, rate. ``by="source"`` (RConC) groups
        contributions by the layer whose neurons emit them (the paper's Figure 7 rows)."""
        if by not in ("layer", "source"):
            raise InputError(f"by must be 'layer' or 'source', got {by!r}")
        mask = self._covered_mask(threshold)
        rows: dict[str, dict] = {}
        for seg in self.segments:
            key = seg.layer if by == "layer" else seg.source_layer
            kind = seg.kind if by == "layer" else self._layer_kind(key)
            row = rows.setdefault(key, {"layer": key, "kind": kind, "total": 0, "covered": 0})
            row["total"] += seg.size
            row["covered"] += int(np.count_nonzero(mask[seg.offset:seg.offset + seg.size]))
        df = pd.DataFrame(list(rows.values()), columns=["layer", "kind", "total", "covered"])
        df["rate"] = df["covered"] / df["total"].where(df["total"] > 0, 1)
        return df

    def _layer_kind(self, name: str) -> str:
        spec = self.tracer.spec.get(name)
        return spec.kind if spec is not None else "input"

    def curve(self, threshold=None) -> np.ndarray:
        """Coverage after 1, 2, ..., N inputs (in the order given to update)."""
        t = self._cover_at(threshold)
        if t not in self._state.grid:
            raise InputError(f"the growth curve is kept at thresholds "
                             f"{', '.join(map(str, self._state.grid))}; make the criterion "
                             f"with curve_thresholds including {t}")
        return self._state.curve_counts(t) / max(1, self.total)

    def uncovered(self, layer: str | None = None, threshold=None) -> np.ndarray:
        """Flat indices of items no input has covered yet; layer None, "dense", or a name."""
        mask = ~self._covered_mask(threshold)
        if layer is not None:
            keep = np.zeros(self.total, bool)
            names = {s.layer for s in self.segments}
            if layer != "dense" and layer not in names:
                raise InputError(f"no layer {layer!r}; choose one of {', '.join(sorted(names))} "
                                 f"or 'dense'")
            for seg in self.segments:
                if seg.layer == layer or (layer == "dense" and seg.kind == "dense"):
                    keep[seg.offset:seg.offset + seg.size] = True
            mask &= keep
        return np.flatnonzero(mask)

    def _segment_of(self, index: int) -> tuple[Segment, tuple]:
        if not (0 <= int(index) < self.total):
            raise InputError(f"index {index} out of range [0, {self.total})")
        seg = self.segments[int(np.searchsorted(self._offsets, index, side="right")) - 1]
        return seg, np.unravel_index(int(index) - seg.offset, seg.shape)

    def _check_indices(self, indices):
        import tensorflow as tf
        idx = np.asarray(indices, dtype=np.int64).ravel()
        if idx.size and (idx.min() < 0 or idx.max() >= self.total):
            raise InputError(f"indices must lie in [0, {self.total}); got {idx.min()}..{idx.max()}")
        return tf.constant(idx, tf.int32)

    def stored_input(self, index: int):
        """The index-th input given to update (as validated), and whether it was embedded."""
        if not (0 <= index < self.n_inputs):
            raise InputError(f"input_index {index} out of range: {self.n_inputs} inputs so far")
        for arr, embedded in self._inputs:
            if index < len(arr):
                return arr[index:index + 1], embedded
            index -= len(arr)
        raise AssertionError("unreachable")

    # -- config
    def get_config(self) -> dict:
        return {"name": self.name, **{k: (list(v) if isinstance(v, tuple) else v)
                                      for k in self._params for v in [getattr(self, k)]}}

    @classmethod
    def from_config(cls, model, config: dict):
        params = {k: v for k, v in config.items() if k != "name"}
        return cls(model, **params)

    def summary(self, threshold=None) -> dict:
        """The CLI's JSON object."""
        return {"criterion": self.name,
                "threshold": self._cover_at(threshold) if self.uses_threshold else None,
                "granularity": getattr(self, "granularity", None),
                "normalize": getattr(self, "normalize", None),
                "n_inputs": self.n_inputs, "total": self.total,
                "covered": self.covered_at(threshold), "rate": self.rate(threshold),
                "by_layer": self.by_layer(threshold).to_dict(orient="records")}

    def __repr__(self):
        params = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._params)
        return f"{type(self).__name__}({params}; {self.n_inputs} inputs, rate {self.rate():.4f})"

    # -- TF helpers
    def _compile(self, fn, extra_sig=(), record=None):
        """fn(trace, *extra) -> tensors, compiled once for float inputs and for word ids.
        With record, fn gets the lean time-major dict of Tracer.forward_steps instead."""
        import tensorflow as tf
        tr = self.tracer
        run = tr.forward if record is None else (lambda x: tr.forward_steps(x, record)[0])
        fsig = [tf.TensorSpec((None,) + tr.embedded_shape, tf.float32), *extra_sig]
        f_float = tf.function(lambda x, *a: fn(run(x), *a), input_signature=fsig)
        f_ids = None
        if tr.embedding is not None:
            isig = [tf.TensorSpec((None,) + tr.input_shape, tf.int32), *extra_sig]
            f_ids = tf.function(lambda ids, *a: fn(run(tr.embed_tf(ids)), *a),
                                input_signature=isig)

        def call(x, embedded=False, *args):
            if f_ids is not None and not embedded:
                return f_ids(x, *args)
            return f_float(x, *args)
        return call


def _with_max(scores_graph):
    """trace -> (scores (N, total), their maximum over the batch per item)."""
    import tensorflow as tf

    @tf.autograph.experimental.do_not_convert
    def fn(trace):
        v = scores_graph(trace)
        return v, tf.reduce_max(v, axis=0)
    return fn


def _minmax_normalize(v, axis=1):
    """Eq. 3 per input: (v - min) / (max - min); all zeros where max == min."""
    import tensorflow as tf
    lo = tf.reduce_min(v, axis=axis, keepdims=True)
    r = tf.reduce_max(v, axis=axis, keepdims=True) - lo
    inv = tf.where(r > 0, 1.0 / tf.where(r > 0, r, tf.ones_like(r)), tf.zeros_like(r))
    return (v - lo) * inv


def _grid(threshold: float, extra) -> tuple:
    return tuple(sorted(set(extra if extra is not None else REPORT_THRESHOLDS) | {threshold}))


# ---------------------------------------------------------------- contribution coverage

@dataclass(frozen=True)
class _Block:
    """One source tensor times one weight matrix: the unit of the contribution layout."""
    layer: str
    kind: str
    part: str            # "x" or "h"
    gates: tuple
    source: str          # the LayerTrace field holding the sources: "x", "h_prev" or "h_src:h"
    source_layer: str
    col: slice           # columns of the layer's kernel / recurrent kernel
    steps: int           # 1 for dense
    k: int               # source neurons
    j: int               # target columns (gates x units)


class ContributionCoverage(Criterion):
    """RConC: a contribution is a source neuron's output times a weight it emits (no biases).

    granularity "unit": one per (step, gate unit, part x|h), the sum over sources (Table 1's
    count); "edge": one per (step, source, gate unit) product (Definition 1).
    normalize "model" (Eq. 3 over all of one input's contributions) or "layer".
    """

    name = "rconc"
    _params = {"threshold": (0.25, _Interval(0.0, 1.0)),
               "granularity": ("unit", _OneOf(("unit", "edge"))),
               "normalize": ("model", _OneOf(("model", "layer"))),
               "curve_thresholds": (None, _Thresholds())}

    def _layout(self) -> list[Segment]:
        blocks: list[_Block] = []
        prev = "input"
        for spec in self.tracer.specs:
            if spec.kind == "dense":
                blocks.append(_Block(spec.name, "dense", "x", (), "x", prev,
                                     slice(0, spec.units), 1, spec.in_dim, spec.units))
            else:
                gu = len(spec.gates) * spec.units
                blocks.append(_Block(spec.name, spec.kind, "x", spec.gates, "x", prev,
                                     slice(0, gu), spec.steps, spec.in_dim, gu))
                if spec.kind == "gru" and not spec.reset_after:
                    u = spec.units
                    blocks.append(_Block(spec.name, spec.kind, "h", ("z", "r"), "h_prev",
                                         spec.name, slice(0, 2 * u), spec.steps, u, 2 * u))
                    blocks.append(_Block(spec.name, spec.kind, "h", ("h",), "h_src:h",
                                         spec.name, slice(2 * u, 3 * u), spec.steps, u, u))
                else:
                    blocks.append(_Block(spec.name, spec.kind, "h", spec.gates, "h_prev",
                                         spec.name, slice(0, gu), spec.steps, spec.units, gu))
            prev = spec.name
        self.blocks = blocks
        segs, off = [], 0
        for b in blocks:
            shape = (b.steps, b.j) if self.granularity == "unit" else (b.steps, b.k, b.j)
            segs.append(Segment(b.layer, b.kind, b.part, b.gates, b.source_layer, off, shape))
            off += int(np.prod(shape))
        # normalization scopes: one for the model, or one per layer (blocks are contiguous)
        names = [b.layer for b in blocks]
        self._scope_of_block = [0] * len(blocks) if self.normalize == "model" \
            else [list(dict.fromkeys(names)).index(n) for n in names]
        self._n_scopes = max(self._scope_of_block) + 1
        return segs

    def _curve_grid(self) -> tuple:
        if self.granularity == "edge":
            return tuple(sorted(set(self.curve_thresholds or ()) | {self.threshold}))
        return _grid(self.threshold, self.curve_thresholds)

    # -- TF parts
    def _weight(self, b: _Block):
        w = self.tracer._weights[b.layer]
        mat = w["kernel"] if b.part == "x" else w["recurrent_kernel"]
        return mat[:, b.col]

    @staticmethod
    def _source(raw, b: _Block):
        """The block's sources, time-major (T, N, K) (dense: (1, N, K))."""
        r = raw[b.layer]
        if b.kind == "dense":
            return r["x"][None]
        return r["hsrc"] if b.source == "h_src:h" else r[b.source]

    def _unit_parts(self, raw):
        """Per block its unit contributions, time-major (T, N, J) (dense: (1, N, J))."""
        parts = []
        for b in self.blocks:
            r = raw[b.layer]
            if b.kind == "dense":
                parts.append(r["pre"][None])
                continue
            v = r["xU"] if b.part == "x" else r["hW"]
            parts.append(v if b.col.stop - b.col.start == v.shape[-1] else v[:, :, b.col])
        return parts

    def _scores_graph(self, raw):
        return self._unit_scores_graph(raw)

    def _unit_scores_graph(self, raw):
        """(N, total) normalized unit contributions (for values() and profile())."""
        import tensorflow as tf
        parts = self._unit_parts(raw)
        n = tf.shape(parts[0])[1]
        flat = [tf.reshape(tf.transpose(p, [1, 0, 2]), (n, -1)) for p in parts]
        if self.normalize == "model":
            return _minmax_normalize(tf.concat(flat, axis=1))
        out = []
        for s in range(self._n_scopes):
            members = [f for f, sc in zip(flat, self._scope_of_block) if sc == s]
            out.append(_minmax_normalize(tf.concat(members, axis=1)))
        return tf.concat(out, axis=1)

    def _unit_chunk_graph(self, raw):
        """The update's graph: the parts, per input and scope min and 1/range, and per block the
        maxima of the normalized values over each sub-batch of _SUB inputs, (T, N/_SUB, J)."""
        parts = self._unit_parts(raw)
        return (parts,) + tuple(self._unit_reduce(parts))

    def _unit_reduce_graph(self, parts):
        """XLA-fused: min-max per input and scope over the parts (no concatenation), then one
        pass of normalization and sub-batch maxima."""
        import tensorflow as tf
        lo, hi = [], []
        for s in range(self._n_scopes):
            mem = [p for p, sc in zip(parts, self._scope_of_block) if sc == s]
            lo.append(tf.reduce_min(tf.stack([tf.reduce_min(p, [0, 2]) for p in mem]), 0))
            hi.append(tf.reduce_max(tf.stack([tf.reduce_max(p, [0, 2]) for p in mem]), 0))
        lo, hi = tf.stack(lo, 1), tf.stack(hi, 1)                      # (N, scopes)
        r = hi - lo
        inv = tf.where(r > 0, 1.0 / tf.where(r > 0, r, tf.ones_like(r)), tf.zeros_like(r))
        subs = []
        for p, sc in zip(parts, self._scope_of_block):
            v = (p - lo[None, :, sc, None]) * inv[None, :, sc, None]   # as _minmax_normalize
            subs.append(tf.reduce_max(tf.reshape(v, (p.shape[0], -1, _SUB, p.shape[2])), 2))
        return lo, inv, subs

    def _edge_sources_graph(self, raw):
        """Per block the sources (N, T*K); per input and scope the min and range of all edge
        products (the min over a row of a*w is a*min(w) or a*max(w), so no product is made)."""
        import tensorflow as tf
        srcs, lo, hi = [], [[] for _ in range(self._n_scopes)], [[] for _ in range(self._n_scopes)]
        for b, sc in zip(self.blocks, self._scope_of_block):
            a = self._source(raw, b)                                   # (T, N, K)
            w = self._weight(b)
            wmin, wmax = tf.reduce_min(w, axis=1), tf.reduce_max(w, axis=1)
            p1, p2 = a * wmin, a * wmax
            lo[sc].append(tf.reduce_min(tf.minimum(p1, p2), axis=[0, 2]))
            hi[sc].append(tf.reduce_max(tf.maximum(p1, p2), axis=[0, 2]))
            srcs.append(tf.reshape(tf.transpose(a, [1, 0, 2]), (tf.shape(a)[1], -1)))
        m = tf.stack([tf.reduce_min(tf.stack(l, 1), 1) for l in lo], axis=1)    # (N, scopes)
        M = tf.stack([tf.reduce_max(tf.stack(h, 1), 1) for h in hi], axis=1)
        return tf.concat(srcs, axis=1), m, M - m

    def _edge_values_graph(self, trace, src_idx, w_idx, scope):
        """Normalized values of edges given by source column, weight and scope, (N, E)."""
        import tensorflow as tf
        a_all, m, r = self._edge_sources_graph(trace)
        w_all = tf.concat([tf.reshape(self._weight(b), (-1,)) for b in self.blocks], axis=0)
        vals = tf.gather(a_all, src_idx, axis=1) * tf.gather(w_all, w_idx)
        mm, rr = tf.gather(m, scope, axis=1), tf.gather(r, scope, axis=1)
        return tf.where(rr > 0, (vals - mm) / tf.where(rr > 0, rr, tf.ones_like(rr)),
                        tf.zeros_like(vals))

    def _build(self) -> None:
        import tensorflow as tf
        self._unit_scores = self._compile(self._unit_scores_graph, record=_UNIT_RECORD)
        idx_sig = [tf.TensorSpec((None,), tf.int32)]
        if self.granularity == "unit":
            self._values_fn = self._compile(lambda tr, idx: tf.gather(self._unit_scores_graph(tr),
                                                                      idx, axis=1), idx_sig,
                                            record=_UNIT_RECORD)
            self._unit_reduce = tf.function(self._unit_reduce_graph, jit_compile=True)
            self._unit_chunk = self._compile(self._unit_chunk_graph, record=_UNIT_RECORD)
            return
        self._edge_sources = self._compile(self._edge_sources_graph, record=_EDGE_RECORD)
        # where each block's sources and weights start in the flat source / weight vectors
        self._src_start = np.cumsum([0] + [b.steps * b.k for b in self.blocks])
        self._w_start = np.cumsum([0] + [b.k * b.j for b in self.blocks])
        self._n_sources = int(self._src_start[-1])
        idx_sig = [tf.TensorSpec((None,), tf.int32)] * 3
        self._values_fn = self._compile(self._edge_values_graph, idx_sig, record=_EDGE_RECORD)

    # -- state
    def reset(self) -> None:
        super().reset()
        if self.granularity == "edge":
            self._edge = _EdgeState(self, self._curve_grid())

    def _elements_per_input(self) -> int:
        return self.total if self.granularity == "unit" else 4 * self._n_sources

    def _chunk_size(self) -> int:
        if self.granularity == "edge":
            return super()._chunk_size()
        fit = _UNIT_CHUNK_ELEMENTS // max(1, self.total)       # a power of two in [_SUB, 1024]
        return max(_SUB, 1 << (min(1024, max(1, fit)).bit_length() - 1))

    def _update_chunk(self, x, embedded) -> None:
        if self.granularity == "unit":
            self._update_unit_chunk(x, embedded)
        else:
            a, m, r = (t.numpy() for t in self._edge_sources(x, embedded))
            self._edge.add(a, m, r)
            self._state.n += a.shape[0]

    def _update_unit_chunk(self, x, embedded) -> None:
        """One fused pass per chunk gives every contribution's maximum over sub-batches of _SUB
        inputs; the first input above a grid threshold (for curve()) is then found by reading
        back only the _SUB values of the sub-batch that lifted a newly covered contribution.
        The chunk is padded to a power of two (at most 6 compiled shapes) by repeating its last
        input, which changes no maximum and is never the first above a threshold."""
        import tensorflow as tf
        n = int(x.shape[0])
        npad = max(_SUB, 1 << (n - 1).bit_length())
        if npad > n:
            x = tf.concat([x, tf.repeat(x[-1:], npad - n, axis=0)], axis=0)
        parts, lo, inv, subs = self._unit_chunk(x, embedded)
        lo, inv, subs = lo.numpy(), inv.numpy(), [v.numpy() for v in subs]
        batch_max = np.concatenate([v.max(axis=1).ravel() for v in subs])
        host = [None] * len(parts)    # the parts as NumPy views (no copy), made when needed

        def first_in_batch(t, cols):
            out = np.empty(cols.size, np.int64)
            bounds = np.searchsorted(cols, np.append(self._offsets, self.total))
            for bi, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
                if a == b:
                    continue
                sub, sc = subs[bi], self._scope_of_block[bi]
                ti, j = np.divmod(cols[a:b] - self._offsets[bi], sub.shape[2])
                sb = np.argmax(sub[ti[:, None], np.arange(sub.shape[1]), j[:, None]] > t, axis=1)
                rows = sb[:, None] * _SUB + np.arange(_SUB)                   # (m, _SUB)
                if host[bi] is None:
                    host[bi] = np.asarray(parts[bi])
                v = (host[bi][ti[:, None], rows, j[:, None]] - lo[rows, sc]) * inv[rows, sc]
                above = v > t
                # (the sub-batch maximum is > t; a tie within rounding falls back to the max)
                pick = np.where(above.any(axis=1), above.argmax(axis=1), v.argmax(axis=1))
                out[a:b] = sb * _SUB + pick
            return out
        self._state.add(batch_max, n, first_in_batch)

    def _max_values(self) -> np.ndarray:
        return self._edge.max_values() if self.granularity == "edge" else self._state.max

    def curve(self, threshold=None) -> np.ndarray:
        if self.granularity == "unit":
            return super().curve(threshold)
        t = self._cover_at(threshold)
        return self._edge.curve_counts(t) / max(1, self.total)

    # -- single inputs and generators
    def values(self, x, indices, embedded: bool = False):
        """(N, len(indices)) normalized contribution values; differentiable w.r.t. float x
        (or w.r.t. embedding vectors with embedded=True)."""
        x = self.tracer.check_inputs(x, embedded)
        idx = self._check_indices(indices)
        if self.granularity == "unit":
            return self._values_fn(x, embedded, idx)
        return self._values_fn(x, embedded, *self._edge_lookup(idx.numpy()))

    def _edge_lookup(self, idx: np.ndarray):
        """Flat edge indices -> (source column, weight position, scope), as int32 tensors."""
        import tensorflow as tf
        seg = np.searchsorted(self._offsets, idx, side="right") - 1
        src, w, scope = (np.zeros(len(idx), np.int64) for _ in range(3))
        for bi in np.unique(seg):
            sel = seg == bi
            b = self.blocks[bi]
            t, k, j = np.unravel_index(idx[sel] - self._offsets[bi], (b.steps, b.k, b.j))
            src[sel] = self._src_start[bi] + t * b.k + k
            w[sel] = self._w_start[bi] + k * b.j + j
            scope[sel] = self._scope_of_block[bi]
        return tuple(tf.constant(v, tf.int32) for v in (src, w, scope))

    def profile(self, x, embedded: bool = False) -> np.ndarray:
        """(N, total) normalized values of these inputs; the state is not touched."""
        x = self.tracer.check_inputs(x, embedded)
        if self.granularity == "unit":
            return self._unit_scores(x, embedded).numpy()
        if int(x.shape[0]) * self.total > 2 * 10 ** 8:
            raise InputError(f"an edge profile of {int(x.shape[0])} inputs would hold "
                             f"{int(x.shape[0]) * self.total:,} values; profile fewer inputs")
        a, m, r = (t.numpy() for t in self._edge_sources(x, embedded))
        return np.stack([self._edge.one_input(a[i], m[i], r[i]) for i in range(len(a))])

    def describe(self, index: int) -> dict:
        seg, pos = self._segment_of(index)
        b = self.blocks[self.segments.index(seg)]
        step = None if b.kind == "dense" else int(pos[0])
        j = int(pos[-1])
        spec = self.tracer.spec[b.layer]
        gate = None if b.kind == "dense" else b.gates[j // spec.units]
        unit = j % spec.units if b.kind != "dense" else j
        source = int(pos[1]) if self.granularity == "edge" else None
        return {"layer": b.layer, "kind": b.kind, "step": step, "gate": gate, "part": b.part,
                "unit": int(unit), "source": source, "source_layer": b.source_layer}

    def by_gate_step(self, layer: str, input_index: int | None = None, x=None,
                     threshold=None, embedded: bool = False) -> pd.DataFrame:
        """Share of covered contributions per gate part (rows "f:x", "f:h", ...) and step
        (columns 0..T-1): for the set so far, for the input_index-th input given to update,
        or for inputs x (their union; the state is not touched)."""
        spec = self.tracer.spec.get(layer)
        if spec is None or spec.kind == "dense":
            rec = [s.name for s in self.tracer.specs if s.kind != "dense"]
            raise InputError(f"by_gate_step needs a recurrent layer; choose one of {', '.join(rec)}")
        t = self._cover_at(threshold)
        if input_index is not None or x is not None:
            if x is None:
                x, embedded = self.stored_input(input_index)
            covered = self.profile(x, embedded).max(axis=0) > t
        else:
            covered = self._covered_mask(threshold)
        rows = {}
        for seg in self.segments:
            if seg.layer != layer:
                continue
            block = covered[seg.offset:seg.offset + seg.size].reshape(seg.shape)
            if self.granularity == "edge":
                block = block.transpose(0, 2, 1)          # (T, J, K)
            block = block.reshape(spec.steps, len(seg.gates), spec.units, -1)
            for gi, g in enumerate(seg.gates):
                rows[f"{g}:{seg.part}"] = block[:, gi].reshape(spec.steps, -1).mean(axis=1)
        order = [f"{g}:{p}" for g in spec.gates for p in ("x", "h")]
        return pd.DataFrame([rows[k] for k in order], index=order,
                            columns=list(range(spec.steps)))


class _EdgeState:
    """Edge coverage without materializing N x K x J products (DESIGN.md).

    For one input n the normalized value of edge (source s, weight u) is the line
    u -> sl[n, s] * u + b[n] (sl = a / range, b = -min / range). The running maximum over the
    inputs is the upper envelope of those lines at the source's weights. For u >= 0 only lines
    on the (slope, intercept) Pareto front matter (and for u < 0 the (-slope, intercept) front),
    which for any source holds a handful of lines. We keep the two fronts per source and
    evaluate the envelope at the weights only when a rate is asked (cached until the next
    update). The growth curve at a threshold t keeps, per source, the smallest weight bound
    above which (and the largest below which) some input activated the edges so far.
    """

    def __init__(self, cov: ContributionCoverage, grid: tuple):
        self.cov = cov
        self.blocks = cov.blocks
        self.weights = [cov._weight(b).numpy().astype(np.float32) for b in self.blocks]
        self.n_src = [b.steps * b.k for b in self.blocks]
        self.fronts = [[_Front(n), _Front(n)] for n in self.n_src]    # u >= 0 side, u < 0 side
        self._cache = None
        self.grid = grid
        # growth curve state per threshold and block: bounds L (u > L covered), R (u < R)
        self.bounds = {t: [[np.full(n, np.inf), np.full(n, -np.inf)] for n in self.n_src]
                       for t in grid}
        self.curve = {t: [] for t in grid}
        self.counted = {t: 0 for t in grid}
        self.sorted_rows = [_SortedRows(w) for w in self.weights]

    def _lines(self, a, m, r, bi):
        sc = self.cov._scope_of_block[bi]
        rr = r[:, sc].astype(np.float64)
        ok = rr > 0
        inv = np.where(ok, 1.0 / np.where(ok, rr, 1.0), 0.0)
        sl = (a * inv[:, None]).astype(np.float32)
        b = (-m[:, sc] * inv).astype(np.float32)
        return sl, b

    def _block_sources(self, a):
        out, off = [], 0
        for n in self.n_src:
            out.append(a[:, off:off + n])
            off += n
        return out

    def add(self, a, m, r) -> None:
        self._cache = None
        for bi, ab in enumerate(self._block_sources(a)):
            sl, b = self._lines(ab, m, r, bi)
            self.fronts[bi][0].add(sl, b)
            self.fronts[bi][1].add(-sl, b)
        for t in self.grid:
            self._add_curve(t, a, m, r)

    def max_values(self) -> np.ndarray:
        if self._cache is None:
            parts = []
            for bi, b in enumerate(self.blocks):
                w = self.weights[bi]                                   # (K, J)
                pos = self.fronts[bi][0].envelope(w, b.steps, sign=1.0)
                neg = self.fronts[bi][1].envelope(w, b.steps, sign=-1.0)
                wfull = np.broadcast_to(w, (b.steps,) + w.shape)
                parts.append(np.where(wfull >= 0, pos, neg).ravel())
            self._cache = np.concatenate(parts) if parts else np.zeros(0, np.float32)
        return self._cache

    def one_input(self, a, m, r) -> np.ndarray:
        """All normalized edge values of one input (sources a (S,), m, r per scope)."""
        parts = []
        for bi, ab in enumerate(self._block_sources(a[None])):
            sl, b = self._lines(ab, m[None], r[None], bi)
            w, blk = self.weights[bi], self.blocks[bi]
            v = sl[0].reshape(blk.steps, blk.k, 1) * w[None] + b[0]
            parts.append(v.ravel())
        return np.concatenate(parts)

    def _add_curve(self, t, a, m, r) -> None:
        n_in = a.shape[0]
        delta = np.zeros(n_in, np.int64)
        for bi, ab in enumerate(self._block_sources(a)):
            sc = self.cov._scope_of_block[bi]
            mm, rr = m[:, sc:sc + 1].astype(np.float64), r[:, sc:sc + 1].astype(np.float64)
            need = mm + t * rr                    # activated iff a*u > need (and range > 0)
            a64 = ab.astype(np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                c = need / a64
            live = rr > 0
            L = np.where(live & (a64 > 0), c, np.inf)
            L = np.where(live & (a64 == 0) & (need < 0), -np.inf, L)
            R = np.where(live & (a64 < 0), c, -np.inf)
            del c, a64
            L0, R0 = self.bounds[t][bi]
            # only sources whose bounds this batch moves need the running min / max
            cand = np.flatnonzero((L.min(axis=0) < L0) | (R.max(axis=0) > R0))
            if not cand.size:
                continue
            if cand.size < L.shape[1]:
                L, R = L[:, cand], R[:, cand]
            Lrun = np.vstack([L0[None, cand], L])
            del L
            np.minimum.accumulate(Lrun, axis=0, out=Lrun)
            Rrun = np.vstack([R0[None, cand], R])
            del R
            np.maximum.accumulate(Rrun, axis=0, out=Rrun)
            changed = (Lrun[1:] != Lrun[:-1]) | (Rrun[1:] != Rrun[:-1])
            nn, cc = np.nonzero(changed)
            if nn.size:
                rows = cand[cc] % self.blocks[bi].k
                sr = self.sorted_rows[bi]
                new = sr.count(rows, Lrun[nn + 1, cc], Rrun[nn + 1, cc])
                old = sr.count(rows, Lrun[nn, cc], Rrun[nn, cc])
                np.add.at(delta, nn, new - old)
            L0[cand], R0[cand] = Lrun[-1], Rrun[-1]
        counts = self.counted[t] + np.cumsum(delta)
        self.counted[t] = int(counts[-1]) if n_in else self.counted[t]
        self.curve[t].append(counts)

    def curve_counts(self, t) -> np.ndarray:
        if t not in self.curve:
            raise InputError(f"the edge growth curve is kept at thresholds "
                             f"{', '.join(map(str, self.grid))}; make the criterion with "
                             f"curve_thresholds including {t}")
        return np.concatenate(self.curve[t]) if self.curve[t] else np.zeros(0, np.int64)


class _Front:
    """Per source, the Pareto front of lines (slope, intercept): the lines that can be the
    largest at some weight of one sign. Padded arrays (S, R); padding has intercept -inf."""

    def __init__(self, n_sources: int):
        self.s = np.zeros((n_sources, 0), np.float32)
        self.b = np.zeros((n_sources, 0), np.float32)

    def add(self, sl: np.ndarray, b: np.ndarray) -> None:
        """sl (B, S) slopes of B new inputs (already signed), b (B,) their intercepts."""
        order = np.argsort(-b, kind="stable")
        ss = sl[order]
        cm = np.maximum.accumulate(ss, axis=0)
        rec = np.ones_like(cm, bool)
        rec[1:] = cm[1:] > cm[:-1]
        new_s, new_b = _compact(rec.T, ss.T, np.broadcast_to(b[order][None], ss.T.shape),
                                fills=[0.0, -np.inf])
        s = np.concatenate([self.s, new_s], axis=1)
        bb = np.concatenate([self.b, new_b], axis=1)
        o = np.argsort(-bb, axis=1, kind="stable")
        s, bb = np.take_along_axis(s, o, 1), np.take_along_axis(bb, o, 1)
        cm = np.maximum.accumulate(np.where(np.isfinite(bb), s, -np.inf), axis=1)
        keep = np.isfinite(bb)
        keep[:, 1:] &= cm[:, 1:] > cm[:, :-1]
        self.s, self.b = _compact(keep, s, bb, fills=[0.0, -np.inf])

    def envelope(self, w: np.ndarray, steps: int, sign: float) -> np.ndarray:
        """max over the front's lines at the weights, (steps, K, J); source s = t*K + k."""
        k, j = w.shape
        n_src = steps * k
        if self.s.shape[1] == 0:
            return np.full((steps, k, j), -np.inf, np.float32)
        counts = np.isfinite(self.b).sum(axis=1)
        perm = np.argsort(-counts, kind="stable")           # longest fronts first
        wp = w[perm % k]                                      # (S, J) the sources' weight rows
        sp, bp = self.s[perm] * sign, self.b[perm]
        active = [int((counts > r).sum()) for r in range(self.s.shape[1])]
        out = np.full((n_src, j), -np.inf, np.float32)
        for r, n in enumerate(active):
            np.maximum(out[:n], sp[:n, r:r + 1] * wp[:n] + bp[:n, r:r + 1], out=out[:n])
        res = np.empty_like(out)
        res[perm] = out
        return res.reshape(steps, k, j)


def _compact(mask: np.ndarray, *arrays, fills=None):
    """Rows of each array keeping only the masked entries, left-aligned; padding from fills."""
    counts = mask.sum(axis=1)
    width = int(counts.max()) if counts.size else 0
    rows, cols = np.nonzero(mask)
    starts = np.cumsum(counts) - counts
    rank = np.arange(len(rows)) - starts[rows]
    out = []
    for vals, fill in zip(arrays, fills or [0.0] * len(arrays)):
        o = np.full((mask.shape[0], width), fill, np.float32)
        o[rows, rank] = vals[rows, cols]
        out.append(o)
    return out


class _SortedRows:
    """Count, per row of a weight matrix, the weights above L plus those below R."""

    def __init__(self, w: np.ndarray):
        w = w.astype(np.float64)
        self.k, self.j = w.shape
        self.lo, self.hi = float(w.min()) - 1.0, float(w.max()) + 1.0
        self.span = self.hi - self.lo + 1.0
        self.keys = (np.sort(w, axis=1) - self.lo + np.arange(self.k)[:, None] * self.span).ravel()

    def count(self, rows, L, R) -> np.ndarray:
        base = rows * self.span - self.lo
        ql = np.clip(L, self.lo, self.hi) + base
        qr = np.clip(R, self.lo, self.hi) + base
        gt = (rows + 1) * self.j - np.searchsorted(self.keys, ql, side="right")
        lt = np.searchsorted(self.keys, qr, side="left") - rows * self.j
        return np.where(R > L, self.j, gt + lt)


# ---------------------------------------------------------------- neuron coverage

class NeuronCoverage(Criterion):
    """DeepXplore's NC: a neuron (one element of a layer's output, per step where the layer
    returns sequences) is covered when its output, min-max scaled over its layer for that
    input, exceeds the threshold for some input."""

    name = "nc"
    _params = {"threshold": (0.25, _Interval(0.0, 1.0)),
               "include_input": (False, _Bool()),
               "curve_thresholds": (None, _Thresholds())}

    def _layout(self) -> list[Segment]:
        segs, off = [], 0
        tr = self.tracer
        if self.include_input:
            segs.append(Segment("input", "input", "input", (), "input", 0, tr.embedded_shape))
            off = segs[0].size
        for spec in tr.specs:
            if spec.kind == "dense":
                shape = (spec.units,)
            else:
                shape = (spec.steps, spec.units) if spec.return_sequences else (spec.units,)
            segs.append(Segment(spec.name, spec.kind, "out", (), spec.name, off, shape))
            off += int(np.prod(shape))
        return segs

    def _curve_grid(self) -> tuple:
        return _grid(self.threshold, self.curve_thresholds)

    def _scores_graph(self, trace):
        import tensorflow as tf
        n = tf.shape(trace.inputs)[0]
        parts = []
        if self.include_input:
            parts.append(_minmax_normalize(tf.reshape(trace.inputs, (n, -1))))
        for spec in self.tracer.specs:
            out = trace.layers[spec.name].output
            parts.append(_minmax_normalize(tf.reshape(out, (n, -1))))
        return tf.concat(parts, axis=1)

    def _build(self) -> None:
        import tensorflow as tf
        self._scores = self._compile(self._scores_graph)
        self._values_fn = self._compile(lambda tr, idx: tf.gather(self._scores_graph(tr), idx, axis=1),
                                        [tf.TensorSpec((None,), tf.int32)])

    def values(self, x, indices, embedded: bool = False):
        """(N, len(indices)) scaled neuron outputs, differentiable w.r.t. float x."""
        x = self.tracer.check_inputs(x, embedded)
        return self._values_fn(x, embedded, self._check_indices(indices))

    def profile(self, x, embedded: bool = False) -> np.ndarray:
        return self._scores(self.tracer.check_inputs(x, embedded), embedded).numpy()

    def describe(self, index: int) -> dict:
        seg, pos = self._segment_of(index)
        step = int(pos[0]) if len(seg.shape) == 2 else None
        return {"layer": seg.layer, "kind": seg.kind, "step": step, "gate": None,
                "part": seg.part, "unit": int(pos[-1]), "source": None}


# ---------------------------------------------------------------- RNN-Test's criteria

class HiddenStateCoverage(Criterion):
    """RNN-Test's HS_C: for every input, step and recurrent layer, the units among the top k of
    that hidden vector are covered (k = max(1, units // 100) unless given)."""

    name = "hsc"
    uses_threshold = False
    _params = {"k": (None, _PositiveIntOrNone())}

    def _layout(self) -> list[Segment]:
        segs, off = [], 0
        self._k = {}
        for spec in self.tracer.specs:
            if spec.kind == "dense":
                continue
            self._k[spec.name] = min(spec.units, self.k or max(1, spec.units // 100))
            segs.append(Segment(spec.name, spec.kind, "out", (), spec.name, off,
                                (spec.steps, spec.units)))
            off += spec.steps * spec.units
        if not segs:
            raise UnsupportedModelError("HiddenStateCoverage needs a recurrent layer; the model "
                                        "has only Dense layers")
        return segs

    def _scores_graph(self, trace):
        import tensorflow as tf
        parts = []
        for seg in self.segments:
            h = trace.layers[seg.layer].h                       # (N, T, u)
            kth = tf.math.top_k(h, k=self._k[seg.layer]).values[..., -1:]
            parts.append(tf.reshape(tf.cast(h >= kth, tf.float32), (tf.shape(h)[0], -1)))
        return tf.concat(parts, axis=1)

    def _hidden_graph(self, trace, idx):
        import tensorflow as tf
        flat = tf.concat([tf.reshape(trace.layers[s.layer].h, (tf.shape(trace.inputs)[0], -1))
                          for s in self.segments], axis=1)
        return tf.gather(flat, idx, axis=1)

    def _build(self) -> None:
        import tensorflow as tf
        self._scores = self._compile(self._scores_graph)
        self._values_fn = self._compile(self._hidden_graph, [tf.TensorSpec((None,), tf.int32)])

    def values(self, x, indices, embedded: bool = False):
        """(N, len(indices)) hidden-state values h of those (layer, step, unit) items;
        differentiable (RNN-Test raises them to make them top-k)."""
        x = self.tracer.check_inputs(x, embedded)
        return self._values_fn(x, embedded, self._check_indices(indices))

    def profile(self, x, embedded: bool = False) -> np.ndarray:
        return self._scores(self.tracer.check_inputs(x, embedded), embedded).numpy()

    def describe(self, index: int) -> dict:
        seg, (t, u) = self._segment_of(index)
        return {"layer": seg.layer, "kind": seg.kind, "step": int(t), "gate": None,
                "part": "h", "unit": int(u), "source": None}


CELL_BOUNDARIES = (-0.8, -0.2, 0.2, 0.8)


class CellStateCoverage(Criterion):
    """RNN-Test's CS_C: tanh(c) of every LSTM cell (layer, step, unit) falls in one of five
    sections cut at CELL_BOUNDARIES; an item is one (cell, section) pair, covered when some
    input put the cell there. ``sections()`` gives each section's share (the two outer
    sections are the boundary coverage)."""

    name = "csc"
    uses_threshold = False
    _params = {}

    def _layout(self) -> list[Segment]:
        segs, off = [], 0
        for spec in self.tracer.specs:
            if spec.kind == "lstm":
                shape = (spec.steps, spec.units, len(CELL_BOUNDARIES) + 1)
                segs.append(Segment(spec.name, spec.kind, "c", (), spec.name, off, shape))
                off += int(np.prod(shape))
        if not segs:
            kinds = sorted({s.kind for s in self.tracer.specs})
            raise UnsupportedModelError(f"CellStateCoverage needs LSTM layers (it reads the "
                                        f"cell state c); this model has {', '.join(kinds)}. "
                                        f"Use hsc, nc or rconc for it.")
        return segs

    def _scores_graph(self, trace):
        import tensorflow as tf
        parts = []
        for seg in self.segments:
            tc = tf.tanh(trace.layers[seg.layer].c)
            sec = tf.raw_ops.Bucketize(input=tc, boundaries=list(CELL_BOUNDARIES))
            hot = tf.one_hot(sec, len(CELL_BOUNDARIES) + 1, dtype=tf.float32)
            parts.append(tf.reshape(hot, (tf.shape(tc)[0], -1)))
        return tf.concat(parts, axis=1)

    def _build(self) -> None:
        self._scores = self._compile(self._scores_graph)

    def profile(self, x, embedded: bool = False) -> np.ndarray:
        return self._scores(self.tracer.check_inputs(x, embedded), embedded).numpy()

    def sections(self) -> pd.DataFrame:
        """Per section of tanh(c): the share of cells some input put there."""
        mask = self._covered_mask()
        labels = ["< -0.8", "[-0.8, -0.2)", "[-0.2, 0.2)", "[0.2, 0.8)", ">= 0.8"]
        per = np.zeros(len(labels))
        cells = 0
        for seg in self.segments:
            m = mask[seg.offset:seg.offset + seg.size].reshape(-1, len(labels))
            per += m.sum(axis=0)
            cells += m.shape[0]
        return pd.DataFrame({"section": labels, "covered": per.astype(int), "cells": cells,
                             "rate": per / max(1, cells),
                             "boundary": [True, False, False, False, True]})

    def describe(self, index: int) -> dict:
        seg, (t, u, s) = self._segment_of(index)
        return {"layer": seg.layer, "kind": seg.kind, "step": int(t), "gate": None,
                "part": "c", "unit": int(u), "source": None, "section": int(s)}


# ---------------------------------------------------------------- registry and §5.2

CRITERIA: dict[str, type[Criterion]] = {c.name: c for c in
                                        (ContributionCoverage, NeuronCoverage,
                                         HiddenStateCoverage, CellStateCoverage)}


def get_criterion(name: str, model, **params) -> Criterion:
    """A criterion by short name: rconc, nc, hsc, csc."""
    if name not in CRITERIA:
        raise InputError(f"unknown criterion {name!r}; choose one of {', '.join(CRITERIA)}")
    return CRITERIA[name](model, **params)


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
    cands = [_Interval(0, 1).check("candidate threshold", c) for c in candidates]
    labels = np.unique(y)
    if len(labels) < 2:
        raise InputError("threshold selection compares labels: y holds only one label")
    tracer = Tracer(model)
    table = pd.DataFrame({"threshold": cands})
    for label in labels:
        cov = ContributionCoverage(tracer, threshold=cands[0], **params)
        cov.update(np.asarray(x)[y == label], embedded=embedded)
        table[f"label_{label}"] = [cov.rate(c) for c in cands]
    rates = table[[f"label_{label}" for label in labels]]
    table["max_difference"] = rates.max(axis=1) - rates.min(axis=1)
    best = float(table.loc[table["max_difference"].idxmax(), "threshold"])
    return best, table
