"""The base of every criterion: item layout, running maxima, life cycle, TF helpers."""
from __future__ import annotations

import copy
import json
import os
import threading
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import InputError
from ..io import atomic_write_npz
from ..trace import Tracer, fingerprint
from .params import Interval, Params

REPORT_THRESHOLDS = (0.0, 0.25, 0.5, 0.75)
_CHUNK_ELEMENTS = 2 ** 24          # floats of scores held at once per update chunk
# RNNCON_CHUNK_DIVISOR divides every update chunk's budget, for a long-lived process that
# counts its peak memory more than some speed (the dashboard server sets 4: an IMDB profile's
# peak 1.4 -> 0.65 GB above the model at edge granularity, same time; 25-40 % slower edge
# updates on MNIST, where the chunks were large)
CHUNK_DIVISOR = max(1, int(os.environ.get("RNNCON_CHUNK_DIVISOR", "1") or 1))


def chunk_elements(budget: int) -> int:
    """An update chunk's budget of floats, divided by CHUNK_DIVISOR."""
    return max(1, budget // CHUNK_DIVISOR)


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

class MaxState:
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

    def merge(self, other: "MaxState") -> None:
        """The union with other's inputs, taken as coming after this state's."""
        for t, first in self.first.items():
            theirs = other.first[t]
            take = (first < 0) & (theirs >= 0)
            first[take] = theirs[take] + self.n
        np.maximum(self.max, other.max, out=self.max)
        self.n += other.n

    def arrays(self) -> dict:
        return {"max": self.max, "n": np.int64(self.n),
                **{f"first_{t!r}": f for t, f in self.first.items()}}

    def load(self, arrays: dict) -> None:
        self.max = np.asarray(arrays["max"], np.float32).copy()
        self.n = int(arrays["n"])
        self.first = {t: np.asarray(arrays[f"first_{t!r}"], np.int64).copy() for t in self.grid}

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


# ---------------------------------------------------------------- per-model cache

CACHE_LOCK = threading.RLock()


def model_cache(model) -> dict:
    """A dict kept on the Keras model itself (so it lives and dies with the model): the
    model's Tracer and every compiled graph of its criteria, shared by every criterion object,
    generator and thread that uses the same model."""
    model = model.model if isinstance(model, Tracer) else model
    cache = model.__dict__.get("_rnncon_cache")
    if cache is None:
        with CACHE_LOCK:
            cache = model.__dict__.get("_rnncon_cache")
            if cache is None:
                cache = {}
                object.__setattr__(model, "_rnncon_cache", cache)   # not a tracked Keras attr
    return cache


def tracer_for(model) -> Tracer:
    """The model's Tracer, validated once per model (a Tracer is returned as it is)."""
    if isinstance(model, Tracer):
        return model
    cache = model_cache(model)
    with CACHE_LOCK:
        if "tracer" not in cache:
            cache["tracer"] = Tracer(model)
        return cache["tracer"]


def check_writable(path, what: str = "the coverage state") -> "Path":
    """``path`` as a Path a coverage state can be written to (``io.check_writable``: not a
    folder, its folder writable or makeable, probed without leaving anything), or an
    InputError naming it: call it before long work whose result goes there."""
    from ..io import check_writable as probe
    return probe(path, what)


def check_state(path) -> "Path":
    """A saved coverage state (``--state``) read and checked as a file before the work (the
    criterion and model are checked when it is loaded): its path, or an InputError."""
    from pathlib import Path
    path = Path(path)
    if not path.exists() and path.with_suffix(".npz").is_file():
        path = path.with_suffix(".npz")          # saved by an older version (it added .npz)
    _read_state(path)
    return path


def _read_state(path) -> tuple[dict, dict]:
    """(meta, state arrays) of a saved coverage state, or an InputError saying what is wrong
    with the file (missing, not an archive, truncated, no or broken meta)."""
    if not path.is_file():
        raise InputError(f"no coverage state file {path}" if not path.exists() else
                         f"{path} is not a file: give a coverage state saved by --save-state")
    bad = f"{path} is not a coverage state saved by rnncon (--save-state / Criterion.save)"
    try:
        f = np.load(path, allow_pickle=False)
        if not hasattr(f, "files"):
            raise InputError(f"{bad}: it holds one array, not an archive")
        with f:
            if "meta" not in f.files:
                raise InputError(f"{bad}: it has no meta record")
            meta = json.loads(str(f["meta"]))
            arrays = {k[len("state/"):]: f[k] for k in f.files if k.startswith("state/")}
    except InputError:
        raise
    except (zipfile.BadZipFile, EOFError, zlib.error) as e:
        raise InputError(f"{bad}: the archive is truncated or damaged "
                         f"({type(e).__name__})") from None
    except (OSError, ValueError, KeyError, RecursionError) as e:
        why = "not an .npz archive" if "pickle" in str(e) else \
            f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
        raise InputError(f"{bad} ({why})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict) \
            or not isinstance(meta.get("criterion"), str) or "fingerprint" not in meta:
        raise InputError(f"{bad}: its meta record lacks the criterion, config or fingerprint")
    return meta, arrays


# ---------------------------------------------------------------- base class

class Criterion:
    """Base of every coverage criterion (see the module docstring)."""

    name = ""
    title = ""                      # the criterion in words, for tables (coverage.title)
    params = Params()               # the declared parameters (rnncon_core.params)
    uses_threshold = True
    threshold_from_data = False     # True: the CLI's and dashboard's default threshold is the
                                    # data set's (coverage.threshold.default_threshold)

    def __init__(self, model, **params):
        for key, value in self.params.check(f"criterion {self.name!r}", params).items():
            setattr(self, key, value)
        self.model = model
        self.tracer = tracer_for(model)
        self.segments: list[Segment] = self._layout()
        self.total = int(sum(s.size for s in self.segments))
        self._offsets = np.array([s.offset for s in self.segments])
        self._attach_graphs()
        self.reset()

    _taps = False        # True: the compiled graphs also return the model's outputs

    def _graph_key(self) -> tuple:
        """What the compiled graphs depend on: the class and every parameter but the
        threshold and the curve grid (which only the NumPy state reads)."""
        config = {k: v for k, v in self.get_config().items()
                  if k not in ("threshold", "curve_thresholds")}
        return ("graphs", type(self).__qualname__, json.dumps(config, sort_keys=True,
                                                              default=str), self._taps)

    def _attach_graphs(self) -> None:
        """Compile once per (model, configuration): the first criterion of a configuration
        builds the graphs on a stateless twin of itself (they close over it, not over a state
        that grows), and every later one, in any thread, reuses them."""
        cache = model_cache(self.tracer)
        key = self._graph_key()
        with CACHE_LOCK:
            built = cache.get(key)
            if built is None:
                twin = copy.copy(self)
                before = dict(vars(twin))       # (graphs built before are replaced too)
                twin._build()
                built = {k: v for k, v in vars(twin).items()
                         if k not in before or before[k] is not v}
                cache[key] = built
        self.__dict__.update(built)

    # -- what subclasses provide
    def _layout(self) -> list[Segment]:
        raise NotImplementedError

    def _build(self) -> None:
        """Make the TF functions (traced on first use; see _attach_graphs)."""
        self._reduce_fn = self._compile(with_max(self._scores_graph))

    def _curve_grid(self) -> tuple:
        return (self.cut(None),)

    # -- life cycle
    # inputs kept for stored_input() (the dashboard's per-input views): the first ones only
    KEEP_INPUTS = 2048

    def reset(self) -> None:
        self._state = self._new_state()
        self._inputs: list = []
        self._kept = 0

    def update(self, x, embedded: bool = False):
        """Add a batch of inputs to the covered set (union with every earlier input)."""
        return self._update_checked(self.tracer.check_inputs(x, embedded), embedded)

    def _update_checked(self, x, embedded: bool, outputs: list | None = None):
        """update of inputs already checked (a tf.Tensor from ``check_inputs``); ``outputs``:
        where tapped graphs add each call's (model outputs, hidden state)."""
        n = int(x.shape[0])
        chunk = self._chunk_size()
        chunks = [x[start:start + chunk] for start in range(0, n, chunk)]
        if type(self)._update_chunk is not Criterion._update_chunk or len(chunks) == 1:
            for part in chunks:             # (a criterion with its own one-step update)
                self._update_chunk(part, embedded, outputs)
        else:
            # a pipeline: the graph of chunk i+1 runs in a worker thread while this one adds
            # chunk i to the state (NumPy): a step loop keeps about one core busy, so on two
            # or more cores the host's part mostly costs no time
            with ThreadPoolExecutor(1) as pool:
                pending = pool.submit(self._graph_chunk, chunks[0], embedded, outputs)
                for part in chunks[1:] + [None]:
                    out = pending.result()
                    if part is not None:
                        pending = pool.submit(self._graph_chunk, part, embedded, outputs)
                    self._absorb_chunk(out)
        self._keep(x.numpy()[:max(0, self.KEEP_INPUTS - self._kept)], embedded)
        return self

    def update_with_outputs(self, x, embedded: bool = False, also=()):
        """``update(x)`` and, from the same forward pass, the model's outputs (N, classes)
        and the last step's hidden state of the last recurrent layer (N, units) (what
        ``forward_outputs`` gives), as NumPy arrays: one pass serves the coverage and the
        predictions (DeepHunter's ``fetch_function`` reads both from one run of the model).
        ``also``: criteria of the same configuration whose states take the same inputs, from
        the same pass where the criterion allows it. Returns (outputs, hidden), or None where
        the criterion's update is not one graph call per chunk (then call the model apart)."""
        if not self._taps:                 # graphs that also return the outputs (once)
            self._taps = True
            self._attach_graphs()
        x = self.tracer.check_inputs(x, embedded)
        outputs: list = []          # each graph call's (outputs, hidden), in chunk order
        self._update_all(x, embedded, also, outputs)
        n, chunk = int(x.shape[0]), self._chunk_size()
        sizes = [min(chunk, n - start) for start in range(0, n, chunk)]
        if len(outputs) != len(sizes):
            return None
        out = np.concatenate([o[:k] for (o, _), k in zip(outputs, sizes)])
        hid = np.concatenate([h[:k] for (_, h), k in zip(outputs, sizes)])
        return out, hid

    def _update_all(self, x, embedded, also, outputs: list) -> None:
        """update(x) of self and of ``also``, one graph call per chunk for all where the
        criterion's update is the base one."""
        if not also or type(self)._update_chunk is not Criterion._update_chunk:
            self._update_checked(x, embedded, outputs)
            for crit in also:
                crit._update_checked(x, embedded)
            return
        chunk = self._chunk_size()
        for start in range(0, int(x.shape[0]), chunk):
            out = self._graph_chunk(x[start:start + chunk], embedded, outputs)
            for crit in (self, *also):
                crit._absorb_chunk(out)
        for crit in (self, *also):
            crit._keep(x.numpy()[:max(0, crit.KEEP_INPUTS - crit._kept)], embedded)

    def _new_state(self) -> MaxState:
        return MaxState(self.total, self._curve_grid())

    def _keep(self, arr, embedded) -> None:
        if len(arr):
            self._inputs.append((arr, embedded))
            self._kept += len(arr)

    # -- the state as a value: merge, save, load
    def merge(self, other: "Criterion") -> "Criterion":
        """Take the union with what ``other`` saw, as if its inputs came after this one's (first-
        input indices and the growth curve are offset). Same model and configuration only."""
        if type(other) is not type(self) or other.get_config() != self.get_config():
            raise InputError(f"can only merge a {self.name} state of the same configuration: "
                             f"{self.get_config()} vs {getattr(other, 'get_config', dict)()}")
        if other.tracer is not self.tracer:
            if fingerprint(other.tracer) != fingerprint(self.tracer):
                raise InputError("these coverage states belong to different models (weights "
                                 "differ); a state is never merged into another model's")
        if self._kept < self.KEEP_INPUTS and self._kept == self.n_inputs:
            for arr, emb in other._inputs:
                self._keep(arr[:max(0, self.KEEP_INPUTS - self._kept)], emb)
        self._merge_state(other)
        return self

    def _merge_state(self, other) -> None:
        self._state.merge(other._state)

    def state(self) -> dict:
        """The coverage state as arrays (what ``save`` stores and ``load_state`` takes)."""
        return self._state.arrays()

    def load_state(self, arrays: dict) -> None:
        """Replace the state by ``state()``'s arrays of a criterion of the same configuration."""
        self._state.load(arrays)

    def save(self, path) -> "Path":
        """One .npz archive at exactly ``path`` (whatever its suffix: ``x.state`` writes
        ``x.state``): the state's arrays, the configuration and the model's fingerprint.
        An unwritable path is an InputError (:func:`check_writable` tells before the work)."""
        path = check_writable(path)
        meta = {"criterion": self.name, "config": self.get_config(),
                "fingerprint": fingerprint(self.tracer), "n_inputs": self.n_inputs,
                "format": 1}
        arrays = {f"state/{k}": v for k, v in self.state().items()}
        try:            # written through a file object: numpy adds no suffix
            return atomic_write_npz(path, {"meta": np.array(json.dumps(meta)), **arrays})
        except OSError as e:
            raise InputError(f"cannot write the coverage state {path} "
                             f"({e.strerror or e})") from None

    @classmethod
    def load(cls, model, path) -> "Criterion":
        """A criterion with the state saved by ``save`` (on the same model: its weights'
        fingerprint must match). ``Criterion.load`` picks the class from the file. A file
        that is not such a state (truncated, not an archive, its meta missing or broken) is
        an InputError."""
        from pathlib import Path
        path = Path(path)
        if not path.exists() and path.with_suffix(".npz").is_file():
            path = path.with_suffix(".npz")      # saved by an older version (it added .npz)
        meta, arrays = _read_state(path)
        from ..registry import CRITERIA
        klass = CRITERIA.get(meta.get("criterion")) if cls is Criterion else cls
        if klass is None or klass.name != meta.get("criterion"):
            raise InputError(f"{path} holds a {meta.get('criterion')!r} state, not {cls.name!r}")
        crit = klass.from_config(model, {k: v for k, v in meta["config"].items()})
        if fingerprint(crit.tracer) != meta["fingerprint"]:
            raise InputError(f"{path} was saved on another model (fingerprint "
                             f"{meta['fingerprint']}); load it with the model it was made on")
        try:
            crit.load_state(arrays)
        except (KeyError, ValueError, TypeError, IndexError) as e:
            raise InputError(f"{path} is a damaged coverage state (its arrays do not fit the "
                             f"{klass.name} state: {type(e).__name__}); save it again") from None
        return crit

    def _elements_per_input(self) -> int:
        return self.total

    def _chunk_size(self) -> int:
        return max(1, min(1024, chunk_elements(_CHUNK_ELEMENTS)
                           // max(1, self._elements_per_input())))

    def _update_chunk(self, x, embedded, outputs=None) -> None:
        self._absorb_chunk(self._graph_chunk(x, embedded, outputs))

    def _graph_chunk(self, x, embedded, outputs=None):
        """A chunk's TensorFlow part (thread-safe: it touches no state)."""
        scores, bm = self._reduce_fn(x, embedded, outputs=outputs)
        return scores, bm.numpy()

    def _absorb_chunk(self, out) -> None:
        """Add what _graph_chunk computed to the state."""
        self._state.add_batch(*out)

    @property
    def n_inputs(self) -> int:
        return self._state.n

    def cut(self, threshold=None):
        """Scores strictly above this count as covered (the criterion's own threshold, or
        ``threshold``; 0.5 for a criterion without one)."""
        if not self.uses_threshold:
            if threshold is not None:
                raise InputError(f"{self.name} has no threshold (items are covered or not)")
            return 0.5
        t = self.threshold if threshold is None else threshold
        return Interval(0, 1).check("threshold", t)

    def _covered_mask(self, threshold=None) -> np.ndarray:
        return self._max_values() > self.cut(threshold)

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
        t = self.cut(threshold)
        if t not in self._state.grid:
            raise InputError(f"the growth curve is kept at thresholds "
                             f"{', '.join(map(str, self._state.grid))}; make the criterion "
                             f"with curve_thresholds including {t}")
        return self._state.curve_counts(t) / max(1, self.total)

    def new_items(self, since: int) -> np.ndarray:
        """Per input given after the first ``since``: how many items it covered first (the
        growth curve's steps times the item count); reads only the
        first-input indices where the curve is the base one (cheap however many inputs)."""
        state = getattr(self, "_state", None)       # (TopKPatterns keeps its own state)
        if type(self).curve is Criterion.curve and isinstance(state, MaxState) \
                and state.total == self.total:
            t = self.cut(None)
            if t in state.first:
                first = state.first[t]
                hit = first[first >= since] - since
                return np.bincount(hit, minlength=max(0, state.n - since)).astype(np.float64)
        curve = np.asarray(self.curve(), np.float64)
        prev = np.concatenate([[curve[since - 1] if since else 0.0], curve[since:-1]])
        return (curve[since:] - prev) * max(1, self.total)

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

    # -- values of single items (what generators optimize)
    graph_safe = True          # graph_values works inside a tf.function

    def item_values(self, x, indices, embedded: bool = False):
        """(N, len(indices)) the items' scores before the threshold (normalized contributions,
        scaled neuron outputs, ...), differentiable w.r.t. float x (or w.r.t. embedding vectors
        with embedded=True). Inputs are checked first."""
        raise InputError(f"{self.name} has no differentiable item values")

    def graph_values(self, x, indices, embedded: bool = False):
        """item_values for code inside a tf.function: no Python-side checks (give float32
        inputs of the model's shape and int indices). Where the criterion cannot run in a
        graph (``graph_safe`` False) or when called eagerly, it is item_values."""
        import tensorflow as tf
        if not self.graph_safe or tf.executing_eagerly():
            return self.item_values(x, indices, embedded)
        return self._values_fn(x, embedded, tf.cast(indices, tf.int32))

    def graph_objective(self, x, indices, embedded: bool = False):
        """What coverage-guided generation ascends (by default graph_values)."""
        return self.graph_values(x, indices, embedded)

    def row_values(self, x, union, pos, objective: bool = False, embedded: bool = False):
        """(N, k): input n's values of its own items union[pos[n]] (a generator's per-seed
        targets), those of graph_objective with ``objective``, else of graph_values (an eager
        call checks its inputs as item_values). By default every union item's values, gathered;
        a criterion may compute the rows' own items only (rconc: ``_unit_rows_graph``)."""
        import tensorflow as tf
        v = (self.graph_objective if objective else self.graph_values)(x, union, embedded)
        return tf.gather(v, pos, axis=1, batch_dims=1)

    def dead_items(self) -> np.ndarray:
        """Items no input can cover (no target for generation); none by default."""
        return np.zeros(0, np.int64)

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
                                      for k in self.params.names for v in [getattr(self, k)]}}

    @classmethod
    def from_config(cls, model, config: dict):
        params = {k: v for k, v in config.items() if k != "name"}
        return cls(model, **params)

    def summary(self, threshold=None) -> dict:
        """The CLI's JSON object."""
        return {"criterion": self.name,
                "threshold": self.cut(threshold) if self.uses_threshold else None,
                "granularity": getattr(self, "granularity", None),
                "normalize": getattr(self, "normalize", None),
                "values": None,
                "n_inputs": self.n_inputs, "total": self.total,
                "covered": self.covered_at(threshold), "rate": self.rate(threshold),
                "by_layer": self.by_layer(threshold).to_dict(orient="records")}

    def __repr__(self):
        params = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.params.names)
        return f"{type(self).__name__}({params}; {self.n_inputs} inputs, rate {self.rate():.4f})"

    # -- TF helpers
    def _compile(self, fn, extra_sig=(), record=None, step_fn=None):
        """fn(trace, *extra) -> tensors, compiled once for float inputs and for word ids.
        With record, fn gets the lean time-major dict of Tracer.forward_steps instead (with
        what step_fn reduces inside the step loops)."""
        import tensorflow as tf
        tr = self.tracer
        if record is None:
            run = (lambda x: _tapped(tr, tr.forward(x))) if self._taps else tr.forward
        else:
            run = (lambda x: _tapped(tr, *tr.forward_steps(x, record, step_fn=step_fn))) \
                if self._taps else (lambda x: tr.forward_steps(x, record, step_fn=step_fn)[0])
        body = (lambda x, *a: (lambda r: (fn(r[0], *a), r[1]))(run(x))) if self._taps else \
            (lambda x, *a: fn(run(x), *a))
        fsig = [tf.TensorSpec((None,) + tr.embedded_shape, tf.float32), *extra_sig]
        f_float = tf.function(body, input_signature=fsig)
        f_ids = None
        if tr.embedding is not None:
            isig = [tf.TensorSpec((None,) + tr.input_shape, tf.int32), *extra_sig]
            f_ids = tf.function(lambda ids, *a: body(tr.embed_tf(ids), *a),
                                input_signature=isig)

        tapped = self._taps

        def call(x, embedded=False, *args, outputs: list | None = None):
            """The graph's result; a tapped graph adds (outputs, hidden) to ``outputs``."""
            got = f_ids(x, *args) if f_ids is not None and not embedded else f_float(x, *args)
            if not tapped:
                return got
            if outputs is not None:                 # update_with_outputs is collecting
                outputs.append(tuple(t.numpy() for t in got[1]))
            return got[0]
        return call


def last_recurrent(tracer):
    """The spec of the last recurrent layer (direction) of a traced model, or None."""
    rec = [s for s in tracer.specs if s.recurrent]
    return rec[-1] if rec else None


def _tapped(tracer, trace, out=None):
    """(what the criterion's graph reads, (model output, last hidden state (N, units))):
    from a full Trace, or from forward_steps' (raw dict, output)."""
    import tensorflow as tf
    spec = last_recurrent(tracer)
    if out is None:                       # a Trace
        h = trace.layers[spec.name].h[:, -1] if spec is not None else \
            tf.zeros((tf.shape(trace.output)[0], 0))
        return trace, (trace.output, h)
    h = trace[spec.name]["h"][-1] if spec is not None else tf.zeros((tf.shape(out)[0], 0))
    return trace, (out, h)


def forward_outputs(model):
    """x -> (model outputs (N, classes), last step's hidden state of the last recurrent layer
    (N, units)) as NumPy arrays, from one traced forward pass (float inputs or word ids),
    compiled once per model: what ``Criterion.update_with_outputs`` gives without a
    criterion."""
    import tensorflow as tf
    tr = tracer_for(model)
    cache = model_cache(tr)
    with CACHE_LOCK:
        fns = cache.get("forward-outputs")
        if fns is None:
            def body(x):
                return _tapped(tr, *tr.forward_steps(x, ()))[1]
            f_float = tf.function(body, input_signature=[
                tf.TensorSpec((None,) + tr.embedded_shape, tf.float32)])
            f_ids = None if tr.embedding is None else tf.function(
                lambda ids: body(tr.embed_tf(ids)),
                input_signature=[tf.TensorSpec((None,) + tr.input_shape, tf.int32)])
            fns = cache["forward-outputs"] = (f_float, f_ids)
    f_float, f_ids = fns

    def call(x):
        x = tr.check_inputs(x)
        got = f_ids(x) if f_ids is not None else f_float(x)
        return tuple(t.numpy() for t in got)
    return call


def with_max(scores_graph):
    """trace -> (scores (N, total), their maximum over the batch per item)."""
    import tensorflow as tf

    @tf.autograph.experimental.do_not_convert
    def fn(trace):
        v = scores_graph(trace)
        return v, tf.reduce_max(v, axis=0)
    return fn


def minmax_normalize(v, axis=1):
    """Eq. 3 per input: (v - min) / (max - min); all zeros where max == min."""
    import tensorflow as tf
    lo = tf.reduce_min(v, axis=axis, keepdims=True)
    r = tf.reduce_max(v, axis=axis, keepdims=True) - lo
    inv = tf.where(r > 0, 1.0 / tf.where(r > 0, r, tf.ones_like(r)), tf.zeros_like(r))
    return (v - lo) * inv


def threshold_grid(threshold: float, extra) -> tuple:
    return tuple(sorted(set(extra if extra is not None else REPORT_THRESHOLDS) | {threshold}))
