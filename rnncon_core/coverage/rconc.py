"""Contribution coverage (RConC)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import InputError, UnsupportedModelError
from ..lazy import tf
from .base import Criterion, Segment
from .edge import EdgeState
from .engine import Engine, chunk_elements
from .params import CURVE_THRESHOLDS, OneOf, Param, Params, threshold
from .targets import Targets

_UNIT_CHUNK_ELEMENTS = 2 ** 26     # unit RConC keeps only the trace's own parts (no copies)
_SUB = 32                          # unit RConC: maxima kept per sub-batch of this many inputs
_UNIT_RECORD = ("xU", "hW")        # what unit RConC reads from the trace
_EDGE_RECORD = ("h_prev", "hsrc")  # what edge RConC reads


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


def _inverse_range(r, soft: bool = False):
    """1/range, 0 where the range is 0 (all values of such a scope normalize to 0); ``soft``:
    1/max(range, 1e-6), the same values with a gradient where a scope is flat."""
    if soft:
        return 1.0 / tf.maximum(r, 1e-6)
    return tf.where(r > 0, 1.0 / tf.where(r > 0, r, tf.ones_like(r)), tf.zeros_like(r))


def _sub_maxima(v, mask=None):
    """v (T, N, J), one scope per (t, n): per (t, n) the min and 1/range (0 where masked),
    and per (t, sub-batch of _SUB inputs, j) the largest normalized value, (T, N/_SUB, J)."""
    lo = tf.reduce_min(v, axis=2)
    inv = _inverse_range(tf.reduce_max(v, axis=2) - lo)
    if mask is not None:
        inv = tf.where(mask, inv, tf.zeros_like(inv))
    return lo, inv, _sub_max((v - lo[:, :, None]) * inv[:, :, None])


def _flat(v):
    """(..., N, T, K) -> (..., N, T*K)."""
    return tf.reshape(v, tf.concat([tf.shape(v)[:-2], [-1]], 0))


def _batch_major_flat(a):
    """(T, N, K) -> (N, T*K)."""
    return _flat(tf.transpose(a, [1, 0, 2]))


def _sub_max(normed):
    """(T, N, J) normalized values -> their maxima over sub-batches of _SUB inputs, at most 1
    (x * (1/x) can round to 1 + 2^-23)."""
    shape = (normed.shape[0], -1, _SUB, normed.shape[2])
    return tf.minimum(tf.reduce_max(tf.reshape(normed, shape), 2), 1.0)


class _StepReduce:
    """normalize="step", inside the trace's step loop: a recurrent layer's x^t·U and
    h^(t-1)·W at step t (one scope each) reduced while they are in cache to per-input min and
    1/range and per-sub-batch maxima of the normalized values (see _sub_maxima)."""
    keys = ("rc_lo_x", "rc_inv_x", "rc_sub_x", "rc_lo_h", "rc_inv_h", "rc_sub_h")

    def __init__(self, absolute: bool):
        self.absolute = absolute

    def __call__(self, spec, xu, hw, mask):
        out = {}
        for part, v in (("x", xu), ("h", hw)):
            v = tf.abs(v) if self.absolute else v
            lo, inv, sub = _sub_maxima(v[None], None if mask is None else mask[None])
            out.update({f"rc_lo_{part}": lo[0], f"rc_inv_{part}": inv[0],
                        f"rc_sub_{part}": sub[0]})
        return out


class _ContributionEngine(Engine):
    """RConC's update: unit granularity reduces each chunk in one fused pass (the first input
    above a threshold is found from sub-batch maxima: ``_absorb_unit_chunk``); edge
    granularity keeps an envelope state (``EdgeState``), not per-item arrays (13 bytes per
    edge per curve threshold: 1.3 GB for stacked-imdb-lstm)."""

    def new_state(self):
        crit = self.crit
        if crit.granularity == "edge":
            return EdgeState(crit, crit._curve_grid())
        return super().new_state()

    def elements_per_input(self) -> int:
        crit = self.crit
        return crit.total if crit.granularity == "unit" else 4 * crit._n_sources

    def chunk_size(self) -> int:
        crit = self.crit
        if crit.granularity == "edge":
            return super().chunk_size()
        fit = chunk_elements(_UNIT_CHUNK_ELEMENTS) // max(1, crit.total)  # 2^k in [_SUB, 1024]
        return max(_SUB, 1 << (min(1024, max(1, fit)).bit_length() - 1))

    def graph_chunk(self, x, embedded, with_outputs: bool = False):
        crit = self.crit
        n = int(x.shape[0])
        if crit.granularity == "edge":
            got = crit._edge_chunk(x, embedded, tf.constant(crit._edge.grid, tf.float32),
                                   with_outputs=with_outputs)
            out, outs = got if with_outputs else (got, None)
            return (n, tf.nest.map_structure(lambda t: t.numpy(), out)), outs
        # unit: padded to a power of two (at most 6 compiled shapes) by repeating the last
        # input, which changes no maximum and is never the first above a threshold
        npad = max(_SUB, 1 << (n - 1).bit_length())
        if npad > n:           # in NumPy: the eager tf.repeat/concat cost ~0.7 ms a call
            x = np.asarray(x)
            x = np.concatenate([x, np.repeat(x[-1:], npad - n, axis=0)])
        got = crit._unit_chunk(x, embedded, with_outputs=with_outputs)
        (parts, lo, inv, subs), outs = got if with_outputs else (got, None)
        return (n, (parts, lo.numpy(), inv.numpy(), [v.numpy() for v in subs])), outs

    def absorb(self, crit, out) -> None:
        n, arrays = out
        if crit.granularity == "edge":
            crit._state.add(*arrays)
        else:
            crit._absorb_unit_chunk(n, *arrays)


class _ContributionTargets(Targets):
    """RConC's item values: unit granularity in graphs (with an objective that keeps a
    gradient, and per-row items); edge granularity through an index lookup in NumPy."""

    @property
    def graph_safe(self) -> bool:
        return self.crit.granularity == "unit"     # the edge index lookup runs in NumPy

    def graph_objective(self, x, indices, embedded: bool = False):
        """What coverage-guided generation ascends: the items' normalized values, with a
        gradient also where a scope is flat (all its contributions equal, e.g. a blank image
        column, where the exact values have none) and where a contribution is 0 under
        values="abs". Unit granularity; edge falls back to graph_values."""
        crit = self.crit
        if crit.granularity != "unit":
            return self.graph_values(x, indices, embedded)
        if tf.executing_eagerly():
            x = crit.tracer.check_inputs(x, embedded)
        return crit._objective_fn(x, embedded, tf.cast(indices, tf.int32))

    def row_values(self, x, union, pos, objective: bool = False, embedded: bool = False):
        """... (unit granularity: only the rows' own items, ``_unit_rows_graph``)."""
        crit = self.crit
        if crit.granularity != "unit":
            return super().row_values(x, union, pos, objective, embedded)
        if tf.executing_eagerly():
            x = crit.tracer.check_inputs(x, embedded)
            union = self.check_indices(union)
        return crit._rows_fns[bool(objective)](x, embedded, tf.cast(union, tf.int32),
                                               tf.cast(pos, tf.int32))

    def dead_items(self) -> np.ndarray:
        """Flat indices of contributions no input can activate: the recurrent part at a
        layer's first step (h^(-1) = 0). They count in the total (the paper's convention)
        but are no target for generation."""
        crit = self.crit
        out = []
        for seg, b in zip(crit.segments, crit.blocks):
            if b.part == "h" and b.kind != "dense":
                first = int(np.prod(seg.shape[1:]))          # one step's items
                out.append(seg.offset + np.arange(first))
        return np.concatenate(out) if out else np.zeros(0, np.int64)

    def item_values(self, x, indices, embedded: bool = False):
        """(N, len(indices)) normalized contribution values; differentiable w.r.t. float x
        (or w.r.t. embedding vectors with embedded=True)."""
        crit = self.crit
        x = crit.tracer.check_inputs(x, embedded)
        idx = self.check_indices(indices)
        if crit.granularity == "unit":
            return crit._values_fn(x, embedded, idx)
        return crit._values_fn(x, embedded, *crit._edge_lookup(idx.numpy()))


class ContributionCoverage(Criterion):
    """RConC: a contribution is a source neuron's output times a weight it emits (no biases).

    granularity "unit": one per (step, gate unit, part x|h), the sum over sources (Table 1's
    count); "edge": one per (step, source, gate unit) product (Definition 1).

    Each input's contributions are min-max normalized (Eq. 3) within a scope, then compared
    with the threshold. normalize "step" (default): one scope per matmul, i.e. per (layer, step,
    part): x^t·U (all gates) and h^(t-1)·W (all gates) of a recurrent layer at step t, and each
    Dense layer; "layer": one per layer; "model": all of the input's contributions (Eq. 3 as
    written). values "abs" (default): the magnitudes |contribution| are normalized; "signed":
    the signed values. ``normalize="model", values="signed"`` is Eq. 3 taken literally.
    """

    name = "rconc"
    threshold_from_data = True
    engine_class, targets_class = _ContributionEngine, _ContributionTargets
    params = Params(
        threshold(0.25),
        Param("granularity", "unit", OneOf(("unit", "edge")),
              "unit: one contribution per (step, gate unit, x|h), the paper's count; edge: one "
              "per (step, source, gate unit) product (Definition 1)."),
        Param("normalize", "step", OneOf(("step", "layer", "model")),
              "The min-max scope per input: step (each matmul x^t·U, h^(t-1)·W, Dense), layer, "
              "or model (Eq. 3 as written).", level="more"),
        Param("values", "abs", OneOf(("abs", "signed")),
              "Normalize |contributions| (abs) or signed values (signed + model: Eq. 3 as "
              "written).", level="more"),
        CURVE_THRESHOLDS)

    def _layout(self) -> list[Segment]:
        blocks: list[_Block] = []
        prev = "input"
        for spec in self.tracer.specs:
            if spec.kind == "dense":        # on a sequence: one contribution set per step
                blocks.append(_Block(spec.name, "dense", "x", (), "x", prev,
                                     slice(0, spec.units), spec.steps or 1, spec.in_dim,
                                     spec.units))
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
        if self.granularity == "edge" and any(s.masked for s in self.tracer.specs):
            raise UnsupportedModelError("edge granularity does not handle masked steps "
                                        "(Masking, mask_zero) yet; use granularity='unit'")
        self.blocks = blocks
        segs, off = [], 0
        for b in blocks:
            shape = (b.steps, b.j) if self.granularity == "unit" else (b.steps, b.k, b.j)
            segs.append(Segment(b.layer, b.kind, b.part, b.gates, b.source_layer, off, shape))
            off += int(np.prod(shape))
        self._scope_cols = self._scopes(blocks)
        self._n_scopes = int(max(c.max() for c in self._scope_cols)) + 1
        # blocks that share their scopes (in the order the scopes are numbered): for "step" the
        # blocks of one (layer, part), step by step; else a layer's blocks, or all of them
        groups: dict = {}
        for bi, cols in enumerate(self._scope_cols):
            key = tuple(cols) if self.normalize == "step" else int(cols[0])
            groups.setdefault(key, []).append(bi)
        self._scope_groups = list(groups.values())
        return segs

    def _scopes(self, blocks) -> list[np.ndarray]:
        """Per block, the normalization scope of each of its steps (an index into the (N, S)
        per-input min and range). A scope is a set of (block, step) pairs normalized together."""
        keys: dict = {}
        out = []
        for b in blocks:
            if self.normalize == "model":
                ks = [0] * b.steps
            elif self.normalize == "layer":
                ks = [b.layer] * b.steps
            else:       # one matmul: (layer, part, step); GRU reset_after=False's two h blocks share
                ks = [(b.layer, b.part, t) for t in range(b.steps)]
            out.append(np.array([keys.setdefault(k, len(keys)) for k in ks], np.int64))
        return out

    def _curve_grid(self) -> tuple:
        """The growth curve is kept where it is asked for: at the threshold and at
        curve_thresholds (each one costs a search for first inputs on every update)."""
        return tuple(sorted(set(self.curve_thresholds or ()) | {self.threshold}))

    # -- TF parts
    def _weight(self, b: _Block):
        """The block's weights as the contributions use them: |w| when values="abs"
        (|a·w| = |a|·|w|, so edge values stay lines in the weight)."""
        w = self.tracer._weights[b.layer]
        mat = (w["kernel"] if b.part == "x" else w["recurrent_kernel"])[:, b.col]
        return tf.abs(mat) if self.values == "abs" else mat

    def _source(self, raw, b: _Block):
        """The block's sources, time-major (T, N, K) (dense: (1, N, K)); |a| for "abs"."""
        r = raw[b.layer]
        if b.kind == "dense":
            a = r["x"] if self.tracer.spec[b.layer].steps else r["x"][None]
        else:
            a = r["hsrc"] if b.source == "h_src:h" else r[b.source]
        return tf.abs(a) if self.values == "abs" else a

    def _unit_parts(self, raw, surrogate: bool = False):
        """Per block its unit contributions, time-major (T, N, J) (dense: (1, N, J)):
        x^t·U or h^(t-1)·W, |...| for values="abs". ``surrogate``: |v| as v·sign(v) with the
        sign held constant and sign(0) = +1, so a zero contribution still has a gradient (the
        generators' objective; the values are the same)."""

        def magnitude(v):
            if not surrogate:
                return tf.abs(v)
            return v * tf.stop_gradient(tf.where(v >= 0, 1.0, -1.0))
        parts = []
        for b in self.blocks:
            r = raw[b.layer]
            if b.kind == "dense":
                v = r["pre"] if self.tracer.spec[b.layer].steps else r["pre"][None]
            else:
                v = r["xU"] if b.part == "x" else r["hW"]
                v = v if b.col.stop - b.col.start == v.shape[-1] else v[:, :, b.col]
            parts.append(magnitude(v) if self.values == "abs" else v)
        masks = [raw[b.layer].get("mask") for b in self.blocks]
        return parts if all(m is None for m in masks) else self._masked(parts, masks)

    def _masked(self, parts, masks):
        """Masked steps (Masking, mask_zero) are not counted: their contributions take the
        minimum of their scope's unmasked ones (0 where the whole scope is masked), so they
        normalize to 0, are never activated and leave every other value as it was."""
        big = tf.constant(3e38, parts[0].dtype)
        lo = [tf.reduce_min(p, 2) if m is None else tf.where(m, tf.reduce_min(p, 2), big)
              for p, m in zip(parts, masks)]
        ids = tf.constant(np.concatenate(self._scope_cols), tf.int32)
        scope_lo = tf.math.unsorted_segment_min(tf.concat(lo, 0), ids, self._n_scopes)  # (S, N)
        out = []
        for p, m, cols in zip(parts, masks, self._scope_cols):
            if m is None:
                out.append(p)
                continue
            fill = tf.gather(scope_lo, tf.constant(cols, tf.int32))                     # (T, N)
            fill = tf.where(fill < big, fill, tf.zeros_like(fill))
            out.append(tf.where(m[:, :, None], p, fill[:, :, None]))
        return out

    def _group_min_max(self, block_lo, block_hi):
        """Per block its (T, N) minima and maxima -> per scope group its min and max, (T, N)
        for "step" (one scope per step) else (1, N)."""
        per_step = self.normalize == "step"
        out = []
        for group in self._scope_groups:
            if per_step:
                lo, hi = block_lo[group[0]], block_hi[group[0]]
                for b in group[1:]:
                    lo, hi = tf.minimum(lo, block_lo[b]), tf.maximum(hi, block_hi[b])
            else:
                lo = tf.reduce_min(tf.stack([tf.reduce_min(block_lo[b], 0) for b in group]), 0)
                hi = tf.reduce_max(tf.stack([tf.reduce_max(block_hi[b], 0) for b in group]), 0)
                lo, hi = lo[None], hi[None]
            out.append((lo, hi))
        return out

    def _scope_min_range(self, block_lo, block_hi):
        """Per block its (T, N) minima and maxima -> per input and scope the min and the range,
        (N, S) each (scope columns as numbered by _scopes)."""
        groups = self._group_min_max(block_lo, block_hi)
        lo = tf.transpose(tf.concat([g[0] for g in groups], 0))
        hi = tf.transpose(tf.concat([g[1] for g in groups], 0))
        return lo, hi - lo

    def _unit_normalized(self, parts, soft: bool = False):
        """(per input and scope min, 1/range, (N, S) each, and per block the normalized parts
        (T, N, J)); 1/range is 0 where the range is 0, so all values of such a scope become 0.
        ``soft``: 1/max(range, 1e-6) instead, for the generators' objective: the values are the
        same, but a scope whose values are all equal (a blank image column) keeps a gradient."""
        groups = self._group_min_max([tf.reduce_min(p, 2) for p in parts],
                                     [tf.reduce_max(p, 2) for p in parts])
        out = [None] * len(parts)
        los, invs = [], []
        for group, (lo, hi) in zip(self._scope_groups, groups):
            inv = _inverse_range(hi - lo, soft)
            for b in group:
                out[b] = (parts[b] - lo[:, :, None]) * inv[:, :, None]
            los.append(lo)
            invs.append(inv)
        return tf.transpose(tf.concat(los, 0)), tf.transpose(tf.concat(invs, 0)), out

    def _scores_graph(self, raw):
        return self._unit_scores_graph(raw)

    def _unit_scores_graph(self, raw, objective: bool = False):
        """(N, total) normalized unit contributions (for values() and profile()); with
        ``objective`` the same values with gradients everywhere (see graph_objective)."""
        _, _, normed = self._unit_normalized(self._unit_parts(raw, surrogate=objective),
                                             soft=objective)
        n = tf.shape(normed[0])[1]
        return tf.concat([tf.reshape(tf.transpose(v, [1, 0, 2]), (n, -1)) for v in normed], 1)

    def _unit_rows_graph(self, raw, items, objective: bool = False):
        """(N, k) the normalized values of each input's own items (N, k), as
        ``_unit_scores_graph`` gives them (the same float ops), from each scope's min and
        1/range and a gather of the items' parts instead of the (N, total) matrix: its
        transposes and their gradients cost a third of a generator's gradient step."""
        parts = self._unit_parts(raw, surrogate=objective)
        groups = self._group_min_max([tf.reduce_min(p, 2) for p in parts],
                                     [tf.reduce_max(p, 2) for p in parts])
        rows = tf.broadcast_to(tf.range(tf.shape(items)[0])[:, None], tf.shape(items))
        out = tf.zeros(tf.shape(items), parts[0].dtype)
        for group, (lo, hi) in zip(self._scope_groups, groups):
            inv = _inverse_range(hi - lo, objective)
            for b in group:
                steps, j = self.segments[b].shape
                rel = items - self.segments[b].offset
                mine = (rel >= 0) & (rel < steps * j)
                t, col = tf.where(mine, rel // j, 0), tf.where(mine, rel % j, 0)
                at = tf.stack([t if self.normalize == "step" else tf.zeros_like(t), rows], -1)
                v = tf.gather_nd(parts[b], tf.stack([t, rows, col], -1))
                out = tf.where(mine, (v - tf.gather_nd(lo, at)) * tf.gather_nd(inv, at), out)
        return out

    def _unit_chunk_graph(self, raw):
        """The update's graph: the parts, per input and scope min and 1/range, (N, S) each,
        and per block the maxima of the normalized values over each sub-batch of _SUB inputs,
        (T, N/_SUB, J). Plain TF ops, not XLA: on CPU they run on every core."""
        parts = self._unit_parts(raw)
        lo, inv, normed = self._unit_normalized(parts)
        return parts, lo, inv, [_sub_max(v) for v in normed]

    def _unit_step_chunk_graph(self, raw):
        """_unit_chunk_graph for normalize="step" from the reductions _StepReduce made inside
        the step loop (Dense blocks are reduced here). The parts come back as the trace wrote
        them: signed, unmasked (the host takes |.| of the few it reads; masked steps have
        1/range 0)."""
        parts, subs = [None] * len(self.blocks), [None] * len(self.blocks)
        los, invs = [], []
        for group in self._scope_groups:          # in the order the scopes are numbered
            b = self.blocks[group[0]]
            r = raw[b.layer]
            if b.kind == "dense":
                v = r["pre"] if self.tracer.spec[b.layer].steps else r["pre"][None]
                mask = r.get("mask")
                lo, inv, sub = _sub_maxima(tf.abs(v) if self.values == "abs" else v, mask)
                whole = v
            else:
                lo, inv, sub = (r[f"rc_{k}_{b.part}"] for k in ("lo", "inv", "sub"))
                whole = r["xU"] if b.part == "x" else r["hW"]
            for bi in group:
                col = self.blocks[bi].col
                full = col.stop - col.start == whole.shape[-1]
                parts[bi] = whole if full else whole[:, :, col]
                subs[bi] = sub if full else sub[:, :, col]
            los.append(lo)
            invs.append(inv)
        return parts, tf.transpose(tf.concat(los, 0)), tf.transpose(tf.concat(invs, 0)), subs

    def _edge_parts(self, raw):
        """Per block the sources, time-major (T, N, K); per input and scope the min and range of
        all edge products, (N, S) each (the min over a row of a*w is a*min(w) or a*max(w), so
        no product is made; for values="abs" a, w >= 0: a*min(w) and a*max(w))."""
        srcs, lo, hi = [], [], []
        for b in self.blocks:
            a = self._source(raw, b)                                   # (T, N, K)
            w = self._weight(b)
            p1, p2 = a * tf.reduce_min(w, axis=1), a * tf.reduce_max(w, axis=1)
            if self.values != "abs":
                p1, p2 = tf.minimum(p1, p2), tf.maximum(p1, p2)
            lo.append(tf.reduce_min(p1, axis=2))                       # (T, N)
            hi.append(tf.reduce_max(p2, axis=2))
            srcs.append(a)
        m, r = self._scope_min_range(lo, hi)
        return srcs, m, r

    def _edge_sources_graph(self, raw):
        """_edge_parts with the sources batch-major side by side, (N, sum of T*K)."""
        srcs, m, r = self._edge_parts(raw)
        return tf.concat([_batch_major_flat(a) for a in srcs], axis=1), m, r

    def _edge_chunk_graph(self, raw, grid):
        """The update's graph (see EdgeState): an edge's normalized value for one input is the
        line slope * weight + intercept. Per block the slopes a/range of its sources, (N, T*K);
        per input and scope the intercept -min/range, (N, S); per block and grid threshold t the
        bounds of each source: its weights above L (below R, values="signed" only) are
        activated, (G, N, T*K) each."""
        srcs, m, r = self._edge_parts(raw)
        inv = _inverse_range(r)
        need = m[None] + grid[:, None, None] * r[None]                # a*w > need: activated
        signed = self.values != "abs"             # "abs": a, need >= 0, nothing from below
        slopes, lows, highs = [], [], []
        for a, cols in zip(srcs, self._scope_cols):
            idx = tf.constant(cols, tf.int32)
            a = tf.transpose(a, [1, 0, 2])                                   # (N, T, K)
            live = tf.gather(r, idx, axis=1)[None, :, :, None] > 0
            slopes.append(_flat(a * tf.gather(inv, idx, axis=1)[:, :, None]))
            c = tf.gather(need, idx, axis=2)[..., None] / a[None]           # (G, N, T, K)
            inf = tf.constant(np.inf, c.dtype)
            low = tf.where(live & (a > 0), c, inf)
            if signed:
                low = tf.where(live & tf.equal(a, 0) & (c < 0), -inf, low)  # need < 0
                highs.append(_flat(tf.where(live & (a < 0), c, -inf)))
            lows.append(_flat(low))
        return slopes, -m * inv, lows, highs

    def _edge_values_graph(self, trace, src_idx, w_idx, scope):
        """Normalized values of edges given by source column, weight and scope, (N, E)."""
        a_all, m, r = self._edge_sources_graph(trace)
        w_all = tf.concat([tf.reshape(self._weight(b), (-1,)) for b in self.blocks], axis=0)
        vals = tf.gather(a_all, src_idx, axis=1) * tf.gather(w_all, w_idx)
        mm, rr = tf.gather(m, scope, axis=1), tf.gather(r, scope, axis=1)
        return tf.where(rr > 0, (vals - mm) / tf.where(rr > 0, rr, tf.ones_like(rr)),
                        tf.zeros_like(vals))

    def _build(self) -> None:
        self._unit_scores = self.engine.compile(self._unit_scores_graph, record=_UNIT_RECORD)
        idx_sig = [tf.TensorSpec((None,), tf.int32)]
        if self.granularity == "unit":
            self._values_fn = self.engine.compile(lambda tr, idx: tf.gather(self._unit_scores_graph(tr),
                                                                      idx, axis=1), idx_sig,
                                            record=_UNIT_RECORD)
            self._objective_fn = self.engine.compile(
                lambda tr, idx: tf.gather(self._unit_scores_graph(tr, objective=True), idx,
                                          axis=1), idx_sig, record=_UNIT_RECORD)
            rows_sig = [tf.TensorSpec((None,), tf.int32), tf.TensorSpec((None, None), tf.int32)]
            self._rows_fns = tuple(self.engine.compile(
                lambda tr, u, p, o=o: self._unit_rows_graph(tr, tf.gather(u, p), objective=o),
                rows_sig, record=_UNIT_RECORD) for o in (False, True))
            # normalize="step": the scopes are reduced inside the trace's step loop
            step = self.normalize == "step"
            self._host_abs = step and self.values == "abs"    # parts come back signed
            self._unit_chunk = self.engine.compile(
                self._unit_step_chunk_graph if step else self._unit_chunk_graph,
                record=_UNIT_RECORD, step_fn=_StepReduce(self.values == "abs") if step else None)
            return
        self._edge_sources = self.engine.compile(self._edge_sources_graph, record=_EDGE_RECORD)
        self._edge_chunk = self.engine.compile(self._edge_chunk_graph,
                                         [tf.TensorSpec((None,), tf.float32)], record=_EDGE_RECORD)
        # where each block's sources and weights start in the flat source / weight vectors
        self._src_start = np.cumsum([0] + [b.steps * b.k for b in self.blocks])
        self._w_start = np.cumsum([0] + [b.k * b.j for b in self.blocks])
        self._n_sources = int(self._src_start[-1])
        idx_sig = [tf.TensorSpec((None,), tf.int32)] * 3
        self._values_fn = self.engine.compile(self._edge_values_graph, idx_sig, record=_EDGE_RECORD)

    @property
    def _edge(self) -> EdgeState:
        """edge granularity: the state (an EdgeState)."""
        return self._state

    def _absorb_unit_chunk(self, n, parts, lo, inv, subs) -> None:
        """One fused pass per chunk gave every contribution's maximum over sub-batches of _SUB
        inputs; the first input above a grid threshold (for curve()) is then found by reading
        back only the values of the sub-batch that lifted a newly covered contribution."""
        batch_max = np.concatenate([v.max(axis=1).ravel() for v in subs])
        host = [None] * len(parts)    # the parts as NumPy views (no copy), made when needed
        dense: dict = {}              # (block, sub-batch) -> its normalized values (T, _SUB, J)

        def normalized(bi, rows, ti=None, j=None):
            """Block bi's normalized values of inputs rows at (step ti, column j), or of a
            slice of rows at every step and column, (T, rows, J): the graph's arithmetic in
            float32, so they agree with the sub-batch maxima."""
            if host[bi] is None:
                host[bi] = np.asarray(parts[bi])
            if ti is None:
                v, sc = host[bi][:, rows], self._scope_cols[bi]
                m, r = lo[rows][:, sc].T[:, :, None], inv[rows][:, sc].T[:, :, None]
            else:       # flat takes: much faster than fancy indexing on three axes
                _, nn, jj = host[bi].shape
                sc = self._scope_cols[bi][ti]
                v = host[bi].reshape(-1).take((ti * nn + rows) * jj + j)
                at = rows * lo.shape[1] + sc
                m, r = lo.reshape(-1).take(at), inv.reshape(-1).take(at)
            return ((np.abs(v) if self._host_abs else v) - m) * r

        def first_above(v, t, axis):
            # (the sub-batch maximum is > t; a tie within rounding falls back to the max)
            above = v > t
            return np.where(above.any(axis=axis), above.argmax(axis=axis), v.argmax(axis=axis))

        def first_in_batch(t, cols):
            out = np.empty(cols.size, np.int64)
            bounds = np.searchsorted(cols, np.append(self._offsets, self.total))
            for bi, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
                if a == b:
                    continue
                sub = subs[bi]                                          # (T, N/_SUB, J)
                ti, j = np.divmod(cols[a:b] - self._offsets[bi], sub.shape[2])
                sb = np.argmax(sub > t, axis=1)[ti, j]        # the first sub-batch above t
                res = out[a:b]
                # a sub-batch that first lifts many items: all its values at once ...
                counts = np.bincount(sb, minlength=sub.shape[1])
                few = np.ones(sb.size, bool)
                for s in np.flatnonzero(counts * 8 >= sub.shape[0] * sub.shape[2]):
                    if (bi, s) not in dense:
                        dense[bi, s] = normalized(bi, slice(s * _SUB, (s + 1) * _SUB))
                    sel = np.flatnonzero(sb == s)
                    res[sel] = s * _SUB + first_above(dense[bi, s], t, 1)[ti[sel], j[sel]]
                    few[sel] = False
                # ... and for the rest only the _SUB values of each item's sub-batch
                sel = np.flatnonzero(few)
                if sel.size:
                    rows = sb[sel, None] * _SUB + np.arange(_SUB)
                    res[sel] = sb[sel] * _SUB + first_above(
                        normalized(bi, rows, ti[sel, None], j[sel, None]), t, 1)
            return out
        self._state.add(batch_max, n, first_in_batch)

    def curve(self, threshold=None) -> np.ndarray:
        """The base's curve. (Overridden, so ``new_items`` takes the steps of this curve as
        before issue 40's refactor, not the exact counts of the first-input indices: the
        same figures to the last digit; the counts differ from them by float rounding.)"""
        return super().curve(threshold)

    def _edge_lookup(self, idx: np.ndarray):
        """Flat edge indices -> (source column, weight position, scope), as int32 tensors."""
        seg = np.searchsorted(self._offsets, idx, side="right") - 1
        src, w, scope = (np.zeros(len(idx), np.int64) for _ in range(3))
        for bi in np.unique(seg):
            sel = seg == bi
            b = self.blocks[bi]
            t, k, j = np.unravel_index(idx[sel] - self._offsets[bi], (b.steps, b.k, b.j))
            src[sel] = self._src_start[bi] + t * b.k + k
            w[sel] = self._w_start[bi] + k * b.j + j
            scope[sel] = self._scope_cols[bi][t]
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
        seg, pos = self.report.segment_of(index)
        b = self.blocks[self.segments.index(seg)]
        step = None if b.kind == "dense" and not self.tracer.spec[b.layer].steps \
            else int(pos[0])
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
        t = self.cut(threshold)
        if input_index is not None or x is not None:
            if x is None:
                x, embedded = self.report.stored_input(input_index)
            covered = self.profile(x, embedded).max(axis=0) > t
        else:
            covered = self.report.covered_mask(threshold)
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
