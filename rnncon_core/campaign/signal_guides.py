"""Campaign guides beyond coverage: keep a mutant that moves the model somewhere new in a
signal that finds faults (docs/prioritize.md, docs/campaign.md).

Each guide cuts a signal into items, one per (predicted class, region), and a mutant covers
the one item it lands in; the loop keeps (as it does with a criterion) a mutant predicted
right that covered an item first, so for a kept mutant the class is its seed's label:

- ``gini`` / ``margin``: the mutant's DeepGini impurity (margin: 1 - the softmax margin) in
  one of ``BUCKETS`` equal buckets of its range ([0, 1 - 1/C] for gini, [0, 1] for margin):
  a mutant is kept when it reaches an uncertainty on its seed's label no mutant of that label
  reached (in practice a higher one: seeds start near 0);
- ``lsa`` / ``dsa``: surprise coverage (Kim et al., ICSE 2019: SA cut into buckets), per
  class: ``BUCKETS`` equal buckets between the lowest and highest SA of held-out training
  inputs (the model's training split: the first ``N_REFERENCE`` inputs are the reference,
  the next ``N_HELD_OUT`` set the range), plus one bucket above it;
- ``diversity``: the DeepStellar abstract state (the campaign's own abstraction of faults:
  ``components`` principal axes cut in ``cells``) of the mutant's last hidden state: a mutant
  is kept when it lands in a region of the feature space no mutant of its label reached.

A guide has the small interface the loop, Ray (``distributed``), resume and ``check`` read of
a criterion: ``update``, ``update_with_outputs``, ``new_items``, ``rate``, ``total``,
``n_inputs``, ``merge``, ``reset``, ``get_config`` / ``from_config``, ``state`` /
``load_state``; its state is, per item, the index of the first input that covered it.
"""
from __future__ import annotations

import numpy as np

from ..coverage import StateCoverage
from ..coverage.base import forward_outputs, tracer_for
from ..data import load_dataset
from ..errors import InputError
from ..prioritize import signals
from ..prioritize.signals import probabilities
from ..trace import check_model_inputs
from ..zoo import model_datasets, output_head

SIGNAL_GUIDES = ("gini", "margin", "lsa", "dsa", "diversity")
BUCKETS = 20
N_REFERENCE, N_HELD_OUT = 1500, 500


class SignalGuide:
    """Base: items (class, region); per item the first input that covered it."""

    name = ""
    KEEP_INPUTS = 0
    title = ""

    def __init__(self, model, **config):
        self.model = model
        self.config = dict(config)
        self.tracer = tracer_for(model)
        head = output_head(model).require_classifier("a campaign guide")
        self.classes = int(head.classes or 2)
        self._logits = head.kind == "logits"
        self.regions = self._setup()
        self.total = self.classes * self.regions
        self.reset()

    # -- what a subclass gives
    def _setup(self) -> int:
        """Prepare the signal; returns the number of regions per class."""
        raise NotImplementedError

    def _regions(self, probs, hidden) -> np.ndarray:
        """(N,) int region of each input (0 .. regions - 1)."""
        raise NotImplementedError

    # -- the state
    def reset(self) -> None:
        self.first = np.full(self.total, -1, np.int64)
        self.n = 0

    @property
    def n_inputs(self) -> int:
        return self.n

    def rate(self, threshold=None) -> float:
        return float(np.count_nonzero(self.first >= 0) / self.total) if self.total else 0.0

    def _absorb(self, items: np.ndarray) -> None:
        new = self.first[items] < 0
        if new.any():
            uniq, at = np.unique(items[new], return_index=True)
            self.first[uniq] = self.n + np.flatnonzero(new)[at]
        self.n += len(items)

    def new_items(self, since: int) -> np.ndarray:
        """Per input given after the first ``since``: the items it covered first (0 or 1)."""
        hit = self.first[self.first >= since] - since
        return np.bincount(hit, minlength=max(0, self.n - since)).astype(np.float64)

    def merge(self, other: "SignalGuide") -> "SignalGuide":
        """The union with ``other``'s inputs, taken as coming after this one's."""
        if type(other) is not type(self) or other.get_config() != self.get_config():
            raise InputError(f"can only merge a {self.name} guide state of the same "
                             f"configuration")
        take = (self.first < 0) & (other.first >= 0)
        self.first[take] = other.first[take] + self.n
        self.n += other.n
        return self

    def state(self) -> dict:
        return {"first": self.first, "n": np.int64(self.n)}

    def load_state(self, arrays: dict) -> None:
        self.first = np.asarray(arrays["first"], np.int64).copy()
        self.n = int(arrays["n"])

    def get_config(self) -> dict:
        return {"name": self.name, **self.config}

    @classmethod
    def from_config(cls, model, config: dict):
        return cls(model, **{k: v for k, v in config.items() if k != "name"})

    # -- inputs
    def _probs(self, out) -> np.ndarray:
        out = np.asarray(out, np.float64)
        if self._logits:
            e = np.exp(out - out.max(axis=1, keepdims=True))
            out = e / e.sum(axis=1, keepdims=True)
        return probabilities(out)

    def _items(self, out, hidden) -> np.ndarray:
        probs = self._probs(out)
        region = np.clip(self._regions(probs, hidden), 0, self.regions - 1)
        return probs.argmax(1) * self.regions + region

    def update_with_outputs(self, x, embedded: bool = False, also=()):
        """Add x; returns (model outputs, last hidden state) of the one traced pass (as
        ``Criterion.update_with_outputs``); ``also``: guides of the same configuration that
        take the same inputs."""
        out, hidden = forward_outputs(self.model)(x)
        items = self._items(out, hidden)
        for g in (self, *also):
            g._absorb(items)
        return out, hidden

    def update(self, x, embedded: bool = False):
        self.update_with_outputs(x, embedded)
        return self


def _edges(lo: float, hi: float) -> np.ndarray:
    return np.linspace(lo, hi, BUCKETS + 1)[1:-1]


class UncertaintyGuide(SignalGuide):
    """gini / margin in BUCKETS buckets of their range, per class."""

    def _setup(self) -> int:
        top = 1.0 - 1.0 / self.classes if self.name == "gini" else 1.0
        self._cuts = _edges(0.0, top)
        return BUCKETS

    def _regions(self, probs, hidden) -> np.ndarray:
        return np.digitize(signals.UNCERTAINTY_FN[self.name](probs), self._cuts)


class GiniGuide(UncertaintyGuide):
    name = "gini"
    title = "DeepGini impurity buckets per class"


class MarginGuide(UncertaintyGuide):
    name = "margin"
    title = "Softmax margin buckets per class"


def _training_split(model):
    """The first N_REFERENCE + N_HELD_OUT inputs of the training split of the data set the
    model reads, or an InputError."""
    fits = model_datasets(None, model)
    if not fits:
        raise InputError("the lsa / dsa guides profile the model's training split: this model "
                         "fits no known data set (use gini, margin or diversity)")
    x = load_dataset(fits[0]).x_train[:N_REFERENCE + N_HELD_OUT]
    return check_model_inputs(model, x, "the training inputs")


class SurpriseGuide(SignalGuide):
    """Surprise coverage: LSA / DSA in BUCKETS buckets of the held-out training range plus
    one above it, per class."""

    def _setup(self) -> int:
        x = _training_split(self.model)
        out, hid = signals.last_hidden(self.model, x)
        pred = self._probs(out).argmax(1)
        k = min(N_REFERENCE, len(x) - max(1, len(x) // 4))
        self._sa = signals.Surprise(hid[:k], pred[:k])
        held = self._score(hid[k:], pred[k:])
        held = held[np.isfinite(held)]
        lo, hi = (float(held.min()), float(held.max())) if len(held) else (0.0, 1.0)
        self._cuts = np.append(_edges(lo, hi if hi > lo else lo + 1.0), hi)
        return BUCKETS + 1

    def _score(self, hidden, pred) -> np.ndarray:
        return self._sa.lsa(hidden, pred) if self.name == "lsa" else self._sa.dsa(hidden, pred)

    def _regions(self, probs, hidden) -> np.ndarray:
        s = self._score(hidden, probs.argmax(1))
        return np.digitize(np.where(np.isnan(s), np.inf, s), self._cuts)


class LSAGuide(SurpriseGuide):
    name = "lsa"
    title = "Likelihood-based surprise coverage per class"


class DSAGuide(SurpriseGuide):
    name = "dsa"
    title = "Distance-based surprise coverage per class"


class DiversityGuide(SignalGuide):
    """The abstract state (DeepStellar) of the last hidden state, per class."""

    name = "diversity"
    title = "New abstract states of the last hidden state per class"

    def _setup(self) -> int:
        comp, cells = self.config.get("components", 3), self.config.get("cells", 10)
        self._abs = StateCoverage(self.model, components=comp, cells=cells,
                                  profile_inputs="all")
        return self._abs.region_count()

    def _regions(self, probs, hidden) -> np.ndarray:
        return self._abs.regions_of_hidden(hidden)


GUIDES = {g.name: g for g in (GiniGuide, MarginGuide, LSAGuide, DSAGuide, DiversityGuide)}


def make_signal_guide(name: str, model, params: dict | None):
    """The guide ``name`` of SIGNAL_GUIDES (diversity: the campaign's default abstraction,
    3 components of 10 cells)."""
    if params:
        raise InputError(f"guide {name} takes no guide parameters")
    return GUIDES[name](model)
