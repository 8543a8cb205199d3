"""The base of every criterion: its item layout and its life cycle, as a Keras ``Metric``:
parameters in ``__init__``, ``update`` (union over every input so far), ``rate``/``covered``/
``curve``/``by_layer`` (the result, at any threshold), ``reset``, ``merge``, ``get_config`` /
``from_config``, ``state`` / ``load_state``.

The rest is done by collaborators, each in its module: ``engine`` (the compiled graphs and the
chunked update: ``Criterion.engine``), ``state`` (per-item maxima and first inputs:
``Criterion._state``; the kept inputs), ``report`` (tables, uncovered items, the summary:
``Criterion.report``), ``targets`` (item values for generators: ``Criterion.targets``) and
``statefile`` (a state saved to and loaded from a file).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import InputError
from ..lazy import tf
from ..trace import fingerprint
from .engine import Engine, tracer_for, with_max
# (where the campaign and prioritize layers import them from)
from .engine import CACHE_LOCK, forward_outputs, model_cache  # noqa: F401
from .params import Interval, Params
from .report import Report
from .state import KeptInputs, MaxState
from .targets import Targets

REPORT_THRESHOLDS = (0.0, 0.25, 0.5, 0.75)


@dataclass(frozen=True)
class Segment:
    """A contiguous run of items in the flat index: one part of one layer."""
    layer: str
    kind: str
    part: str                      # e.g. "x" | "h" (contributions), "out" (neurons)
    gates: tuple
    source_layer: str              # the layer whose neurons emit the items (else: own them)
    offset: int
    shape: tuple                   # the items' array shape, e.g. (T, J) or (T, K, J)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))


class Criterion:
    """Base of every coverage criterion (see the module docstring). A subclass gives
    ``_layout`` (its items) and ``_scores_graph`` (trace -> (N, total) scores; covered above
    the threshold), and may change its collaborators: ``engine_class``, ``report_class``,
    ``targets_class``."""

    name = ""
    title = ""                      # the criterion in words, for tables (coverage.title)
    params = Params()               # the declared parameters (rnncon_core.params)
    uses_threshold = True
    threshold_from_data = False     # True: the CLI's and dashboard's default threshold is the
                                    # data set's (coverage.threshold.default_threshold)
    engine_class, report_class, targets_class = Engine, Report, Targets
    # inputs kept for report.stored_input() (the dashboard's per-input views): the first ones
    KEEP_INPUTS = 2048

    def __init__(self, model, **params):
        for key, value in self.params.check(f"criterion {self.name!r}", params).items():
            setattr(self, key, value)
        self.model = model
        self.tracer = tracer_for(model)
        self.segments: list[Segment] = self._layout()
        self.total = int(sum(s.size for s in self.segments))
        self._offsets = np.array([s.offset for s in self.segments])
        self.engine = self.engine_class(self)
        self.report = self.report_class(self)
        self.targets = self.targets_class(self)
        self.engine.attach()
        self.reset()

    # -- what subclasses provide
    def _layout(self) -> list[Segment]:
        raise NotImplementedError

    def _build(self) -> None:
        """Make the TF functions (traced on first use; see Engine.attach)."""
        self._reduce_fn = self.engine.compile(with_max(self._scores_graph))

    def _curve_grid(self) -> tuple:
        return (self.cut(None),)

    # -- life cycle
    def reset(self) -> None:
        self._state = self.engine.new_state()
        self._inputs = KeptInputs()

    def update(self, x, embedded: bool = False):
        """Add a batch of inputs to the covered set (union with every earlier input)."""
        self.engine.run(self.tracer.check_inputs(x, embedded), embedded)
        return self

    def update_with_outputs(self, x, embedded: bool = False, also=()):
        """``update(x)`` and, from the same forward pass, the model's outputs (N, classes)
        and the last step's hidden state of the last recurrent layer (N, units) (what
        ``forward_outputs`` gives), as NumPy arrays: one pass serves the coverage and the
        predictions (DeepHunter's ``fetch_function`` reads both from one run of the model).
        ``also``: criteria of the same configuration whose states take the same inputs, from
        the same pass where the criterion allows it. Returns (outputs, hidden), or None where
        the criterion's update gives no outputs (then call the model apart)."""
        if not self.engine.taps:           # graphs that also return the outputs (once)
            self.engine.attach(taps=True)
        x = self.tracer.check_inputs(x, embedded)
        outputs = self.engine.run(x, embedded, also, with_outputs=True)   # per chunk, in order
        n, chunk = int(x.shape[0]), self.engine.chunk_size()
        sizes = [min(chunk, n - start) for start in range(0, n, chunk)]
        if len(outputs) != len(sizes) or any(o is None for o in outputs):
            return None
        out = np.concatenate([o[:k] for (o, _), k in zip(outputs, sizes)])
        hid = np.concatenate([h[:k] for (_, h), k in zip(outputs, sizes)])
        return out, hid

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
        kept = self._inputs.count
        if kept < self.KEEP_INPUTS and kept == self.n_inputs:
            for arr, emb in other._inputs.parts:
                self._inputs.keep(arr, emb, self.KEEP_INPUTS)
        self._state.merge(other._state)
        return self

    def state(self) -> dict:
        """The coverage state as arrays (what ``statefile.save`` stores and ``load_state``
        takes)."""
        return self._state.arrays()

    def load_state(self, arrays: dict) -> None:
        """Replace the state by ``state()``'s arrays of a criterion of the same configuration."""
        self._state.load(arrays)

    @property
    def n_inputs(self) -> int:
        return self._state.n

    # -- the result
    def cut(self, threshold=None):
        """Scores strictly above this count as covered (the criterion's own threshold, or
        ``threshold``; 0.5 for a criterion without one)."""
        if not self.uses_threshold:
            if threshold is not None:
                raise InputError(f"{self.name} has no threshold (items are covered or not)")
            return 0.5
        t = self.threshold if threshold is None else threshold
        return Interval(0, 1).check("threshold", t)

    @property
    def covered(self) -> int:
        return self.report.covered_at(None)

    def rate(self, threshold=None) -> float:
        """covered / total at the criterion's threshold, or at any other one."""
        return self.report.covered_at(threshold) / self.total if self.total else 0.0

    def by_layer(self, threshold=None, by: str = "layer") -> pd.DataFrame:
        """One row per layer: layer, kind, total, covered, rate (``Report.by_layer``)."""
        return self.report.by_layer(threshold, by)

    def curve(self, threshold=None) -> np.ndarray:
        """Coverage after 1, 2, ..., N inputs (in the order given to update)."""
        return self._state.curve_counts(self.cut(threshold)) / max(1, self.total)

    def new_items(self, since: int) -> np.ndarray:
        """Per input given after the first ``since``: how many items it covered first (the
        growth curve's steps times the item count); reads only the first-input indices where
        the curve is the state's count (cheap however many inputs)."""
        if type(self).curve is Criterion.curve and isinstance(self._state, MaxState):
            got = self._state.new_items(self.cut(None), since)
            if got is not None:
                return got
        curve = np.asarray(self.curve(), np.float64)
        prev = np.concatenate([[curve[since - 1] if since else 0.0], curve[since:-1]])
        return (curve[since:] - prev) * max(1, self.total)

    # -- config
    def get_config(self) -> dict:
        return {"name": self.name, **{k: (list(v) if isinstance(v, tuple) else v)
                                      for k in self.params.names for v in [getattr(self, k)]}}

    @classmethod
    def from_config(cls, model, config: dict):
        params = {k: v for k, v in config.items() if k != "name"}
        return cls(model, **params)

    def __repr__(self):
        params = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.params.names)
        return f"{type(self).__name__}({params}; {self.n_inputs} inputs, rate {self.rate():.4f})"


def minmax_normalize(v, axis=1):
    """Eq. 3 per input: (v - min) / (max - min); all zeros where max == min."""
    lo = tf.reduce_min(v, axis=axis, keepdims=True)
    r = tf.reduce_max(v, axis=axis, keepdims=True) - lo
    inv = tf.where(r > 0, 1.0 / tf.where(r > 0, r, tf.ones_like(r)), tf.zeros_like(r))
    return (v - lo) * inv


def threshold_grid(threshold: float, extra) -> tuple:
    return tuple(sorted(set(extra if extra is not None else REPORT_THRESHOLDS) | {threshold}))
