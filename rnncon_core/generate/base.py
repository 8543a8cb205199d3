"""The generator base classes: a template method that validates, batches and judges.

``Generator.generate(x, y)`` is final: it checks the inputs, runs ``_prepare`` once over all
seeds, cuts them into batches, calls the subclass's ``_generate_batch`` on each (vectorized over
the batch's seeds), then re-runs the model on what came back and applies the oracle. Progress
goes through a callback, cancellation through ``should_stop`` (checked between batches); the
randomness of batch b comes from ``numpy.random.default_rng([seed, b_start])``, so the same
seed gives the same run.

``GradientGenerator`` adds the gradient-ascent loop every image strategy shares: a per-seed
objective to maximize, a constraint that shapes each step, images kept in [0, 1], and early
stopping per seed (finished seeds leave the batch).
"""
from __future__ import annotations

import itertools
import threading
import time
import weakref
from abc import ABCMeta, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, ClassVar

import numpy as np

from ..errors import InputError
from ..lazy import tf
from ..params import Bool, IntRange, Interval, OneOf, Param, Params
from ..textdiff import words_changed
from ..trace import check_model_inputs, input_domain
from ..zoo import class_labels, class_probabilities, output_head
from .constraints import CONSTRAINTS, UNIT_BOX, constraint_params, get_constraint

ProgressFn = Callable[[int, int], None]
StopFn = Callable[[], bool]


@dataclass
class BatchOutput:
    """What ``_generate_batch`` returns for its B seeds."""
    x_gen: np.ndarray                       # same shape and dtype kind as the batch
    iterations: np.ndarray                  # (B,) int, steps used per seed
    targets: np.ndarray | None = None       # (B, k) flat indices of the targeted items, -1 none
    n_activated: np.ndarray | None = None   # (B,) how many targets ended above the threshold
    extras: dict[str, np.ndarray] = field(default_factory=dict)   # (B, ...) per-seed arrays


@dataclass
class GenerationResult:
    """One generated input per seed, the oracle's verdict and the perturbation's norms."""
    method: str
    input_kind: str                 # "image" or "text"
    x_seed: np.ndarray
    y_seed: np.ndarray
    x_gen: np.ndarray
    adversarial: np.ndarray         # (N,) bool
    pred_seed: np.ndarray
    pred_gen: np.ndarray
    conf_gen: np.ndarray            # probability the model gives its predicted class on x_gen
    iterations: np.ndarray
    targets: np.ndarray             # (N, k) int, -1 where the strategy targets nothing
    n_activated: np.ndarray         # (N,) int, -1 where not applicable
    seconds: float
    stopped: bool = False           # True when should_stop ended it before all seeds were done
    target_info: list[list[dict]] = field(default_factory=list)   # describe() of each target
    extras: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(len(self.y_seed))

    @property
    def perturbation(self) -> np.ndarray:
        return self.x_gen.astype(np.float32) - self.x_seed.astype(np.float32)

    def norms(self) -> dict[str, np.ndarray]:
        """Per-seed L2, L1 and L-infinity norms of the perturbation (over every pixel)."""
        return perturbation_norms(self.perturbation)

    def words_changed(self) -> np.ndarray:
        """Per seed, textdiff's words changed (the generator's, else from the id rows)."""
        if "words_changed" in self.extras:
            return np.asarray(self.extras["words_changed"])
        return np.array([words_changed(s, g) for s, g in zip(self.x_seed, self.x_gen)], np.int64)

    def summary(self, model: str = "") -> dict:
        """The run's figures. Norms are the means over the adversarial inputs (the paper's
        Avg. Perturb); ``*_all`` are over every generated input."""
        adv = self.adversarial.astype(bool)
        n_adv = int(adv.sum())
        out = {"method": self.method, "model": model, "n_seeds": self.n,
               "n_adversarial": n_adv, "adv_rate": n_adv / self.n if self.n else 0.0,
               "seconds": round(self.seconds, 3),
               "adv_per_second": n_adv / self.seconds if self.seconds > 0 else 0.0,
               "accuracy_gen": float(np.mean(self.pred_gen == self.y_seed)) if self.n else 0.0,
               "mean_iterations": float(np.mean(self.iterations)) if self.n else 0.0,
               "stopped": self.stopped}
        mean = lambda v: float(np.mean(v)) if len(v) else None   # noqa: E731
        if self.input_kind == "text":
            w = self.words_changed()
            out["avg_words_changed"] = mean(w[adv])
            out["avg_words_changed_all"] = mean(w)
            if "valid" in self.extras and self.n:     # text runs check every edit (text.lexical)
                out["checks"] = {k[8:]: (float(np.sum(self.extras["pass_" + k[8:]]) / n)
                                         if (n := int(np.sum(v))) else None)
                                 for k, v in self.extras.items() if k.startswith("checked_")}
        else:
            for k, v in self.norms().items():
                out[f"avg_{k}"] = mean(v[adv])
                out[f"avg_{k}_all"] = mean(v)
            if "pre_l2" in self.extras:     # the minimal-perturbation stage ran: its effect
                for k in ("l2", "l1", "linf"):
                    out[f"avg_{k}_unminimized"] = mean(np.asarray(self.extras[f"pre_{k}"])[adv])
                out["minimize_seconds"] = round(float(np.sum(self.extras["min_seconds"])), 3)
                if "pre_activated" in self.extras:
                    out["mean_activated_unminimized"] = mean(self.extras["pre_activated"])
        if "valid" in self.extras and self.n:   # validity of the generated inputs (validity)
            valid = np.asarray(self.extras["valid"], bool)
            out["n_valid_adversarial"] = int((adv & valid).sum())
            out["valid_adv_rate"] = float(np.mean(adv & valid))
        if (self.n_activated >= 0).any():
            out["mean_activated"] = mean(self.n_activated[self.n_activated >= 0])
        if "set_pool" in self.extras and self.n:      # which targets coverage-guided runs chose
            out["pool"] = "set" if np.all(self.extras["set_pool"]) else "seed"
        return out

    def arrays(self, seed_index: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The arrays of outputs.npz."""
        out = {"seed_index": np.arange(self.n) if seed_index is None else np.asarray(seed_index),
               "x_seed": self.x_seed, "y_seed": self.y_seed, "x_gen": self.x_gen,
               "adversarial": self.adversarial.astype(bool), "pred_seed": self.pred_seed,
               "pred_gen": self.pred_gen, "conf_gen": self.conf_gen,
               "iterations": self.iterations, "n_activated": self.n_activated,
               "targets": self.targets}
        out.update({k: np.asarray(v) for k, v in self.extras.items()})
        return out

    @staticmethod
    def concat(parts: list["GenerationResult"]) -> "GenerationResult":
        first = parts[0]
        k = max(p.targets.shape[1] for p in parts)
        pad = lambda t: np.pad(t, ((0, 0), (0, k - t.shape[1])), constant_values=-1)  # noqa
        cat = lambda name: np.concatenate([getattr(p, name) for p in parts])           # noqa
        return GenerationResult(
            method=first.method, input_kind=first.input_kind, x_seed=cat("x_seed"),
            y_seed=cat("y_seed"), x_gen=cat("x_gen"), adversarial=cat("adversarial"),
            pred_seed=cat("pred_seed"), pred_gen=cat("pred_gen"), conf_gen=cat("conf_gen"),
            iterations=cat("iterations"), targets=np.concatenate([pad(p.targets) for p in parts]),
            n_activated=cat("n_activated"), seconds=sum(p.seconds for p in parts),
            stopped=any(p.stopped for p in parts),
            target_info=[t for p in parts for t in p.target_info],
            extras={key: np.concatenate([p.extras[key] for p in parts]) for key in first.extras})


def data_box(x: np.ndarray) -> tuple:
    """The box the float methods keep generated inputs in: [0, 1] when the inputs lie in it
    (images, scaled features), else each feature's range over the inputs (real-valued
    sequences: z-scores, sensor readings), as two arrays over the last axis."""
    x = np.asarray(x, np.float32)
    if x.size == 0 or (x.min() >= 0 and x.max() <= 1):
        return UNIT_BOX
    axes = tuple(range(x.ndim - 1))
    return x.min(axis=axes), x.max(axis=axes)


def seed_box(model, x: np.ndarray, method: str) -> tuple:
    """The box a float method keeps these seeds in: [0, 1] for a model that reads images
    (images outside it are refused: ``check_unit_range``), else ``data_box``."""
    if input_domain(model) == "image":
        check_unit_range(x, method)
        return UNIT_BOX
    return data_box(x)


def check_unit_range(x: np.ndarray, method: str) -> None:
    """Images: the float methods keep every pixel in [0, 1]; images outside it are an
    InputError that says to scale them."""
    lo, hi = float(np.min(x)), float(np.max(x))
    if lo < 0 or hi > 1:
        raise InputError(f"method {method!r} keeps inputs in [0, 1]; the seeds range from "
                         f"{lo:.4g} to {hi:.4g}: scale them into [0, 1] first (e.g. min-max "
                         f"per feature)")


def model_head(model):
    """The model's output head (zoo.output_head), read once per model."""
    return shared(model, ("head",), lambda: output_head(model))


def predict_proba(model, x: np.ndarray, batch_size: int = 512) -> np.ndarray:
    """Class probabilities (N, C): the head's (``zoo.Head.probabilities``: a sigmoid output
    (N, 1) is two classes, logits go through a softmax); a model that is not a classifier is
    refused. The forward pass is the model's compiled one (:func:`compiled_forward`, traced
    once per model; an eager call per batch was 2.5 times slower on an IMDB LSTM)."""
    head = model_head(model).require_classifier("predicting classes")
    forward = compiled_forward(model)
    outs = []
    for i in range(0, len(x), batch_size):
        outs.append(np.asarray(forward(tf.convert_to_tensor(x[i:i + batch_size]))))
    return np.concatenate(outs) if outs else np.zeros((0, head.classes or 2), np.float32)


_SHARED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def shared(model, key, factory):
    """One object per (model, key), kept while the model lives: generators of the same model
    reuse compiled functions (a criterion, the forward pass) instead of tracing them again.
    Only stateless uses may share (the criteria are used for values/profile/describe)."""
    with _SHARED_LOCK:
        per_model = _SHARED.setdefault(model, {})
        if key not in per_model:
            per_model[key] = factory()
        return per_model[key]


def compiled_forward(model):
    """The model's class probabilities for a float batch (logits through a softmax), compiled
    once per model and differentiable."""
    head = model_head(model).require_classifier("generation")
    ref = weakref.ref(model)    # a strong one would keep the model (the cache's key) forever
    return shared(model, ("forward",), lambda: tf.function(
        lambda x: head.probabilities(ref()(x, training=False)), reduce_retracing=True))


TOP_K_OTHERS = 4        # DLFuzz: the seed's class against the next four (its top 5)


def prediction_term(out, y, top_k: int = TOP_K_OTHERS):
    """tf (B,): the mean logit of the ``top_k`` most likely classes other than y minus y's
    logit, from class probabilities (B, C) or a sigmoid (B, 1): log p_j - log p_y = z_j - z_y
    (the softmax's normalizer cancels). Positive once the input is predicted wrong (DLFuzz's
    objective on its "before_softmax" layer: the seed's class against its next four)."""
    out = class_probabilities(out)
    logp = tf.math.log(tf.clip_by_value(out, 1e-30, 1.0))
    own = tf.gather(logp, y, axis=1, batch_dims=1)
    others = logp - 1e9 * tf.one_hot(y, tf.shape(logp)[1], dtype=logp.dtype)
    k = min(int(top_k), int(out.shape[-1]) - 1)
    return tf.reduce_mean(tf.math.top_k(others, k).values, axis=1) - own


def margin_term(out, y):
    """tf (B,): the most likely other class's logit minus y's (C&W's margin, f6 of Carlini
    and Wagner 2017, from log-probabilities as ``prediction_term``): positive exactly when the
    input is predicted wrong: ``prediction_term`` against the single most likely other."""
    return prediction_term(out, y, top_k=1)


class _Declared(ABCMeta):
    """Constructing a strategy checks its declared ``params`` first: every declared parameter
    reaches ``__init__`` (its default where not given), checked (an InputError naming the
    parameter, what it allows and the value); the keywords a class ``accepts`` besides (run
    settings, objects such as ``others`` or ``lexicon``) pass as given."""

    def __call__(cls, model, /, **kw):
        values = cls.params.check(f"method {cls.method!r}", kw, extra=cls.accepted())
        obj = super().__call__(model, **values)
        obj._declared = {name: values[name] for name in cls.params.names}
        return obj


class Generator(metaclass=_Declared):
    """Base class of every strategy. Subclasses set ``method`` and ``input_kind``, declare
    their parameters (``params``: rnncon_core.params) and implement ``_generate_batch`` (and,
    if they need the whole seed set, ``_prepare``)."""

    method: ClassVar[str] = ""
    input_kind: ClassVar[str] = "image"     # "image": float in [0, 1]; "text": int word ids
    params: ClassVar[Params] = Params()
    accepts: ClassVar[tuple] = ("batch_size", "seed")     # keywords that are no parameters
    # capabilities, read by the runner, the CLI and the reports instead of method names:
    needs_others: ClassVar[bool] = False    # compares with other models (``others=``)
    traces: ClassVar[bool] = True           # reads the trace (False: the model's outputs and
    #                                         gradients only, so a float64 model runs as a
    #                                         float32 copy: jobs.run_generation)
    # bumped when the outputs for the same configuration change (a run of another revision
    # is never reused for this one: jobs.generation_config stores it)
    revision: ClassVar[int] = 1

    @classmethod
    def accepted(cls) -> tuple:
        """The keywords besides the declared parameters (``accepts`` of the class and its
        bases)."""
        return tuple(a for c in cls.__mro__ for a in vars(c).get("accepts", ()))

    def __init__(self, model, *, batch_size: int = 128, seed: int = 0):
        if batch_size < 1:
            raise InputError(f"batch_size must be at least 1, got {batch_size}")
        self.head = model_head(model).require_classifier(f"method {self.method!r}")
        self.model = model
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.box = UNIT_BOX            # what generated inputs stay in (set by validate)

    # ---- the template method
    def generate(self, x, y, progress: ProgressFn | None = None,
                 should_stop: StopFn | None = None,
                 on_batch: Callable[[GenerationResult], None] | None = None,
                 part: tuple[int, int] | None = None) -> GenerationResult:
        """One generated input per seed. ``progress(done, total)`` as seeds finish: after each
        batch, and inside a batch whenever the strategy reports more of its seeds finished
        (:meth:`_finished`), so ``done`` grows monotonically to ``total``;
        ``should_stop()`` is asked before each batch (True: return what is done, ``stopped``);
        ``on_batch(result_so_far)`` lets a caller save partial outputs. ``part=(start, stop)``
        (start a multiple of batch_size) generates for seeds start..stop-1 only, exactly as the
        whole run would (targets drawn from the whole seed set, the same random streams): how
        rnncon_core.jobs.distributed splits a run over workers."""
        x, y = self.validate(x, y)
        lo, hi = (0, len(x)) if part is None else (int(part[0]), min(len(x), int(part[1])))
        if lo % self.batch_size or not 0 <= lo <= hi:
            raise InputError(f"part {part} must start at a multiple of batch_size "
                             f"({self.batch_size}) within the {len(x)} seeds")
        start = time.perf_counter()
        self._prepare(x, y)
        prep_seconds = time.perf_counter() - start
        parts: list[GenerationResult] = []
        stopped = False
        for b0 in range(lo, hi, self.batch_size):
            if should_stop is not None and should_stop():
                stopped = True
                break
            t0 = time.perf_counter()
            b1 = min(hi, b0 + self.batch_size)
            xb, yb = x[b0:b1], y[b0:b1]
            rng = np.random.default_rng([self.seed, b0])
            self._tick = (None if progress is None else
                          _ticker(progress, b0 - lo, b1 - b0, hi - lo))
            try:
                out = self._generate_batch(xb, yb, rng)
            finally:
                self._tick = None
            part = self._judge(xb, yb, out, time.perf_counter() - t0 + (prep_seconds if not parts
                                                                          else 0.0))
            parts.append(part)
            if on_batch is not None:
                on_batch(GenerationResult.concat(parts))
            if progress is not None:
                progress(b1 - lo, hi - lo)
        if not parts:
            result = self._judge(x[:0], y[:0], BatchOutput(x[:0], np.zeros(0, int)), prep_seconds)
        else:
            result = GenerationResult.concat(parts)
        result.stopped = stopped
        return result

    def _finished(self, n: int) -> None:
        """Engine hook for a strategy's batched loop: ``n`` seeds of the current batch have
        finished their search (they may still be judged or minimized with their batch).
        Reported through ``generate``'s progress at once; a count that does not grow is
        ignored."""
        tick = getattr(self, "_tick", None)
        if tick is not None:
            tick(int(n))

    def validate(self, x, y) -> tuple[np.ndarray, np.ndarray]:
        """Seeds checked against the model (trace.check_model_inputs: shape, dtype, NaN,
        ids within the vocabulary, images in [0, 1]) and labels against its classes."""
        if len(np.shape(x)) == 0 or len(x) == 0:
            raise InputError("the seed set is empty: give at least one seed input")
        y = np.asarray(y).reshape(-1)
        if len(x) != len(y):
            raise InputError(f"{len(x)} seed inputs but {len(y)} labels: give one label per seed")
        domain = input_domain(self.model)
        if self.input_kind == "text" and domain != "ids":
            raise InputError(f"method {self.method!r} edits word ids, but this model reads "
                             f"float vectors; use an image method")
        if self.input_kind == "image" and domain == "ids":
            raise InputError(f"method {self.method!r} perturbs float inputs, but this model "
                             f"reads word ids; use a text method (eda, synonym-gradient)")
        if self.input_kind == "image" and not np.issubdtype(np.asarray(x).dtype, np.floating):
            raise InputError(f"method {self.method!r} works on float inputs in [0, 1]; got "
                             f"dtype {np.asarray(x).dtype}: for 8-bit pixels use "
                             f"x.astype('float32') / 255")
        x = check_model_inputs(self.model, x, "seed inputs")
        if self.input_kind == "image":
            self.box = seed_box(self.model, x, self.method)
        return x, self.head.check_labels(y)

    def _clip(self, x: np.ndarray) -> np.ndarray:
        """x within the seeds' box (``data_box``; [0, 1] for images)."""
        return np.clip(x, *self.box)

    # ---- hooks
    def _prepare(self, x: np.ndarray, y: np.ndarray) -> None:
        """Called once with all seeds before batching (e.g. the seed set's coverage)."""

    @abstractmethod
    def _generate_batch(self, x: np.ndarray, y: np.ndarray,
                        rng: np.random.Generator) -> BatchOutput:
        """B generated inputs for B seeds, vectorized over the seeds."""

    def _describe_targets(self, targets: np.ndarray) -> list[list[dict]]:
        return [[] for _ in range(len(targets))]

    def predict(self, x: np.ndarray) -> np.ndarray:
        return predict_proba(self.model, x)

    def _oracle(self, y, pred_seed, pred_gen, x_gen) -> np.ndarray:
        """The paper's oracle: the seed is predicted right and the generated input wrong."""
        return (pred_seed == y) & (pred_gen != y)

    def _judge(self, x, y, out: BatchOutput, seconds: float) -> GenerationResult:
        n = len(x)
        if n:
            p_seed, p_gen = self.predict(x), self.predict(out.x_gen)
            pred_seed, pred_gen = p_seed.argmax(1), p_gen.argmax(1)
            conf = p_gen[np.arange(n), pred_gen]
        else:
            pred_seed = pred_gen = np.zeros(0, np.int64)
            conf = np.zeros(0, np.float32)
        targets = out.targets if out.targets is not None else np.full((n, 0), -1, np.int64)
        n_act = out.n_activated if out.n_activated is not None else np.full(n, -1, np.int64)
        return GenerationResult(
            method=self.method, input_kind=self.input_kind, x_seed=x, y_seed=y, x_gen=out.x_gen,
            adversarial=self._oracle(y, pred_seed, pred_gen, out.x_gen).astype(bool),
            pred_seed=pred_seed.astype(np.int64), pred_gen=pred_gen.astype(np.int64),
            conf_gen=conf.astype(np.float32), iterations=np.asarray(out.iterations, np.int64),
            targets=np.asarray(targets, np.int64), n_activated=np.asarray(n_act, np.int64),
            seconds=seconds, target_info=self._describe_targets(targets),
            extras=dict(out.extras))

    def get_config(self) -> dict:
        """The method, its declared parameters and the run settings: ``get_generator(method,
        model, **config)`` makes an equal generator."""
        return {"method": self.method, **self._declared, "batch_size": self.batch_size,
                "seed": self.seed}


# the minimal-perturbation stage's parameters (every gradient method declares them)
MINIMIZE = (
    Param("minimize", True, Bool(), "Once a seed turns adversarial, shrink its perturbation "
          "while it stays adversarial and its activated targets stay activated (a binary search "
          "on its scale, then steps that lower its L2 norm).", label="Minimize the perturbation",
          level="more"),
    Param("min_steps", 8, IntRange(0, 100), "Steps of the minimization that lower the L2 norm "
          "after the scale search (0: the scale search alone).", level="more"),
    Param("polish_steps", 30, IntRange(0, 1000), "After those steps, up to this many steps of a "
          "penalty descent (Adam) and as many FAB steps per seed, each keeping the smallest "
          "point that passes (0: none). Lowers L2 most where a target's floor binds; costs "
          "about one gradient per step and seed.", level="more"))
# the polishing descents: a seed leaves after this many steps without a smaller passing point;
# Adam's per-pixel rate; "near a floor": within this first-order L2 distance of it; FAB's
# overshoot, largest pull toward the seed and backward step (Croce and Hein 2020, their values)
POLISH_PATIENCE, ADAM_RATE, NEAR_FLOOR = 10, 0.003, 0.05
FAB_ETA, FAB_ALPHA_MAX, FAB_BETA = 1.05, 0.1, 0.9
# bisection rounds of the scale search (scales 0..1, to 1/256) and of each later step (its
# candidate's scales from half to the one of the same L2 norm as before the step)
SCALE_ROUNDS, STEP_ROUNDS = 8, 5


class GradientGenerator(Generator):
    """Gradient ascent on a per-seed objective, shaped by a constraint, images kept in [0, 1].

    ``step`` is the per-pixel RMS change of one iteration (DeepXplore's normalized gradient
    times s); a seed leaves the loop as soon as it turns adversarial (and, with
    ``stop_on_target``, when the strategy says its targets are reached). At most ``window``
    seeds are worked on at once; a batch (``batch_size``) streams through that window. The
    constraint's own parameters (``size``, ``position``, ...) are declared on the constraint
    classes (generate.constraints) and checked there.
    """

    # True: _objective uses TF ops only and runs inside one compiled gradient step
    graph_objective: ClassVar[bool] = True
    _step_out = None        # (x, the model's output at x) while the ascent's step runs
    revision = 2        # 2: the minimal-perturbation stage steps to the nearest point of its
    #                      constraints (C&W margin, target floors)
    params = Params(
        Param("step", 0.02, Interval(0, 1, lo_open=True), "Per-pixel RMS change per iteration.",
              label="Step size"),
        Param("iterations", 50, IntRange(1, 100_000), "Iteration budget per seed."),
        Param("constraint", "none", OneOf(CONSTRAINTS),
              "DeepXplore's image constraint: none, light (one brightness shift), occlusion "
              "(one rectangle), blackout (dark squares)."),
        Param("window", 128, IntRange(1), "Seeds worked on at once (memory).", level="more"),
        *MINIMIZE)

    @classmethod
    def accepted(cls) -> tuple:
        """... and every parameter a registered constraint declares (passed on to it)."""
        return (*super().accepted(), *constraint_params())

    def __init__(self, model, *, step: float, iterations: int, constraint: str, window: int,
                 minimize: bool, min_steps: int, polish_steps: int, batch_size: int = 256,
                 seed: int = 0, **constraint_params):
        super().__init__(model, batch_size=batch_size, seed=seed)
        self.minimize, self.min_steps = bool(minimize), int(min_steps)
        self.polish_steps = int(polish_steps)
        self.step = float(step)
        self.iterations = int(iterations)
        self.window = int(window)
        self.constraint = get_constraint(constraint, **constraint_params)
        self._forward = None
        self._step_fn = None
        self._keep_fn = None

    # ---- what subclasses provide
    def validate(self, x, y):
        """... and the constraint keeps the perturbed input in the seeds' box too."""
        x, y = super().validate(x, y)
        self.constraint.box = self.box
        return x, y

    @abstractmethod
    def _objective(self, x, y, ctx: dict):
        """tf: (B,) values to maximize, differentiable w.r.t. the float input x (B, T, F)."""

    def _context(self, x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> dict:
        """Per-seed numpy arrays (first axis B) the objective needs, e.g. the targets; keys
        starting with "_" are shared by all seeds (not cut down to the active ones)."""
        return {}

    def _target_reached(self, x: np.ndarray, ctx: dict) -> np.ndarray | None:
        """(B,) bool: targets reached (used with stop_on_target); None: no such notion."""
        return None

    def _finish_batch(self, x_gen: np.ndarray, ctx: dict, out: BatchOutput) -> BatchOutput:
        return out

    def _initial_perturbation(self, x0: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.zeros_like(x0)

    def _direction(self, grad, x0, p, cstate, rng) -> np.ndarray:
        return self.constraint.direction(grad, x0, p, cstate, rng)

    def _project(self, p: np.ndarray, x0: np.ndarray) -> np.ndarray:
        return self.constraint.project(p, x0)

    # ---- the loop
    def forward(self, x):
        """The model's output for a float tf batch, compiled once (differentiable); inside the
        ascent's step the output it already computed for that same x."""
        if self._step_out is not None and x is self._step_out[0]:
            return self._step_out[1]
        if self._forward is None:
            self._forward = compiled_forward(self.model)
        return self._forward(x)

    def _gradient_and_prediction(self, x: np.ndarray, y: np.ndarray, ctx: dict):
        """d objective / d x and the model's predictions at x, in one compiled step when the
        objective is graph-safe (``graph_objective``), else with an eager tape around the
        compiled pieces."""

        def step(xt, yt, ctx_t):
            with tf.GradientTape() as tape:
                tape.watch(xt)
                out = self.forward(xt)      # once: for the objective and the predictions
                self._step_out = (xt, out)
                try:
                    obj = self._objective(xt, yt, ctx_t)
                finally:
                    self._step_out = None
            grad = tape.gradient(obj, xt)
            return (tf.zeros_like(xt) if grad is None else grad), out

        args = (tf.convert_to_tensor(x, tf.float32), tf.convert_to_tensor(y, tf.int64),
                {k: tf.convert_to_tensor(v) for k, v in ctx.items()})
        grad = out = None
        if self.graph_objective:
            first = self._step_fn is None
            if first:
                self._step_fn = _compiled(step, args)
            try:
                grad, out = self._step_fn(*args)
            except (TypeError, ValueError, NotImplementedError,
                    tf.errors.OperatorNotAllowedInGraphError):
                if not first:
                    raise
                # the objective cannot be traced into a graph: run it eagerly from now on
                self.graph_objective = False
        if grad is None:
            grad, out = step(*args)
        return grad.numpy(), class_labels(out.numpy())

    def _is_done(self, pred: np.ndarray, y: np.ndarray) -> np.ndarray:
        return pred != y

    def _generate_batch(self, x, y, rng):
        """Gradient ascent on up to ``window`` seeds at once; a seed leaves as soon as it is
        done (adversarial, targets reached, or its budget spent) and the next one of the batch
        takes its place, so the slow seeds' tail is shared by the whole batch."""
        x0 = x.astype(np.float32)
        B = len(x0)
        ctx = self._context(x0, y, rng)
        cstate = self.constraint.init(x0, rng)
        p = self._initial_perturbation(x0, rng)
        iters = np.zeros(B, np.int64)
        live = np.ones(B, bool)
        while True:
            idx = np.flatnonzero(live)[:self.window]
            if len(idx) == 0:
                break
            sub = _subset(ctx, idx)
            xa = self._clip(x0[idx] + p[idx])
            grad, pred = self._gradient_and_prediction(xa, y[idx], sub)
            # done: predicted wrong (adversarial; at iteration 0, a seed that starts wrong
            # is not worked on)
            done = self._is_done(pred, y[idx])
            if getattr(self, "stop_on_target", False):
                reached = self._target_reached(xa, sub)
                if reached is not None:
                    done |= reached
            live[idx[done]] = False
            ids = idx[~done]
            if len(ids):
                d = self._direction(grad[~done], x0[ids], p[ids],
                                    {k: v[ids] for k, v in cstate.items()}, rng)
                p[ids] = self._project(p[ids] + self.step * d, x0[ids])
                iters[ids] += 1
                live[ids[iters[ids] >= self.iterations]] = False   # budget spent: judged below
            self._finished(B - int(live.sum()))
        x_gen = self._clip(x0 + p).astype(np.float32)
        extras = {}
        if self.minimize:
            x_gen, extras = self._minimal(x0, y, p, ctx, cstate, rng)
        out = BatchOutput(x_gen=x_gen, iterations=iters, extras=extras)
        return self._finish_batch(x_gen, ctx, out)

    # ---- the minimal-perturbation stage
    def _adversarial(self, x: np.ndarray, y: np.ndarray, final: bool = False) -> np.ndarray:
        """(B,) bool: x is predicted wrong for label y; the compiled forward while searching,
        with ``final`` the oracle's own call (``predict`` on the whole batch, as _judge)."""
        if final:
            return self.predict(x).argmax(1) != y
        out = self.forward(tf.convert_to_tensor(x, tf.float32)).numpy()
        return self._is_done(class_labels(out), y)

    def _kept(self, x: np.ndarray, ctx: dict) -> np.ndarray | None:
        """(B, m) bool: what the stage keeps true wherever it held on the adversarial input
        (coverage-guided: each target activated); None: nothing beyond the oracle."""
        return None

    def _keep_values(self, x, y, ctx) -> list:
        """tf (B,) values the stage's steps keep (to first order): by default one, the
        prediction margin (C&W's: the most likely other class's logit minus the seed class's),
        which must stay above 0. ``_keep_floors`` says, per value, whether it must stay
        above 0 ("floor") or at its current value ("hold")."""
        return [margin_term(self.forward(x), y)]

    def _keep_floors(self) -> tuple:
        return ("floor",)

    def _keep_gradients(self, x: np.ndarray, y: np.ndarray, ctx: dict):
        """The values of ``_keep_values`` at x and their gradients, compiled like the
        ascent's step: (list of (B,), list of arrays of x's shape)."""

        def grads(xt, yt, ctx_t):
            with tf.GradientTape(persistent=True) as tape:
                tape.watch(xt)
                vals = self._keep_values(xt, yt, ctx_t)
            return vals, [tf.zeros_like(xt) if g is None else g
                          for g in (tape.gradient(v, xt) for v in vals)]

        args = (tf.convert_to_tensor(x, tf.float32), tf.convert_to_tensor(y, tf.int64),
                {k: tf.convert_to_tensor(v) for k, v in ctx.items()})
        out = None
        if self.graph_objective and self._keep_fn is not False:
            if self._keep_fn is None:
                self._keep_fn = _compiled(grads, args)
            try:
                out = self._keep_fn(*args)
            except (TypeError, ValueError, NotImplementedError,
                    tf.errors.OperatorNotAllowedInGraphError):
                self._keep_fn = False           # not traceable: eager from now on
        vals, gs = grads(*args) if out is None else out
        return [np.asarray(v, np.float64) for v in vals], [g.numpy() for g in gs]

    def _minimal(self, x0, y, p, ctx, cstate, rng) -> tuple[np.ndarray, dict]:
        """The minimal-perturbation stage: each seed that ended adversarial gets the smallest
        perturbation found that keeps it adversarial and keeps its activated targets
        activated; the others keep theirs. Returns the images and per-seed extras (the
        norms before the stage, the stage's seconds)."""
        t0 = time.perf_counter()
        x_adv = self._clip(x0 + p).astype(np.float32)
        extras = {f"pre_{k}": v for k, v in perturbation_norms(x_adv - x0).items()}
        x_gen = x_adv.copy()
        idx = np.flatnonzero(self._adversarial(x_adv, y))
        need = self._kept(x_adv, ctx)
        if need is not None:
            extras["pre_activated"] = need.sum(axis=1).astype(np.int64)
        if len(idx):
            sub = _subset(ctx, idx)
            if need is not None:         # which targets the steps must keep activated
                sub["need"] = need[idx].astype(np.float32)
            x_gen[idx] = self._shrink(x0[idx], y[idx], self.constraint.effective(p[idx], x0[idx]),
                                      sub, None if need is None else need[idx],
                                      {k: v[idx] for k, v in cstate.items()}, rng)
            # the oracle's own check on the whole batch: a seed that would fail it keeps its input
            ok = self._adversarial(x_gen, y, final=True)
            if need is not None:
                ok &= (self._kept(x_gen, ctx) | ~need).all(axis=1)
            lost = np.zeros(len(x0), bool)
            lost[idx] = ~ok[idx]
            x_gen[lost] = x_adv[lost]
        extras["min_seconds"] = np.full(len(x0), (time.perf_counter() - t0) / len(x0))
        return x_gen, extras

    def _shrink(self, x0, y, q, ctx, need, cstate, rng) -> np.ndarray:
        """Images of the smallest perturbations found from the adversarial perturbations q:
        a binary search on the scale of q (ART's minimal FGSM scans that scale linearly:
        art/attacks/evasion/fast_gradient.py, FastGradientMethod._minimal_perturbation), then
        ``min_steps`` steps that lower the L2 norm under the constraint (``_refine``)."""
        def ok(d, rows):
            x = self._clip(x0[rows] + d)
            good = self._adversarial(x, y[rows])
            if need is not None:
                good &= (self._kept(x, _subset(ctx, rows)) | ~need[rows]).all(axis=1)
            return good

        rows = np.arange(len(x0))
        s = _bisect(lambda s: _times(s, q), lambda d: ok(d, rows), np.ones(len(x0)),
                    SCALE_ROUNDS)
        d = _times(s, q)
        if self.min_steps and self.constraint.refine:
            d = self._refine(x0, y, d, ctx, cstate, ok, rng)
            for kind in ("adam", "fab") if self.polish_steps else ():
                d = self._polish(kind, x0, y, d, ctx, cstate, ok, rng)
        return self._clip(x0 + d).astype(np.float32)

    def _refine(self, x0, y, d, ctx, cstate, ok, rng) -> np.ndarray:
        """Steps toward the nearest point of the linearized constraints (DeepFool's step,
        Moosavi-Dezfooli et al., for several constraints at once): the smallest perturbation
        whose first-order values of ``_keep_values`` satisfy their floors (``_nearest``), each
        gradient shaped by the constraint; move a share eta of the way there, scale the
        candidate up to d's L2 norm, keep it if it passes and search its scale down again;
        eta doubles after a success and halves after a failure. A step is kept only if it
        lowers the L2 norm."""
        eta = np.ones(len(x0))
        live = _l2(d) > 0
        floors = self._keep_floors()
        for _ in range(self.min_steps):
            rows = np.flatnonzero(live)
            if not len(rows):
                break
            dr, x0r = d[rows], x0[rows]
            vals, grads = self._keep_gradients(self._clip(x0r + dr), y[rows],
                                               _subset(ctx, rows))
            shaped = self._shaped(grads, x0r, dr, cstate, rows, rng)
            # a floor moves along +g only (its multiplier is >= 0): keep it inside the box
            shaped = [_inside(g, x0r, self.box) if f == "floor" else g
                      for g, f in zip(shaped, floors)]
            # first order: v + g.(d' - d) >= 0 ("floor") or = v ("hold")
            bounds = [np.sum(_flat(g) * _flat(dr), axis=1) - (v if f == "floor" else 0.0)
                      for g, v, f in zip(shaped, vals, floors)]
            target = _nearest(shaped, bounds, tuple(f == "hold" for f in floors))
            cand = self._project(dr + _times(eta[rows], target - dr), x0r)
            hi = _l2(dr) / np.maximum(_l2(cand), 1e-12)
            good = ok(self._project(_times(hi, cand), x0r), rows)
            if good.any():
                g_rows, c = rows[good], cand[good]
                s = _bisect(lambda s: self._project(_times(s, c), x0[g_rows]),
                            lambda dd: ok(dd, g_rows), hi[good], STEP_ROUNDS, lo=0.5)
                new = self._project(_times(s, c), x0[g_rows])
                better = _l2(new) < _l2(d[g_rows])
                d[g_rows[better]] = new[better]
            eta[rows] = np.where(good, np.minimum(1.0, 2 * eta[rows]), eta[rows] / 2)
            live &= eta >= 0.125
        return d

    def _shaped(self, grads, x0r, dr, cstate, rows, rng) -> list[np.ndarray]:
        """The kept values' gradients as the constraint lets a step at x0 + d move (rows)."""
        state = {k: v[rows] for k, v in cstate.items()}
        return [_along(g, self.constraint.direction(g, x0r, dr, state, rng)) for g in grads]

    def _polish(self, kind, x0, y, d, ctx, cstate, ok, rng) -> np.ndarray:
        """Up to ``polish_steps`` steps from the refined perturbations d that may leave the
        feasible set (the refine's steps may not): "adam", Adam on ||d|| plus a penalty on each
        floor within NEAR_FLOOR of being broken (C&W's penalty form, Carlini and Wagner 2017,
        with each floor's first-order distance); "fab", FAB's step (Croce and Hein 2020,
        fab_base.py's attack_single_run): the projection of the current point and of the seed
        onto the linearized floors, mixed, the seed's share at most FAB_ALPHA_MAX, then from a
        passing point the backward step toward the seed. A point passes by the floors' values;
        per seed the smallest passing one is kept only if ``ok`` confirms it and it lowers L2.
        A seed leaves after POLISH_PATIENCE steps without a smaller passing point."""
        floors = self._keep_floors()
        best, best_l2 = d.copy(), _l2(d)
        w, moments = d.copy(), (np.zeros_like(d), np.zeros_like(d))
        idle = np.zeros(len(d), int)
        live = best_l2 > 0
        for t in range(self.polish_steps + 1):
            rows = np.flatnonzero(live)
            if not len(rows):
                break
            wr, x0r = w[rows], x0[rows]
            vals, grads = self._keep_gradients(self._clip(x0r + wr), y[rows],
                                               _subset(ctx, rows))
            passes = np.all([v > 0 for v, f in zip(vals, floors) if f == "floor"], axis=0)
            better = passes & (_l2(wr) < best_l2[rows])
            best[rows[better]], best_l2[rows[better]] = wr[better], _l2(wr)[better]
            idle[rows] = np.where(better, 0, idle[rows] + 1)
            live[rows[idle[rows] > POLISH_PATIENCE]] = False
            if t == self.polish_steps:
                break
            shaped = self._shaped(grads, x0r, wr, cstate, rows, rng)
            if kind == "adam":
                w[rows] = self._adam_step(t, rows, wr, x0r, vals, shaped, floors, moments)
            else:
                w[rows] = self._fab_step(wr, x0r, vals, shaped, floors, passes)
        found = best_l2 < _l2(d)
        rows = np.flatnonzero(found)
        if len(rows):
            good = ok(best[rows], rows)
            d[rows[good]] = best[rows[good]]
        return d

    def _adam_step(self, t, rows, wr, x0r, vals, grads, floors, moments) -> np.ndarray:
        """One Adam step (Kingma and Ba) on ||d|| - sum over near floors of v / ||g||."""
        norm = np.maximum(_l2(wr), 1e-12)
        g = _times(1.0 / norm, wr).astype(np.float64)
        for v, gi, f in zip(vals, grads, floors):
            gn = np.maximum(_l2(gi), 1e-12)
            if f == "floor":
                g -= _times((v / gn < NEAR_FLOOR) / gn, gi)
        m, s = moments
        m[rows] = 0.9 * m[rows] + 0.1 * g
        s[rows] = 0.999 * s[rows] + 0.001 * g * g
        step = (m[rows] / (1 - 0.9 ** (t + 1))) / (np.sqrt(s[rows] / (1 - 0.999 ** (t + 1)))
                                                   + 1e-8)
        return self._project((wr - ADAM_RATE * step).astype(np.float32), x0r)

    def _fab_step(self, wr, x0r, vals, grads, floors, passes) -> np.ndarray:
        """FAB's step for several floors: the nearest point of the linearized floors from the
        current point (e) and from the seed (t0), mixed; from a passing point, then scaled
        toward the seed by FAB_BETA."""
        hold = tuple(f == "hold" for f in floors)
        xr = self._clip(x0r + wr)
        # first order at the current point: v + g.(d' - w) >= 0 ("floor") or = v ("hold")
        inside = lambda x: [g if h else _inside(g, x, self.box) for g, h in zip(grads, hold)]  # noqa
        from_seed = _nearest(inside(x0r),
                             [np.sum(_flat(g) * _flat(wr), axis=1) - (0.0 if h else v)
                              for g, v, h in zip(grads, vals, hold)], hold)
        from_here = _nearest(inside(xr),
                             [np.zeros_like(v) if h else -v for v, h in zip(vals, hold)], hold)
        a, b = _l2(from_here), _l2(from_seed)
        alpha = np.minimum(a / np.maximum(a + b, 1e-12), FAB_ALPHA_MAX)
        new = (_times(1 - alpha, wr + FAB_ETA * from_here)
               + _times(alpha * FAB_ETA, from_seed))
        new = _times(np.where(passes, FAB_BETA, 1.0), self._project(new, x0r))
        return self._project(new, x0r)

    def get_config(self) -> dict:
        """... plus the constraint's own parameters (e.g. an occlusion's size), if any."""
        return {**super().get_config(), **{k: v for k, v in self.constraint.get_config().items()
                                           if k != "name"}}


def _ticker(progress: ProgressFn, base: int, size: int, total: int) -> Callable[[int], None]:
    """progress(base + n, total) for a batch of ``size`` seeds, only when n grows."""
    last = [0]

    def tick(n: int) -> None:
        n = min(n, size)
        if n > last[0]:
            last[0] = n
            progress(base + n, total)
    return tick


def _subset(ctx: dict, idx: np.ndarray) -> dict:
    return {k: (v if k.startswith("_") else v[idx]) for k, v in ctx.items()}


def _compiled(fn, args):
    """tf.function of fn(x, y, ctx) traced once for every batch: the batch size (and every
    size of the ctx arrays, e.g. a batch's union of targets) left open in its signature, where
    ``reduce_retracing`` would trace again for the first new size."""

    def spec(t, keep=0):
        return tf.TensorSpec([d if i >= 1 and i < keep else None
                              for i, d in enumerate(t.shape)], t.dtype)
    x, y, ctx = args
    return tf.function(fn, input_signature=[spec(x, keep=len(x.shape)), spec(y),
                                            {k: spec(v) for k, v in ctx.items()}])


def perturbation_norms(d: np.ndarray) -> dict[str, np.ndarray]:
    """Per-seed L2, L1 and L-infinity norms of perturbations d (B, ...)."""
    f = d.reshape(len(d), int(np.prod(d.shape[1:]))).astype(np.float32)
    return {"l2": np.linalg.norm(f, axis=1), "l1": np.abs(f).sum(axis=1),
            "linf": np.abs(f).max(axis=1, initial=0.0)}


def _l2(d: np.ndarray) -> np.ndarray:
    return np.linalg.norm(d.reshape(len(d), int(np.prod(d.shape[1:]))), axis=1)


def _times(s: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Each row of d times its own scale s (B,)."""
    return (np.asarray(s).reshape((-1,) + (1,) * (d.ndim - 1)) * d).astype(np.float32)


def _bisect(make, ok, hi: np.ndarray, rounds: int, lo: float = 0.0) -> np.ndarray:
    """Per row the smallest scale s in (lo, hi] (to within (hi - lo) / 2**rounds) with
    ok(make(s)), given that ok(make(hi)) holds. ok need not be monotone: every answer is a
    scale that passed (hi moves only to scales that did)."""
    lo = np.minimum(np.full_like(hi, lo), hi)
    for _ in range(rounds):
        mid = (lo + hi) / 2
        good = ok(make(mid))
        hi, lo = np.where(good, mid, hi), np.where(good, lo, mid)
    return hi


def _flat(a: np.ndarray) -> np.ndarray:
    return a.reshape(len(a), -1).astype(np.float64)


def _along(g: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """The part of each row of g along that row's (constraint-shaped) direction: g itself
    without a constraint, g inside the rectangle for an occlusion."""
    gf, uf = _flat(g), _flat(direction)
    coef = np.sum(gf * uf, axis=1) / np.maximum(np.sum(uf * uf, axis=1), 1e-30)
    return (coef[:, None] * uf).reshape(g.shape)


def _inside(g: np.ndarray, x0: np.ndarray, box: tuple = UNIT_BOX) -> np.ndarray:
    """g without the values it would push out of the box (``data_box``) from the seed (a move
    along +g from x0 there is clipped away): the box's active bounds, as FAB's projection
    (Croce and Hein 2020) keeps them."""
    lo, hi = box
    return np.where(((x0 <= lo) & (g < 0)) | ((x0 >= hi) & (g > 0)), 0.0, g).astype(g.dtype)


def _nearest(grads: list[np.ndarray], bounds: list[np.ndarray],
             equal: tuple = ()) -> np.ndarray:
    """Per row the smallest vector d (L2) with g_i . d >= b_i for every i, or g_i . d = b_i
    where ``equal[i]`` (a few constraints: each subset of the inequalities tried as the active
    set beside every equality, the smallest d that satisfies all kept); rows where none is
    found keep d = 0 (the caller's line search then decides)."""
    G = np.stack([_flat(g) for g in grads], axis=1)             # (B, m, n)
    b = np.stack(bounds, axis=1).astype(np.float64)               # (B, m)
    B, m, n = G.shape
    eq = np.array([bool(equal[i]) if i < len(equal) else False for i in range(m)])
    tol = 1e-9 * (1 + np.abs(b))
    best = np.zeros((B, n))
    best_norm = np.where((b <= 0)[:, ~eq].all(axis=1) & (np.abs(b) <= tol)[:, eq].all(axis=1),
                         0.0, np.inf)
    free = [i for i in range(m) if not eq[i]]
    fixed = [i for i in range(m) if eq[i]]
    for size in range(0 if fixed else 1, len(free) + 1):
        for S in itertools.combinations(free, size):
            S = fixed + list(S)
            Gs = G[:, S]                                            # (B, s, n)
            gram = Gs @ Gs.transpose(0, 2, 1) + 1e-12 * np.eye(len(S))
            lam = np.linalg.solve(gram, b[:, S, None])[..., 0]      # (B, s)
            d = np.einsum("bs,bsn->bn", lam, Gs)
            ok = (lam >= 0) | eq[S]
            feasible = ok.all(axis=1) & (
                np.einsum("bmn,bn->bm", G, d) >= b - tol)[:, ~eq].all(axis=1)
            norm = np.linalg.norm(d, axis=1)
            take = feasible & (norm < best_norm)
            best[take], best_norm[take] = d[take], norm[take]
    return best.reshape(grads[0].shape).astype(np.float32)


def select_seeds(model, x: np.ndarray, y: np.ndarray, n: int, correct_only: bool = True,
                 batch_size: int = 512) -> np.ndarray:
    """Indices of the first ``n`` inputs (predicted right by ``model`` when correct_only): the
    seeds of generation runs and campaigns."""
    if n < 1:
        raise InputError(f"the seed set is empty: ask for at least one seed (got {n})")
    if not correct_only:
        return np.arange(min(n, len(x)))
    picked: list[np.ndarray] = []
    count = 0
    for i in range(0, len(x), batch_size):
        pred = predict_proba(model, x[i:i + batch_size]).argmax(1)
        ok = np.flatnonzero(pred == y[i:i + batch_size]) + i
        picked.append(ok)
        count += len(ok)
        if count >= n:
            break
    idx = np.concatenate(picked)[:n] if picked else np.zeros(0, np.int64)
    if len(idx) == 0:
        raise InputError("the model predicts none of the inputs right: no seeds to start from")
    return idx
