"""The seed queue and the distinct faults of a campaign (arrays that grow; saved as values).

Queue selection follows DeepHunter's probability schedule (``lib/queue.py``,
``FuzzQueue.prob_next`` and ``fuzzer_handler`` in github:Shimmer93/Deephunter-backup): an entry
picked ``k`` times is chosen with weight ``max(p_min, p_init - k / gamma)`` (their Eq. 3,
REG_INIT_PROB 0.8, REG_MIN 0.3, REG_GAMMA 5), times ``1 + log(1 + gain)`` where gain is how
many of the guide's items the entry covered first when it was kept (our addition: the guide's
gain steers the queue; it is 0 for every entry of the unguided baseline). DeepHunter walks the
queue in order and tosses a coin per entry; we draw the batch's parents at once with those
weights (one random stream, so a fixed seed gives the same campaign).
"""
from __future__ import annotations

import numpy as np

ENTRY_KEYS = ("x", "ref", "root", "label", "shifted", "gain", "depth", "parent")
FAULT_KEYS = ("x", "root", "label", "pred", "state", "op", "batch", "calls", "seconds")


class Rows:
    """Named columns that grow by appending (amortized doubling), read as arrays."""

    def __init__(self):
        self.cols: dict[str, np.ndarray] = {}
        self.n = 0

    def append(self, **cols) -> None:
        m = len(next(iter(cols.values())))
        if m == 0:
            return
        for k, v in cols.items():
            v = np.asarray(v)
            buf = self.cols.get(k)
            if buf is None:
                buf = np.zeros((max(64, 2 * m),) + v.shape[1:], v.dtype)
            elif self.n + m > len(buf):
                grown = np.zeros((max(2 * len(buf), self.n + m),) + buf.shape[1:], buf.dtype)
                grown[:self.n] = buf[:self.n]
                buf = grown
            buf[self.n:self.n + m] = v
            self.cols[k] = buf
        self.n += m

    def __getitem__(self, key: str) -> np.ndarray:
        return self.cols[key][:self.n]

    def __len__(self) -> int:
        return self.n

    def arrays(self, start: int = 0, stop: int | None = None) -> dict[str, np.ndarray]:
        stop = self.n if stop is None else stop
        return {k: v[start:stop] for k, v in self.cols.items()}

    def nbytes(self) -> int:
        return int(sum(v.nbytes for v in self.cols.values()))


class SeedQueue:
    """Entries (input, reference, root seed, label, ...) and how often each was picked."""

    def __init__(self, p_init: float = 0.8, p_min: float = 0.3, gamma: float = 5.0,
                 capacity: int = 50_000):
        self.rows = Rows()
        self.picks = np.zeros(0, np.int64)
        self.p_init, self.p_min, self.gamma, self.capacity = p_init, p_min, gamma, capacity

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def full(self) -> bool:
        return len(self) >= self.capacity

    def add(self, **cols) -> int:
        """Append entries (as many as fit); returns how many were added."""
        room = self.capacity - len(self)
        m = min(room, len(cols["x"]))
        if m <= 0:
            return 0
        self.rows.append(**{k: np.asarray(v)[:m] for k, v in cols.items()})
        self.picks = np.concatenate([self.picks, np.zeros(m, np.int64)])
        return m

    def weights(self) -> np.ndarray:
        decay = np.maximum(self.p_min, self.p_init - self.picks / self.gamma)
        return decay * (1.0 + np.log1p(np.maximum(self.rows["gain"], 0.0)))

    def pick(self, rng: np.random.Generator, k: int, scale=None) -> np.ndarray:
        """k entries, drawn by weight (times ``scale`` per entry, when given; without repeats
        while the queue is large enough)."""
        w = self.weights() if scale is None else self.weights() * scale
        idx = rng.choice(len(w), size=k, replace=len(w) < k, p=w / w.sum())
        np.add.at(self.picks, idx, 1)
        return np.asarray(idx, np.int64)


class FaultSet:
    """Distinct faults: one per (true label, predicted label, abstract state)."""

    def __init__(self):
        self.rows = Rows()
        self.keys: set[tuple[int, int, int]] = set()
        self.total = 0              # every faulty mutant seen, distinct or not

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def pairs(self) -> set[tuple[int, int]]:
        return {(t, p) for t, p, _ in self.keys}

    def new_mask(self, label, pred, state) -> np.ndarray:
        """Which candidates are new distinct faults (the first of equal keys in the batch)."""
        out = np.zeros(len(label), bool)
        seen = set(self.keys)
        for i, key in enumerate(zip(label.tolist(), pred.tolist(), state.tolist())):
            if key not in seen:
                seen.add(key)
                out[i] = True
        return out

    def add(self, **cols) -> None:
        self.rows.append(**cols)
        self.know(cols["label"], cols["pred"], cols["state"])

    def know(self, label, pred, state) -> None:
        """These keys are found (by this set's rows, or by another Ray worker's)."""
        self.keys.update(zip(np.asarray(label).tolist(), np.asarray(pred).tolist(),
                             np.asarray(state).tolist()))

    def load(self, arrays: dict) -> None:
        self.rows = Rows()
        self.keys = set()
        if arrays and len(arrays.get("label", ())):
            self.add(**arrays)
