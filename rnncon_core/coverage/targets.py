"""What generators optimize (``Criterion.targets``): the values of single items before the
threshold, differentiable w.r.t. the inputs, and the items no input can cover. A criterion
with item values compiles ``_values_fn`` in its ``_build`` (trace, indices -> (N, k)); one whose
values need more gives its own subclass (``targets_class``: RConC, DeepStellar)."""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..lazy import tf


class Targets:
    """Item values of one criterion (see the module docstring)."""

    graph_safe = True          # graph_values works inside a tf.function

    def __init__(self, crit):
        self.crit = crit

    def check_indices(self, indices):
        """Flat item indices as an int32 tensor, or an InputError."""
        total = self.crit.total
        idx = np.asarray(indices, dtype=np.int64).ravel()
        if idx.size and (idx.min() < 0 or idx.max() >= total):
            raise InputError(f"indices must lie in [0, {total}); got {idx.min()}..{idx.max()}")
        return tf.constant(idx, tf.int32)

    def item_values(self, x, indices, embedded: bool = False):
        """(N, len(indices)) the items' scores before the threshold (normalized contributions,
        scaled neuron outputs, ...), differentiable w.r.t. float x (or w.r.t. embedding vectors
        with embedded=True). Inputs are checked first."""
        crit = self.crit
        if getattr(crit, "_values_fn", None) is None:
            raise InputError(f"{crit.name} has no differentiable item values")
        x = crit.tracer.check_inputs(x, embedded)
        return crit._values_fn(x, embedded, self.check_indices(indices))

    def graph_values(self, x, indices, embedded: bool = False):
        """item_values for code inside a tf.function: no Python-side checks (give float32
        inputs of the model's shape and int indices). Where the criterion cannot run in a
        graph (``graph_safe`` False) or when called eagerly, it is item_values."""
        if not self.graph_safe or tf.executing_eagerly():
            return self.item_values(x, indices, embedded)
        return self.crit._values_fn(x, embedded, tf.cast(indices, tf.int32))

    def graph_objective(self, x, indices, embedded: bool = False):
        """What coverage-guided generation ascends (by default graph_values)."""
        return self.graph_values(x, indices, embedded)

    def row_values(self, x, union, pos, objective: bool = False, embedded: bool = False):
        """(N, k): input n's values of its own items union[pos[n]] (a generator's per-seed
        targets), those of graph_objective with ``objective``, else of graph_values (an eager
        call checks its inputs as item_values). By default every union item's values, gathered;
        a subclass may compute the rows' own items only."""
        v = (self.graph_objective if objective else self.graph_values)(x, union, embedded)
        return tf.gather(v, pos, axis=1, batch_dims=1)

    def dead_items(self) -> np.ndarray:
        """Items no input can cover (no target for generation); none by default."""
        return np.zeros(0, np.int64)
