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
        # per block, the scope of each source (t*K + k): one slice when the block has one scope
        self.src_scope = []
        for cols, b in zip(cov._scope_cols, self.blocks):
            one = np.all(cols == cols[0])
            self.src_scope.append(slice(int(cols[0]), int(cols[0]) + 1) if one
                                  else np.repeat(cols, b.k))

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

    def add(self, a, m, r) -> None:
        self._cache = None
        for bi, ab in enumerate(self._block_sources(a)):
            sl, b = self._lines(ab, m, r, bi)
            self.fronts[bi][0].add(sl, b)
            if self.signed:
                self.fronts[bi][1].add(-sl, b)
        for t in self.grid:
            self._add_curve(t, a, m, r)
        self.n += a.shape[0]

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

    def _add_curve(self, t, a, m, r) -> None:
        n_in = a.shape[0]
        delta = np.zeros(n_in, np.int64)
        for bi, ab in enumerate(self._block_sources(a)):
            sc = self.src_scope[bi]
            mm, rr = m[:, sc].astype(np.float64), r[:, sc].astype(np.float64)
            need = mm + t * rr                    # activated iff a*u > need (and range > 0)
            a64 = ab.astype(np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                c = need / a64
            live = rr > 0
            L = np.where(live & (a64 > 0), c, np.inf)
            L = np.where(live & (a64 == 0) & (need < 0), -np.inf, L)
            # values="abs": sources are >= 0, so no edge is covered from below (R stays -inf)
            R = np.where(live & (a64 < 0), c, -np.inf) if self.signed else None
            del c, a64
            L0, R0 = self.bounds[t][bi]
            # only sources whose bounds this batch moves need the running min / max
            moved = L.min(axis=0) < L0
            if R is not None:
                moved |= R.max(axis=0) > R0
            cand = np.flatnonzero(moved)
            if not cand.size:
                continue
            if cand.size < L.shape[1]:
                L = L[:, cand]
                R = None if R is None else R[:, cand]
            Lrun = np.vstack([L0[None, cand], L])
            del L
            np.minimum.accumulate(Lrun, axis=0, out=Lrun)
            changed = Lrun[1:] != Lrun[:-1]
            if R is not None:
                Rrun = np.vstack([R0[None, cand], R])
                del R
                np.maximum.accumulate(Rrun, axis=0, out=Rrun)
                changed |= Rrun[1:] != Rrun[:-1]
            else:
                Rrun = np.broadcast_to(R0[None, cand], Lrun.shape)
            nn, cc = np.nonzero(changed)
            if nn.size:
                rows = cand[cc] % self.blocks[bi].k
                sr = self.sorted_rows[bi]
                new = sr.count(rows, Lrun[nn + 1, cc], Rrun[nn + 1, cc])
                old = sr.count(rows, Lrun[nn, cc], Rrun[nn, cc])
                np.add.at(delta, nn, new - old)
                self.events[t][bi].append(np.stack([
                    (self.n + nn).astype(np.float64), cand[cc].astype(np.float64),
                    Lrun[nn + 1, cc], Rrun[nn + 1, cc]]))
            L0[cand], R0[cand] = Lrun[-1], Rrun[-1]
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
        new_s, new_b = _compact(rec.T, ss.T, bs.T, fills=[0.0, -np.inf])
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
