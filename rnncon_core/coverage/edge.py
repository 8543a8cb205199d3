"""Edge-granularity RConC without materializing N x K x J products (see EdgeState)."""
from __future__ import annotations

import numpy as np

from ..errors import InputError


class EdgeState:
    """Edge coverage without materializing N x K x J products (DESIGN.md).

    For one input n the normalized value of edge (source s, weight u) is the line
    u -> sl[n, s] * u + b[n, s] (sl = a / range, b = -min / range of the source's scope; for
    values="abs" a and u are magnitudes). The running maximum over the
    inputs is the upper envelope of those lines at the source's weights. For u >= 0 only lines
    on the (slope, intercept) Pareto front matter (and for u < 0 the (-slope, intercept) front),
    which for any source holds a handful of lines. We keep the two fronts per source and
    evaluate the envelope at the weights only when a rate is asked (cached until the next
    update). The growth curve at a threshold t keeps, per source, the smallest weight bound
    above which (and the largest below which) some input activated the edges so far.
    """

    def __init__(self, cov, grid: tuple):
        self.cov = cov
        self.blocks = cov.blocks
        self.weights = [cov._weight(b).numpy().astype(np.float32) for b in self.blocks]
        self.n_src = [b.steps * b.k for b in self.blocks]
        self.fronts = [[_Front(n), _Front(n)] for n in self.n_src]    # u >= 0 side, u < 0 side
        self.signed = cov.values == "signed"      # for "abs" every weight is >= 0: one side
        self._cache = None
        self.grid = grid
        # growth curve state per threshold and block: bounds L (u > L covered), R (u < R)
        self.bounds = {t: [[np.full(n, np.inf), np.full(n, -np.inf)] for n in self.n_src]
                       for t in grid}
        self.curve = {t: [] for t in grid}
        self.counted = {t: 0 for t in grid}
        # per threshold and block, every change of a source's running bounds: (input index,
        # source, new L, new R); what merge() replays to make another state's curve exact
        self.events = {t: [[] for _ in self.n_src] for t in grid}
        self.n = 0
        self.sorted_rows = [_SortedRows(w) for w in self.weights]
        # per block, the scope of each source (t*K + k): one slice when the block has one scope,
        # and its scopes in source order (one per step, or one): sources of a scope are
        # consecutive and share its intercept
        self.src_scope, self.scopes = [], []
        for cols, b in zip(cov._scope_cols, self.blocks):
            one = np.all(cols == cols[0])
            self.src_scope.append(slice(int(cols[0]), int(cols[0]) + 1) if one
                                  else np.repeat(cols, b.k))
            self.scopes.append(cols[:1] if one else cols)

    def _lines(self, a, m, r, bi):
        """Slopes (N, S) and intercepts ((N, S), or (N, 1) for a block of one scope)."""
        sc = self.src_scope[bi]
        rr = r[:, sc].astype(np.float64)
        ok = rr > 0
        inv = np.where(ok, 1.0 / np.where(ok, rr, 1.0), 0.0)
        sl = (a * inv).astype(np.float32)
        b = (-m[:, sc] * inv).astype(np.float32)
        return sl, b

    def _block_sources(self, a):
        out, off = [], 0
        for n in self.n_src:
            out.append(a[:, off:off + n])
            off += n
        return out

    def add(self, slopes, intercepts, lows, highs) -> None:
        """Add a batch of inputs, in order, from what the update's graph computed: per block
        the slopes (B, T*K), per input and scope the intercepts (B, S), per block the bounds L
        (and R, signed) at each grid threshold (G, B, T*K) (ContributionCoverage._edge_chunk)."""
        self._cache = None
        n_in = intercepts.shape[0]
        for bi, sl in enumerate(slopes):
            g = self.scopes[bi]
            sl = sl.reshape(n_in, len(g), -1)
            b = intercepts[:, g]
            self.fronts[bi][0].add_scoped(sl, b)
            if self.signed:
                self.fronts[bi][1].add_scoped(-sl, b)
        for gi, t in enumerate(self.grid):
            self._add_curve(t, [L[gi] for L in lows],
                            [R[gi] for R in highs] if self.signed else [None] * len(lows))
        self.n += n_in

    def max_values(self) -> np.ndarray:
        """Every edge's largest normalized value so far, evaluated block by block and a few
        thousand sources at a time straight into one flat array (cached until the next
        update): the peak memory is that array plus one chunk."""
        if self._cache is None:
            out = np.empty(sum(b.steps * b.k * b.j for b in self.blocks), np.float32)
            off = 0
            for bi, b in enumerate(self.blocks):
                view = out[off:off + b.steps * b.k * b.j].reshape(b.steps * b.k, b.j)
                w = self.weights[bi]                                   # (K, J)
                pos, neg = self.fronts[bi]
                for c0 in range(0, view.shape[0], _ENVELOPE_ROWS):
                    rows = np.arange(c0, min(view.shape[0], c0 + _ENVELOPE_ROWS))
                    wr = w[rows % b.k]
                    pos.envelope_rows(rows, wr, 1.0, view[rows[0]:rows[-1] + 1])
                    if self.signed:
                        below = wr < 0
                        if below.any():
                            tmp = np.empty_like(wr)
                            neg.envelope_rows(rows, wr, -1.0, tmp)
                            np.copyto(view[rows[0]:rows[-1] + 1], tmp, where=below)
                off += b.steps * b.k * b.j
            self._cache = out
        return self._cache

    def one_input(self, a, m, r) -> np.ndarray:
        """All normalized edge values of one input (sources a (S,), m, r per scope)."""
        parts = []
        for bi, ab in enumerate(self._block_sources(a[None])):
            sl, b = self._lines(ab, m[None], r[None], bi)
            w, blk = self.weights[bi], self.blocks[bi]
            bb = np.broadcast_to(b[0], sl[0].shape).reshape(blk.steps, blk.k, 1)
            v = sl[0].reshape(blk.steps, blk.k, 1) * w[None] + bb
            parts.append(v.ravel())
        return np.concatenate(parts)

    def _add_curve(self, t, lows, highs) -> None:
        """Per block the inputs' bounds at threshold t, (B, T*K): an input activates a source's
        edges of weight u > L (and u < R; values="abs": sources are >= 0, so no edge is
        covered from below and R is None)."""
        n_in = lows[0].shape[0]
        delta = np.zeros(n_in, np.int64)
        for bi, (L, R) in enumerate(zip(lows, highs)):
            L0, R0 = self.bounds[t][bi]
            # only sources whose bounds this batch moves need the running min / max
            lmin = L.min(axis=0)
            moved = lmin < L0
            if R is not None:
                rmax = R.max(axis=0)
                moved |= rmax > R0
            cand = np.flatnonzero(moved)
            if not cand.size:
                continue
            if cand.size < L.shape[1]:
                L = L.take(cand, axis=1)
                R = None if R is None else R.take(cand, axis=1)
            # the inputs that move a bound, by source then input: the bounds before and after
            lrec = _records(L, np.less, L0[cand])
            rec = lrec if R is None else lrec | (rrec := _records(R, np.greater, R0[cand]))
            flat = np.flatnonzero(rec)
            cc, nn = np.divmod(flat, cand.size)[::-1]
            o = np.lexsort((nn, cc))
            nn, cc = nn[o], cc[o]
            l_old, l_new = _running(L, lrec, nn, cc, L0[cand])
            if R is None:
                r_old = r_new = R0[cand][cc]
            else:
                r_old, r_new = _running(R, rrec, nn, cc, R0[cand])
            rows = cand[cc] % self.blocks[bi].k
            sr = self.sorted_rows[bi]
            np.add.at(delta, nn, sr.count(rows, l_new, r_new) - sr.count(rows, l_old, r_old))
            self.events[t][bi].append(np.stack([(self.n + nn).astype(np.float64),
                                                cand[cc].astype(np.float64), l_new, r_new]))
            L0[cand] = np.minimum(L0[cand], lmin[cand])
            if R is not None:
                R0[cand] = np.maximum(R0[cand], rmax[cand])
        counts = self.counted[t] + np.cumsum(delta)
        self.counted[t] = int(counts[-1]) if n_in else self.counted[t]
        self.curve[t].append(counts)

    def _events(self, t, bi) -> np.ndarray:
        """(4, E): input index, source, L, R of every bound change, in input order."""
        ev = self.events[t][bi]
        if len(ev) != 1:
            self.events[t][bi] = [np.concatenate(ev, axis=1) if ev else np.zeros((4, 0))]
        return self.events[t][bi][0]

    def merge(self, other: "EdgeState") -> None:
        """The union with other's inputs, taken as coming after this state's: the fronts merge
        (exact maxima), and other's bound changes are replayed on top of this state's final
        bounds, which gives the exact growth curve of the concatenated inputs."""
        self._cache = None
        for mine, theirs in zip(self.fronts, other.fronts):
            for side in (0, 1):
                mine[side].merge(theirs[side])
        for t in self.grid:
            delta = np.zeros(other.n, np.int64)
            for bi in range(len(self.blocks)):
                ev = other._events(t, bi)
                if not ev.shape[1]:
                    continue
                L0, R0 = self.bounds[t][bi]
                order = np.lexsort((ev[0], ev[1]))                 # by source, then input
                n, src, L, R = ev[0, order].astype(np.int64), ev[1, order].astype(np.int64), \
                    ev[2, order], ev[3, order]
                first = np.ones(len(src), bool)
                first[1:] = src[1:] != src[:-1]
                prevL = np.where(first, np.inf, np.roll(L, 1))
                prevR = np.where(first, -np.inf, np.roll(R, 1))
                oldL, oldR = np.minimum(L0[src], prevL), np.maximum(R0[src], prevR)
                newL, newR = np.minimum(L0[src], L), np.maximum(R0[src], R)
                moved = (newL != oldL) | (newR != oldR)
                rows = src[moved] % self.blocks[bi].k
                sr = self.sorted_rows[bi]
                np.add.at(delta, n[moved], sr.count(rows, newL[moved], newR[moved])
                          - sr.count(rows, oldL[moved], oldR[moved]))
                keep = np.argsort(n[moved], kind="stable")
                self.events[t][bi].append(np.stack([
                    (self.n + n[moved][keep]).astype(np.float64), src[moved][keep].astype(
                        np.float64), newL[moved][keep], newR[moved][keep]]))
                np.minimum.at(L0, src, L)
                np.maximum.at(R0, src, R)
            counts = self.counted[t] + np.cumsum(delta)
            if other.n:
                self.counted[t] = int(counts[-1])
                self.curve[t].append(counts)
        self.n += other.n

    def arrays(self) -> dict:
        out = {"n": np.int64(self.n)}
        for bi in range(len(self.blocks)):
            for side in (0, 1):
                out[f"front_{bi}_{side}_s"] = self.fronts[bi][side].s
                out[f"front_{bi}_{side}_b"] = self.fronts[bi][side].b
        for t in self.grid:
            out[f"curve_{t!r}"] = self.curve_counts(t)
            for bi in range(len(self.blocks)):
                out[f"bounds_{t!r}_{bi}_L"], out[f"bounds_{t!r}_{bi}_R"] = self.bounds[t][bi]
                out[f"events_{t!r}_{bi}"] = self._events(t, bi)
        return out

    def load(self, arrays: dict) -> None:
        self._cache = None
        self.n = int(arrays["n"])
        for bi in range(len(self.blocks)):
            for side in (0, 1):
                self.fronts[bi][side].s = np.asarray(arrays[f"front_{bi}_{side}_s"], np.float32)
                self.fronts[bi][side].b = np.asarray(arrays[f"front_{bi}_{side}_b"], np.float32)
        for t in self.grid:
            counts = np.asarray(arrays[f"curve_{t!r}"], np.int64)
            self.curve[t] = [counts] if len(counts) else []
            self.counted[t] = int(counts[-1]) if len(counts) else 0
            for bi in range(len(self.blocks)):
                self.bounds[t][bi] = [np.asarray(arrays[f"bounds_{t!r}_{bi}_L"]).copy(),
                                      np.asarray(arrays[f"bounds_{t!r}_{bi}_R"]).copy()]
                self.events[t][bi] = [np.asarray(arrays[f"events_{t!r}_{bi}"])]

    def curve_counts(self, t) -> np.ndarray:
        if t not in self.curve:
            raise InputError(f"the edge growth curve is kept at thresholds "
                             f"{', '.join(map(str, self.grid))}; make the criterion with "
                             f"curve_thresholds including {t}")
        return np.concatenate(self.curve[t]) if self.curve[t] else np.zeros(0, np.int64)


_ENVELOPE_ROWS = 4096        # sources evaluated at once by max_values


class _Front:
    """Per source, the Pareto front of lines (slope, intercept): the lines that can be the
    largest at some weight of one sign. Padded arrays (S, R); padding has intercept -inf."""

    def __init__(self, n_sources: int):
        self.s = np.zeros((n_sources, 0), np.float32)
        self.b = np.zeros((n_sources, 0), np.float32)

    def add(self, sl: np.ndarray, b: np.ndarray) -> None:
        """sl (B, S) slopes of B new inputs (already signed), b their intercepts: (B, S), or
        (B, 1) when every source of an input shares one."""
        if b.shape[1] == 1:
            order = np.argsort(-b[:, 0], kind="stable")
            ss, bs = sl[order], np.broadcast_to(b[order], sl.shape)
        else:
            order = np.argsort(-b, axis=0, kind="stable")
            ss, bs = np.take_along_axis(sl, order, 0), np.take_along_axis(b, order, 0)
        cm = np.maximum.accumulate(ss, axis=0)
        rec = np.ones_like(cm, bool)
        rec[1:] = cm[1:] > cm[:-1]
        self._merge_lines(*_compact(rec.T, ss.T, bs.T, fills=[0.0, -np.inf]))

    def add_scoped(self, sl: np.ndarray, b: np.ndarray) -> None:
        """add() for sources in G scopes of K sources each, the sources of a scope sharing
        their intercept: sl (B, G, K) slopes (already signed), b (B, G). The inputs are sorted
        per scope (not per source), and only the records of the running maximum slope in
        that order (a few per source) are compacted."""
        n_in, g_n, k_n = sl.shape
        order = np.argsort(-b, axis=0, kind="stable")                       # (B, G)
        rows = (order * g_n + np.arange(g_n)).ravel()     # row takes: no take_along_axis
        ss = sl.reshape(n_in * g_n, k_n).take(rows, axis=0).reshape(n_in, g_n * k_n)
        bs = b.reshape(-1).take(rows).reshape(n_in, g_n)
        rec = _records(ss, np.greater)
        n, src = np.divmod(np.flatnonzero(rec), g_n * k_n)
        vals, ints = ss[n, src], bs[n, src // k_n]
        o = np.argsort(src, kind="stable")        # by source, in the intercepts' order
        src = src[o]
        counts = np.bincount(src, minlength=g_n * k_n)
        rank = np.arange(src.size) - (np.cumsum(counts) - counts)[src]
        new_s = np.zeros((g_n * k_n, int(counts.max())), np.float32)
        new_b = np.full(new_s.shape, -np.inf, np.float32)
        new_s[src, rank], new_b[src, rank] = vals[o], ints[o]
        self._merge_lines(new_s, new_b)

    def _merge_lines(self, new_s: np.ndarray, new_b: np.ndarray) -> None:
        """Per source the Pareto front of its kept lines and new ones, (S, R) each."""
        s = np.concatenate([self.s, new_s], axis=1)
        bb = np.concatenate([self.b, new_b], axis=1)
        o = np.argsort(-bb, axis=1, kind="stable")
        s, bb = np.take_along_axis(s, o, 1), np.take_along_axis(bb, o, 1)
        cm = np.maximum.accumulate(np.where(np.isfinite(bb), s, -np.inf), axis=1)
        keep = np.isfinite(bb)
        keep[:, 1:] &= cm[:, 1:] > cm[:, :-1]
        self.s, self.b = _compact(keep, s, bb, fills=[0.0, -np.inf])

    def merge(self, other: "_Front") -> None:
        """Add the lines of other's fronts (each of its R columns as one input)."""
        if other.s.shape[1]:
            self.add(other.s.T.copy(), other.b.T.copy())

    def envelope_rows(self, rows: np.ndarray, w_rows: np.ndarray, sign: float,
                      out: np.ndarray) -> None:
        """out (len(rows), J) = max over the lines of sources ``rows`` at their weights
        ``w_rows`` (-inf where a source has no line yet); rows are consecutive sources."""
        out.fill(-np.inf)
        if self.s.shape[1] == 0:
            return
        s, b = self.s[rows], self.b[rows]
        counts = np.isfinite(b).sum(axis=1)
        order = np.argsort(-counts, kind="stable")           # longest fronts first
        s, b, wr, counts = s[order] * sign, b[order], w_rows[order], counts[order]
        res = np.full(out.shape, -np.inf, np.float32)
        tmp = np.empty(out.shape, np.float32)
        for r in range(int(counts.max(initial=0))):
            n = int((counts > r).sum())
            np.multiply(s[:n, r:r + 1], wr[:n], out=tmp[:n])
            tmp[:n] += b[:n, r:r + 1]
            np.maximum(res[:n], tmp[:n], out=res[:n])
        out[order] = res


def _records(v: np.ndarray, beats, start=None, out=None) -> np.ndarray:
    """(B, S) bool: where v's row n beats (np.greater, np.less) the running best of rows
    before it (and of start (S,), if given; row 0 is always a record without start). Row by
    row: NumPy's accumulate along axis 0 is many times slower."""
    best = v[0].copy() if start is None else start.astype(v.dtype)
    rec = np.empty(v.shape, bool)
    best_of = np.maximum if beats is np.greater else np.minimum
    for n in range(v.shape[0]):
        beats(v[n], best, out=rec[n])
        best_of(best, v[n], out=best)
    if start is None:
        rec[0] = True
    return rec


def _running(v: np.ndarray, rec: np.ndarray, nn: np.ndarray, cc: np.ndarray, start: np.ndarray):
    """Entries (input nn, column cc) sorted by column then input, where a running bound of v
    (B, C) moves (rec: where v itself sets it; start (C,): the bound before the batch): the
    bound before and after each entry, float64."""
    e = np.arange(nn.size)
    first = np.ones(nn.size, bool)
    first[1:] = cc[1:] != cc[:-1]
    group = np.maximum.accumulate(np.where(first, e, 0))         # the column's first entry
    last = np.maximum.accumulate(np.where(rec[nn, cc], e, -1))   # the latest record so far
    own = last >= group
    after = np.where(own, v[nn[last], cc[last]], start[cc]).astype(np.float64)
    before = np.where(first, start[cc], np.roll(after, 1)).astype(np.float64)
    return before, after


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
