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
FAULT_KEYS = ("x", "root", "label", "pred", "state", "op", "batch", "calls", "seconds",
              "valid", "reason", "feature")


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
    """Distinct faults: one per (true label, predicted label, abstract state, validity): a
    valid fault counts even where an invalid one of the same state was found first. The
    valid ones are counted apart (``n_valid``, ``valid_pairs``, ``valid_roots``)."""

    def __init__(self):
        self.rows = Rows()
        self.keys: set[tuple[int, int, int, bool]] = set()
        self.total = 0              # every faulty mutant seen, distinct or not
        self.n_valid = 0
        self.valid_pairs: set[tuple[int, int]] = set()
        self.valid_roots: set[int] = set()

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def pairs(self) -> set[tuple[int, int]]:
        return {(t, p) for t, p, _, _ in self.keys}

    @property
    def states(self) -> int:
        """Distinct (true, predicted, abstract state) keys, valid or not (the raw count)."""
        return len({k[:3] for k in self.keys})

    def new_mask(self, label, pred, state, valid=None) -> np.ndarray:
        """Which candidates are new distinct faults (the first of equal keys in the batch)."""
        out = np.zeros(len(label), bool)
        seen = set(self.keys)
        valid = np.ones(len(label), bool) if valid is None else np.asarray(valid, bool)
        for i, key in enumerate(zip(label.tolist(), pred.tolist(), state.tolist(),
                                    valid.tolist())):
            if key not in seen:
                seen.add(key)
                out[i] = True
        return out

    def known_valid(self, label, pred, state) -> np.ndarray:
        """Which candidates have a valid fault of their key already (nothing new to check)."""
        return np.array([k + (True,) in self.keys for k in
                         zip(label.tolist(), pred.tolist(), state.tolist())], bool)

    def add(self, **cols) -> None:
        n = len(cols["label"])
        if "valid" not in cols:        # rows of campaigns before validity: not checked
            cols = {**cols, "valid": np.ones(n, bool), "reason": np.full(n, "", "<U120")}
        self.rows.append(**cols)
        self.know(cols["label"], cols["pred"], cols["state"], cols["valid"])
        v = np.asarray(cols["valid"], bool)
        self.n_valid += int(v.sum())
        self.valid_pairs.update(zip(np.asarray(cols["label"])[v].tolist(),
                                    np.asarray(cols["pred"])[v].tolist()))
        self.valid_roots.update(np.asarray(cols["root"])[v].tolist())

    def know(self, label, pred, state, valid=None) -> None:
        """These keys are found (by this set's rows, or by another Ray worker's)."""
        valid = np.ones(len(label), bool) if valid is None else np.asarray(valid, bool)
        self.keys.update(zip(np.asarray(label).tolist(), np.asarray(pred).tolist(),
                             np.asarray(state).tolist(), valid.tolist()))

    def load(self, arrays: dict) -> None:
        self.rows = Rows()
        self.keys = set()
        self.n_valid = 0
        self.valid_pairs, self.valid_roots = set(), set()
        if arrays and len(arrays.get("label", ())):
            self.add(**arrays)
