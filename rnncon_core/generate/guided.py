"""Coverage-guided generation: RNNCon-Test (Algorithm 2), DeepXplore's NC objective, RNN-Test.

All three pick, per seed, k items (contributions, neurons, hidden-state units) that are not
activated yet and ascend one joint objective: DeepXplore's obj_joint in the one-model form of
DLFuzz and RNN-Test (Guo et al.; RNNCon-Test's generation is "similar to" theirs, §7):

    obj(x) = lambda_pred * prediction_term(x) + lambda_cov * (sum of the k items' values)

``prediction_term``: the mean logit of the ``TOP_K_OTHERS`` most likely other classes minus the
seed class's logit (DLFuzz's objective on the "before_softmax" layer); the items' values are
their normalized values (``criterion.targets.graph_objective``). ``lambda_pred=0`` is Algorithm 2 as its
text reads (the contribution alone as the loss). RNN-Test's coverage weight is ``lambda_state``.

"Not activated yet" (Algorithm 2's C_all minus C(X)): with ``pool="set"`` X is the whole seed
set (``criterion.report.uncovered(layer)`` after ``update``: the paper's meaning); with
``pool="seed"`` X is the seed itself (the items whose value on that seed is at most the
threshold). ``pool="auto"`` (default) takes the set pool wherever the seed set leaves at least
k items uncovered, else the seed's own; the run's summary says which (``pool``).

Targets: ``"random"`` (any layer), a layer name (e.g. ``lstm_1``), or ``"dense"``.
"""
from __future__ import annotations

import json

import numpy as np

from ..coverage import default_threshold, get_criterion
from ..coverage.rconc import ContributionCoverage
from ..errors import InputError
from ..lazy import tf
from ..params import Bool, IntRange, Interval, OneOf, Param, Params, Text
from ..trace import Tracer
from .base import (TOP_K_OTHERS, BatchOutput, GradientGenerator, margin_term,  # noqa: F401
                   prediction_term, shared)

# the prediction term's weight for rconc and nc, chosen on seeds no report uses
# (reports/generation/NOTES.md: mnist-lstm, 64 held-out seeds, every weight tried)
DEFAULT_LAMBDA_PRED = 0.03
LAMBDA_PRED = Param("lambda_pred", DEFAULT_LAMBDA_PRED, Interval(0.0, 1e3),
                    "Weight of the prediction term (other classes' logits minus the seed "
                    "class's) beside the coverage term; 0: the coverage term alone.",
                    level="more")


class CoverageGuided(GradientGenerator):
    """Gradient ascent on the normalized values of k not-yet-activated items per seed."""

    criterion_name = ""
    params = Params(
        Param("target", "random", Text(("random", "dense"), layers="all", what="LAYER"),
              "The items targeted: random (any layer), dense (the Dense layers) or one layer's.",
              label="Target layer"),
        Param("k", 1, IntRange(1, 1000), "Items activated at once (per seed).",
              label="k (targets at once)"),
        *GradientGenerator.params,
        Param("threshold", None, Interval(0.0, 1.0), "Activation threshold (default: the data "
                                                     "set's, 0.25 images, 0.5 IMDB).",
              label="Threshold"),
        Param("pool", "auto", OneOf(("auto", "set", "seed")),
              "auto: set where the seed set leaves k items uncovered, else seed; set: items no "
              "seed activates (the paper's Algorithm 2); seed: items the seed itself leaves "
              "inactive.", level="more"),
        Param("short", "error", OneOf(("error", "lowest")),
              "When a seed leaves fewer than k items inactive: an error, or take the lowest.",
              level="more"),
        Param("stop_on_target", False, Bool(), "Also stop a seed once its targets are active.",
              level="more"),
        LAMBDA_PRED)
    accepts = ("criterion_params",)
    lambda_cov = 1.0            # the coverage term's weight (RNN-Test: lambda_state)

    def __init__(self, model, *, target: str, k: int, threshold: float | None, pool: str,
                 short: str, stop_on_target: bool, lambda_pred: float,
                 criterion_params: dict | None = None, **kw):
        super().__init__(model, **kw)
        self.lambda_pred = float(lambda_pred)
        self.pool_mode = pool
        self.pool_used = None          # "set" or "seed", decided by _prepare
        self.short = short
        self._short = None
        self.k = int(k)
        self.target = str(target)
        if threshold is None:
            threshold = default_threshold(model)
        self.threshold = float(threshold)
        self.stop_on_target = bool(stop_on_target)
        self.criterion_params = dict(criterion_params or {})
        self.criterion = self._make_criterion()
        # edge values need a lookup in Python: eager (Criterion.targets.graph_safe)
        self.graph_objective = self.criterion.targets.graph_safe
        self._set_criterion = None
        self._layer = self._target_layer(self.target)
        self.pool = np.zeros(0, np.int64)

    # ---- criterion and targets
    def _criterion_params(self) -> dict:
        return {"threshold": self.threshold, **self.criterion_params}

    def _make_criterion(self, private: bool = False):
        """The criterion (shared by the generators of this model unless private: only the
        set pool updates its state)."""
        params = self._criterion_params()
        make = lambda: get_criterion(self.criterion_name, self.model, **params)   # noqa: E731
        if private:
            return make()
        key = ("criterion", self.criterion_name, _key(params))
        return shared(self.model, key, make)

    def _items_of_layer(self) -> np.ndarray:
        """Every item of the target layer (what a fresh criterion leaves uncovered)."""
        params = self._criterion_params()
        key = ("items", self.criterion_name, _key(params), self._layer)
        def items():
            crit = get_criterion(self.criterion_name, self.criterion.tracer, **params)
            return np.setdiff1d(crit.report.uncovered(self._layer), crit.targets.dead_items())
        return shared(self.model, key, lambda: np.asarray(items(), np.int64))

    def _layer_names(self) -> list[str]:
        tracer = getattr(self.criterion, "tracer", None) or Tracer(self.model)
        return [s.name for s in tracer.specs]

    def _target_layer(self, target: str):
        """None (all layers), "dense", or a layer name; unknown names raise InputError."""
        if target == "random":
            return None
        if target == "dense":
            return "dense"
        names = self._layer_names()
        if target not in names:
            raise InputError(f"unknown target layer {target!r}; choose 'random', 'dense' or one "
                             f"of this model's layers: {', '.join(names)}")
        return target

    def _prepare(self, x, y):
        """The candidate items of the target layer, and with pool "set" or "auto" the seed
        set's not-yet-covered ones (the paper's pool: items no seed activates). "auto" falls
        back to each seed's own inactive items where the set leaves fewer than k."""
        self.layer_items = self._items_of_layer()
        where = "all layers" if self._layer is None else f"layer {self._layer!r}"
        if len(self.layer_items) < self.k:
            raise InputError(f"k={self.k} targets asked but {where} holds only "
                             f"{len(self.layer_items)} items; lower k or pick another target")
        self.pool_used = "seed"
        if self.pool_mode in ("set", "auto"):
            if self._set_criterion is None:
                self._set_criterion = self._make_criterion(private=True)
            crit = self._set_criterion
            crit.reset()
            for i in range(0, len(x), 256):
                crit.update(x[i:i + 256])
            self.pool = np.setdiff1d(crit.report.uncovered(self._layer), crit.targets.dead_items())
            if len(self.pool) >= self.k:
                self.pool_used = "set"
            elif self.pool_mode == "set":
                raise InputError(f"k={self.k} targets asked but only {len(self.pool)} items of "
                                 f"{where} are not yet activated by the {len(x)} seeds at "
                                 f"threshold {self.threshold}; lower k, use pool='seed' (each "
                                 f"seed's own inactivated items), raise the threshold or pick "
                                 f"another target layer")

    def _inactive(self, x: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """(B, len(candidates)) bool: the candidate items each seed does not activate."""
        return np.asarray(self.criterion.targets.item_values(x, candidates)) <= self.threshold

    def _seed_targets(self, x, rng) -> np.ndarray:
        """k items per seed among those that seed itself leaves inactive (pool="seed")."""
        B, items = len(x), self.layer_items
        where = "all layers" if self._layer is None else f"layer {self._layer!r}"
        exact = len(items) <= 100_000
        if exact:       # every item of the layer, checked on every seed
            cand = np.broadcast_to(items, (B, len(items)))
            inactive = self._inactive(x, items)
        else:           # a huge layout (edge granularity): check a random sample per seed
            draw = min(len(items), max(256, 64 * self.k))
            cand = np.stack([rng.choice(items, draw, replace=False) for _ in range(B)])
            union, inv = np.unique(cand, return_inverse=True)
            inactive = np.take_along_axis(self._inactive(x, union), inv.reshape(B, draw), 1)
        targets = np.empty((B, self.k), np.int64)
        self._short = np.zeros(B, bool)
        for b in range(B):
            free = cand[b][inactive[b]]
            if len(free) < self.k and self.short == "lowest":
                # fewer than k inactivated: take the k least activated items of the layer
                vals = np.asarray(self.criterion.targets.item_values(x[b:b + 1], cand[b]))[0]
                free = cand[b][np.argsort(vals, kind="stable")[:max(self.k, len(free))]]
                self._short[b] = True
            if len(free) < self.k:
                raise InputError(
                    f"k={self.k} targets asked but seed {b} of this batch leaves only "
                    f"{len(free)} items of {where} inactive at threshold {self.threshold}"
                    + ("" if exact else f" (among {cand.shape[1]} sampled)")
                    + "; lower k, raise the threshold, pick another target layer, or pass "
                      "short='lowest' (take the least activated items)")
            targets[b] = rng.choice(free, self.k, replace=False)
        return targets

    def _context(self, x, y, rng):
        B = len(x)
        if self.pool_used == "set":
            targets = np.stack([rng.choice(self.pool, self.k, replace=False) for _ in range(B)])
        else:
            targets = self._seed_targets(x, rng)
        union, pos = np.unique(targets, return_inverse=True)
        return {"targets": targets, "pos": pos.reshape(B, self.k).astype(np.int64),
                "_union": union.astype(np.int64)}

    def _target_values(self, x, ctx):
        """tf (B, k): the normalized values of each seed's own targets."""
        return self.criterion.targets.row_values(x, ctx["_union"], ctx["pos"], objective=True)

    def _objective(self, x, y, ctx):
        """The joint objective (module docstring): prediction term plus coverage term."""
        obj = self.lambda_cov * tf.reduce_sum(self._target_values(x, ctx), axis=1)
        if self.lambda_pred > 0:
            obj = obj + self.lambda_pred * prediction_term(self.forward(x), y)
        return obj

    def _activated(self, x: np.ndarray, ctx: dict) -> np.ndarray:
        """(B, k) bool: each target's value above the threshold (covered)."""
        v = self.criterion.targets.row_values(x, ctx["_union"], ctx["pos"])
        return np.asarray(v) > self.threshold

    def _target_reached(self, x, ctx):
        return self._activated(x, ctx).all(axis=1)

    def _kept(self, x, ctx):
        """The minimal stage keeps every target that the adversarial input activated."""
        return self._activated(x, ctx)

    def _keep_values(self, x, y, ctx):
        """... the prediction margin and the least slack of the targets the adversarial input
        activated (their values minus the threshold; ``ctx["need"]`` marks them; the exact
        values the check reads, not the ascent's surrogate)."""
        v = self.criterion.targets.row_values(x, ctx["_union"], ctx["pos"])        # (B, k)
        slack = tf.where(ctx["need"] > 0, v - self.threshold, 1e3 * tf.ones_like(v))
        return [margin_term(self.forward(x), y), tf.reduce_min(slack, axis=1)]

    def _keep_floors(self):
        return ("floor", "floor")

    def _finish_batch(self, x_gen, ctx, out: BatchOutput) -> BatchOutput:
        out.targets = ctx["targets"]
        out.extras["set_pool"] = np.full(len(x_gen), self.pool_used == "set")
        out.extras["short_pool"] = (np.zeros(len(x_gen), bool) if self.pool_used == "set"
                                    else np.asarray(self._short, bool))
        out.n_activated = self._activated(x_gen, ctx).sum(axis=1).astype(np.int64)
        return out

    def _describe_targets(self, targets):
        cache: dict[int, dict] = {}

        def desc(i: int) -> dict:
            if i not in cache:
                cache[i] = {k: (v.item() if isinstance(v, np.generic) else v)
                            for k, v in dict(self.criterion.describe(i)).items()}
            return cache[i]
        return [[desc(int(i)) for i in row if i >= 0] for row in targets]

    def get_config(self):
        """... with the threshold in use (the data set's where none was given)."""
        config = super().get_config()
        if "threshold" in self.params:
            config["threshold"] = self.threshold
        return config | ({"criterion_params": self.criterion_params} if self.criterion_params
                         else {})


class ContributionGuided(CoverageGuided):
    """RNNCon-Test (the paper's Algorithm 2): activate k inactivated contributions at once.
    ``granularity`` "unit" (the paper's implementation) or "edge" (Definition 1);
    ``normalize`` and ``values`` as in ContributionCoverage (defaults: "step", "abs")."""
    method = "rconc"
    criterion_name = "rconc"
    params = CoverageGuided.params.add(
        *(p for p in ContributionCoverage.params if p.name in ("granularity", "normalize",
                                                               "values")))

    def __init__(self, model, *, granularity: str, normalize: str, values: str, **kw):
        self.granularity, self.normalize, self.values = granularity, normalize, values
        super().__init__(model, **kw)

    def _criterion_params(self) -> dict:
        return {**super()._criterion_params(), "granularity": self.granularity,
                "normalize": self.normalize, "values": self.values}


class NeuronGuided(CoverageGuided):
    """DeepXplore's coverage objective: raise k not-yet-activated neurons' scaled outputs."""
    method = "nc"
    criterion_name = "nc"


class StateGuided(CoverageGuided):
    """RNN-Test (Guo et al.): the prediction term (weight ``lambda_pred``, 1 as theirs) plus
    ``lambda_state`` times the values of k hidden-state units outside the seed set's top-k
    coverage."""
    method = "rnntest"
    criterion_name = "hsc"
    params = CoverageGuided.params.without("threshold").replace("lambda_pred", default=1.0).add(
        Param("lambda_state", 1.0, Interval(0.0, 1e3), "RNN-Test's weight of the state term.",
              level="more"))

    def __init__(self, model, *, lambda_state: float, **kw):
        self.lambda_state = self.lambda_cov = float(lambda_state)
        super().__init__(model, threshold=0.25, **kw)      # HS_C has none: messages only

    def _criterion_params(self) -> dict:
        return dict(self.criterion_params)        # HS_C has no threshold

    def _inactive(self, x, candidates):
        return np.asarray(self.criterion.profile(x))[:, candidates] < 0.5

    def _keep_values(self, x, y, ctx):
        """The prediction margin alone: HS_C's activation (a unit among its vector's top k)
        has no fixed floor to step toward, so its targets are checked (``_kept``), not
        steered; holding their values to first order as well gave larger minimal L2 (mnist-gru,
        200 seeds: 0.705 against 0.685; reports/generation/NOTES.md)."""
        return [margin_term(self.forward(x), y)]

    def _keep_floors(self):
        return ("floor",)

    def _activated(self, x, ctx):
        """A hidden unit is activated when it is among its vector's top k (HS_C)."""
        scores = self.criterion.profile(x)                       # (B, total) 0/1
        return np.take_along_axis(scores, ctx["targets"], axis=1) > 0.5



def _key(params: dict) -> str:
    return json.dumps(params, sort_keys=True, default=str)
