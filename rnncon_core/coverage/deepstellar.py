"""DeepStellar's criteria (Du et al., ESEC/FSE 2019) over an abstract model of hidden states,
ported from its code at github.com/xiaoningdu/deepstellar.

The abstract model of one recurrent layer (default: the last one) is built from the training
profile (mnist_demo/mnist_lstm.py ``profile_train_data``: by default only the training inputs
the model classifies correctly, ``profile_inputs="correct"``; ``"all"``: every one, our earlier
choice). Abstraction/StateAbstraction.py: the hidden states h_t of every profiled input and
step are projected on their first ``components`` principal axes (``pca_fit``: PCA over all
(input, step) states); each component's training range [lo_c, hi_c] is cut into ``cells``
equal cells, cell floor((p − lo_c)/(hi_c − lo_c)·cells) (``data_transform``: the training
maximum lands in a cell of its own, index ``cells``); a value outside the range lands in a
cell < 0 or > cells. An abstract state is the vector of cells.

Abstraction/DTMCGraph.py, Abstraction/GraphWrapper.py and coverage.py:

- Major states: the states some profiled input visits at some step, plus DeepStellar's fake
  initial state (``DTMCGraph.__init__``: every training sequence starts there and no test
  input can reach it). Transitions: the pairs (state at t, state at t+1) some profiled input
  makes, plus one transition from the fake state to each state a profiled input starts in
  (``add_ordered_transitions``), never coverable either. ``fake_initial=False`` leaves the
  fake state and its transitions out (our earlier choice).
- Weights (``get_index_weight_dic``): a state's number of visits (as a transition's
  destination: every step, the first included) over all visits (inputs × steps); a
  transition's number of occurrences over all of them, the fake ones included (inputs ×
  steps; without the fake state: inputs × (steps − 1)). The fake state has weight 0.
- state: share of major states some test input visits. A test input's first state is never
  counted (``to_cover_major_states`` starts at its second state); ``first_state=True`` counts
  it (our earlier choice).
- state-boundary (k-step boundary coverage, ``extend_to_k_step`` / ``to_cover_k_step``):
  the states that are not major and lie within Manhattan distance ``boundary_steps`` (in
  cells) of a major state (the fake one excepted); the share visited (first state as above).
- state-weighted: the summed weight of the major states visited.
- transition: share of the transitions some test input makes (``to_cover_transitions``: every
  pair of consecutive test states).
- transition-weighted: the summed weight of those transitions.

DeepStellar packs a state into ``bits`` bits per component (Abstraction/Coder.py): cells out
of that range can collide there; here every cell is kept apart, as far out as an int64 key
holds (``_reach``: for 3 components of 10 cells, 64 training ranges either side); nothing is
clipped near the range. DeepStellar's PCA is scikit-learn's: axes are signed as
scikit-learn >= 1.5 signs them (profile.py).
"""
from __future__ import annotations

from itertools import product

import numpy as np
import pandas as pd

from ..errors import InputError
from ..lazy import tf
from .base import Segment
from .params import PROFILE_PATH, Bool, IntRange, Param, Params, Text, profile_inputs
from .profile import MAX_COMPONENTS, ProfiledCriterion, ProfiledEngine
from .targets import Targets


class _AbstractEngine(ProfiledEngine):
    def elements_per_input(self) -> int:
        return max(1, self.crit.total) * 4


class _AbstractTargets(Targets):
    def dead_items(self) -> np.ndarray:
        """The fake initial state and its transitions: no input reaches them."""
        return np.flatnonzero(self.crit._items < 0)


class _AbstractModel(ProfiledCriterion):
    engine_class, targets_class = _AbstractEngine, _AbstractTargets
    uses_threshold = False
    weighted = False
    margin = 0                  # cells around the training range that are items (boundary)
    params = Params(
        Param("layer", None, Text(layers="recurrent", what="a recurrent layer"),
              "The recurrent layer abstracted (default: the last one)."),
        Param("components", 3, IntRange(1, MAX_COMPONENTS), "Principal axes of the abstract "
                                                            "state."),
        Param("cells", 10, IntRange(1, 1000), "Cells each component's training range is cut "
                                              "into."),
        Param("fake_initial", True, Bool(), "Count DeepStellar's fake initial state and its "
                                            "transitions (never coverable) in the totals and "
                                            "weights.", level="more"),
        Param("first_state", False, Bool(), "Count a test input's first state (DeepStellar "
                                            "never does).", level="more"),
        profile_inputs("correct"), PROFILE_PATH)

    def _layout(self) -> list[Segment]:
        rec = self._recurrent_specs("a recurrent layer")
        names = [s.name for s in rec]
        if self.layer is not None and self.layer not in names:
            raise InputError(f"no recurrent layer {self.layer!r}; choose one of "
                             f"{', '.join(names)}")
        self._spec = next(s for s in rec if s.name == (self.layer or names[-1]))
        prof = self._load_profile()
        name = self._spec.name
        proj = prof[f"proj@{name}"]
        if self.components > proj.shape[2]:
            raise InputError(f"components must be at most {proj.shape[2]} for layer {name}")
        k = self.components
        self._mean = prof[f"pca_mean@{name}"]
        self._axes = prof[f"pca_axes@{name}"][:k]
        p = proj[:, :, :k]
        self._lo, self._hi = p.min(axis=(0, 1)), p.max(axis=(0, 1))
        r = self._hi - self._lo
        # StateAbstraction.get_quantization_matrix / data_transform's arithmetic: a float32
        # 1 / range times the cell count in float64, times the float32 offset p − lo
        inv = np.where(r > 0, np.float32(1) / np.where(r > 0, r, np.float32(1)), 0)
        self._scale = inv.astype(np.float32).astype(np.float64) * self.cells
        # every cell a component can take, also far outside the training range, keeps its
        # own digit: the widest base whose pair keys (transitions) fit in an int64
        self._base = int(2.0 ** (62 / (2 * k)))
        while float(self._base) ** (2 * k) >= 2.0 ** 62:
            self._base -= 1
        if self._base < self.cells + 2 * self.margin + 3:
            raise InputError(f"{k} components of {self.cells} cells are too many to encode; "
                             f"use fewer")
        self._offset = (self._base - self.cells - 1) // 2     # digit of cell 0
        train = self._keys_np(self._cells_np(p))                      # (N, T) int64
        n, steps = train.shape
        self._states, freq = np.unique(train, return_counts=True)
        self._state_w = freq / (n * steps)
        self._trans, tfreq = np.unique(self._pair_keys(train), return_counts=True)
        self._trans_w = tfreq / (n * steps if self.fake_initial else n * (steps - 1))
        if self.fake_initial:          # the fake state (key −1) and its transitions (< 0)
            starts, sfreq = np.unique(train[:, 0], return_counts=True)
            self._fake_states = (np.array([-1]), np.zeros(1))
            self._fake_trans = (starts - self._base ** k, sfreq / (n * steps))
        self._items, self._weights = self._item_keys()
        shape = (len(self._items),)
        return [Segment(name, self._spec.kind, self.part, (), name, 0, shape)]

    # -- the abstraction (NumPy for the training profile, TF below for inputs)
    def _cells_np(self, p):
        c = np.floor((p - self._lo).astype(np.float32).astype(np.float64) * self._scale)
        return np.clip(c, *self._reach()).astype(np.int64)

    def _reach(self) -> tuple[int, int]:
        """The cells a key can hold: -offset .. base - 1 - offset (e.g. 3 components of 10
        cells: -639 .. 650, 64 training ranges either side; only a state farther out shares
        the key of the last cell). DeepStellar packs cells into ``bits`` bits, where cells
        outside 0 .. 2^bits - 1 collide with others; it does not clip."""
        return -self._offset, self._base - 1 - self._offset

    def _keys_np(self, c):
        place = self._base ** np.arange(self.components, dtype=np.int64)
        return ((c + self._offset) * place).sum(axis=-1)

    def _pair_keys(self, keys):
        return keys[:, :-1] * self._base ** self.components + keys[:, 1:]

    @staticmethod
    def _with(keys, weights, extra):
        """Items and weights with the fake ones (sorted by key)."""
        k = np.concatenate([extra[0], keys])
        w = np.concatenate([extra[1], weights])
        order = np.argsort(k, kind="stable")
        return k[order], w[order]

    def _decode(self, key):
        out = []
        for _ in range(self.components):
            key, r = divmod(int(key), self._base)
            out.append(r - self._offset)
        return out

    def _keys_graph(self, tr):
        """(N, T) int64 keys of every input's abstract states."""
        return self._keys_of(tr.layers[self._spec.name].h)

    def _keys_of(self, h):
        """(N, T) keys of hidden states h (N, T, units) of the abstracted layer."""
        p = tf.einsum("ntu,ku->ntk", h - self._mean, tf.constant(self._axes))
        diff = tf.cast(p - tf.constant(self._lo), tf.float64)
        c = tf.floor(diff * tf.constant(self._scale, tf.float64))
        lo, hi = self._reach()
        c = tf.cast(tf.clip_by_value(c, float(lo), float(hi)), tf.int64)
        place = tf.constant(self._base ** np.arange(self.components, dtype=np.int64))
        return tf.reduce_sum((c + self._offset) * place, axis=-1)

    def _visited(self, keys, items):
        """(N, len(items)) 1.0 where an input's keys (N, M) include the item key."""
        table = tf.constant(items)
        n_items = len(items)
        pos = tf.reshape(tf.searchsorted(table[None], tf.reshape(keys, (1, -1)), side="left"),
                         tf.shape(keys))
        safe = tf.minimum(pos, n_items - 1)
        hit = tf.equal(tf.gather(table, safe), keys)
        rows = tf.broadcast_to(tf.range(tf.shape(keys)[0], dtype=pos.dtype)[:, None],
                               tf.shape(pos))
        idx = tf.stack([tf.boolean_mask(rows, hit), tf.boolean_mask(pos, hit)], axis=1)
        out = tf.zeros((tf.shape(keys)[0], n_items), tf.float32)
        return tf.tensor_scatter_nd_max(out, idx, tf.ones(tf.shape(idx)[:1], tf.float32))

    def _scores_graph(self, tr):
        keys = self._keys_graph(tr)
        if self.part == "transition":
            keys = self._pair_keys(keys)
        elif not self.first_state:
            keys = keys[:, 1:]
        if len(self._items) == 0:
            return tf.zeros((tf.shape(keys)[0], 0), tf.float32)
        return self._visited(keys, self._items)

    # -- weighted rates
    def rate(self, threshold=None) -> float:
        if not self.weighted:
            return super().rate(threshold)
        return float(self._weights[self.report.covered_mask(threshold)].sum())

    def curve(self, threshold=None) -> np.ndarray:
        if not self.weighted:
            return super().curve(threshold)
        self.cut(threshold)
        first = self._state.first[self._state.grid[0]]
        hit = first >= 0
        return np.cumsum(np.bincount(first[hit], weights=self._weights[hit],
                                     minlength=self.n_inputs))

    def by_layer(self, threshold=None, by: str = "layer") -> pd.DataFrame:
        df = super().by_layer(threshold, by)
        if self.weighted:
            df["rate"] = self.rate(threshold)
        return df

    def abstract_states(self, x, embedded: bool = False) -> np.ndarray:
        """(N, T) int64: every input's abstract state at every step, one key per vector of
        cells (``decode_state`` gives the cells back); the state is not touched."""
        if getattr(self, "_states_fn", None) is None:
            self._states_fn = self.engine.compile(self._keys_graph)
        return self._states_fn(self.tracer.check_inputs(x, embedded), embedded).numpy()

    def states_of_hidden(self, h) -> np.ndarray:
        """(N,) int64: the abstract state of each hidden state h (N, units) of the abstracted
        layer (e.g. the last step's, from ``Criterion.update_with_outputs``): the keys
        ``abstract_states`` gives for the same states; the state is not touched."""
        if getattr(self, "_hidden_fn", None) is None:
            u = int(self._spec.units)
            self._hidden_fn = tf.function(lambda v: self._keys_of(v[:, None, :])[:, 0],
                                          input_signature=[tf.TensorSpec((None, u),
                                                                         tf.float32)])
        return self._hidden_fn(tf.constant(np.asarray(h, np.float32))).numpy()

    def region_count(self) -> int:
        """How many regions ``regions_of_hidden`` tells apart: (cells + 3) ** components."""
        return (self.cells + 3) ** self.components

    def regions_of_hidden(self, h) -> np.ndarray:
        """(N,) int64 dense region of each hidden state (N, units) of the abstracted layer, in
        [0, region_count()): its abstract state with every cell clipped to one cell either
        side of the training range (a finite set of regions for a guide; the abstract states
        themselves, ``states_of_hidden``, keep every cell apart)."""
        keys = self.states_of_hidden(h)
        k = np.arange(self.components, dtype=np.int64)
        cells = (keys[:, None] // self._base ** k) % self._base - self._offset
        near = np.clip(cells, -1, self.cells + 1) + 1
        return (near * (self.cells + 3) ** k).sum(axis=1)

    def decode_state(self, key: int) -> list[int]:
        """The cells (one per component) of an abstract state key."""
        return self._decode(key)

    def describe(self, index: int) -> dict:
        seg, (i,) = self.report.segment_of(index)
        key = int(self._items[i])
        d = {"layer": seg.layer, "kind": seg.kind, "step": None, "gate": None,
             "part": self.part, "unit": None, "source": None,
             "weight": float(self._weights[i]) if self._weights is not None else None}
        if self.part == "transition":
            src, dst = divmod(key, self._base ** self.components)
            d.update({"from": "fake initial" if src < 0 else self._decode(src),
                      "to": self._decode(dst)})
        else:
            d["cells"] = "fake initial" if key < 0 else self._decode(key)
        return d



class StateCoverage(_AbstractModel):
    """DeepStellar's basic state coverage."""
    name = "state"
    part = "state"

    def _item_keys(self):
        if self.fake_initial:
            return self._with(self._states, self._state_w, self._fake_states)
        return self._states, self._state_w


class WeightedStateCoverage(StateCoverage):
    """DeepStellar's weighted state coverage (training visit frequencies as weights)."""
    name = "state-weighted"
    weighted = True


class StateBoundaryCoverage(_AbstractModel):
    """DeepStellar's k-step state boundary coverage."""
    name = "state-boundary"
    part = "boundary"
    params = _AbstractModel.params.add(
        Param("boundary_steps", 1, IntRange(1, 10), "Manhattan distance (cells) around the "
                                                    "major states."))

    @property
    def margin(self):
        return self.boundary_steps

    def _item_keys(self):
        k, b = self.components, self.boundary_steps
        moves = np.array([m for m in product(range(-b, b + 1), repeat=k)
                          if 0 < sum(map(abs, m)) <= b], np.int64)
        place = self._base ** np.arange(k, dtype=np.int64)
        major = np.array([self._decode(s) for s in self._states], np.int64)     # (S, k)
        near = (major[:, None, :] + moves[None]).reshape(-1, k)
        keys = ((near + self._offset) * place).sum(axis=1)
        return np.setdiff1d(np.unique(keys), self._states), None


class TransitionCoverage(_AbstractModel):
    """DeepStellar's basic transition coverage."""
    name = "transition"
    part = "transition"

    def _item_keys(self):
        if self.fake_initial:
            return self._with(self._trans, self._trans_w, self._fake_trans)
        return self._trans, self._trans_w


class WeightedTransitionCoverage(TransitionCoverage):
    """DeepStellar's weighted transition coverage."""
    name = "transition-weighted"
    weighted = True
