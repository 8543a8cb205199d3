"""A criterion's state as a value: per item the largest score so far and the first input above
each threshold of a grid (``MaxState``), and the first inputs given (``KeptInputs``)."""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..lazy import tf


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

    def add_batch(self, scores, batch_max: np.ndarray) -> None:
        """add() from the batch's scores (B, total), a tf.Tensor."""

        def first_in_batch(t, cols):
            sub = tf.gather(scores, cols, axis=1) if cols.size < self.total else scores
            return tf.argmax(tf.cast(sub > t, tf.int8), axis=0, output_type=tf.int32).numpy()
        self.add(batch_max, int(scores.shape[0]), first_in_batch)

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

    def max_values(self) -> np.ndarray:
        return self.max

    def curve_counts(self, t: float) -> np.ndarray:
        """Items covered at t after 1, 2, ..., n inputs."""
        if t not in self.first:
            raise InputError(f"the growth curve is kept at thresholds "
                             f"{', '.join(map(str, self.grid))}; make the criterion "
                             f"with curve_thresholds including {t}")
        first = self.first[t]
        hits = np.bincount(first[first >= 0], minlength=self.n)
        return np.cumsum(hits)

    def new_items(self, t: float, since: int) -> np.ndarray | None:
        """Per input after the first ``since``: the items it lifted past t first (None where t
        is not on the grid); reads only the first-input indices."""
        if t not in self.first:
            return None
        first = self.first[t]
        hit = first[first >= since] - since
        return np.bincount(hit, minlength=max(0, self.n - since)).astype(np.float64)


class KeptInputs:
    """The first inputs given to update, as validated (the dashboard's per-input views)."""

    def __init__(self):
        self.parts: list = []          # (array, embedded) in the order given
        self.count = 0

    def keep(self, arr, embedded: bool, limit: int) -> None:
        """Keep arr's first inputs, up to ``limit`` inputs in all."""
        arr = arr[:max(0, limit - self.count)]
        if len(arr):
            self.parts.append((arr, embedded))
            self.count += len(arr)

    def get(self, index: int, n_inputs: int):
        """The index-th input given (of ``n_inputs``), and whether it was embedded."""
        if not (0 <= index < n_inputs):
            raise InputError(f"input_index {index} out of range: {n_inputs} inputs so far")
        for arr, embedded in self.parts:
            if index < len(arr):
                return arr[index:index + 1], embedded
            index -= len(arr)
        raise AssertionError("unreachable")
