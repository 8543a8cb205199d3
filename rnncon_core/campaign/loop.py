"""One campaign's loop, as an object whose whole state is a value (checkpoint, resume, Ray).

A step (one batch): pick parents from the queue (``queue.SeedQueue.pick``), make ``mutants``
of each (``mutations.Mutator``, valid ones only), run ONE traced forward pass over them
(``Campaign.run``: ``Criterion.update_with_outputs`` gives the guide's coverage update, the
predictions and the last hidden state together, as DeepHunter's ``fetch_function`` reads
coverage and predictions from one run), record the faults (prediction differs from the root
seed's label; distinct by (label, prediction, abstract state of the last hidden state), each
re-predicted by the model's own forward pass before it is kept) and keep in the queue the
other mutants that raised the guide's coverage (``Criterion.new_items``: the items each input
covered first; the guide takes every valid mutant, faults included). Two unguided baselines
(no criterion, coverage not measured): guide ``none`` keeps every valid mutant that is not a
fault (DeepHunter's random mode, where ``has_new_bits`` is always true); guide ``faults``
(``faults_only``) keeps only the new distinct faults, whatever ``explore_faults`` says (else
its queue would never grow): what every guide keeps once its coverage has saturated, so it
tells what a criterion adds beyond keeping few mutants (docs/results.md, "Test campaigns").
Inspired by DeepHunter's Algorithm 1 and TensorFuzz's corpus loop (Odena et al., ICML 2019:
mutate an element, keep it if its coverage is new); neither handles recurrent models nor more
than one criterion.

Two declared options aim the loop's model calls at faults not found yet (most faulty mutants
repeat a (true, predicted, abstract state) key already found, so the count of distinct faults
grows ever slower with the calls):

- ``explore_faults``: a mutant that is a NEW distinct fault enters the queue as a parent too
  (with its lineage's reference, root and root label, so its own mutants stay within the same
  validity bounds and are faults against the root seed's label). AFL's crash exploration mode
  is the precedent (``afl-fuzz -C``: in ``save_if_interesting``, AFL++
  ``src/afl-fuzz-bitmap.c``, a crashing input with new coverage bits is queued for further
  fuzzing); DeepHunter does not do this (``ImageInputCorpus.save_if_interesting``,
  ``deephunter/image_queue.py``, writes a crash to its crashes folder and never queues it).
  A mutant of a fault that keeps the wrong prediction but reaches another abstract state is a
  new distinct fault by the campaign's own definition.
- ``stale_picks``: per root seed, the picks in a row whose mutants found no new distinct fault
  (``Campaign.stale``, part of the state); every entry of that root's lineage has its pick
  weight halved every ``stale_picks`` such picks, and a new distinct fault resets the count
  (the idea of AFLFast's power schedules, Böhme et al. CCS 2016, AFL++'s ``n_fuzz``: less
  energy for what keeps being exercised).

Randomness: one ``numpy.random.Generator`` (seeded with ``seed``) drives every choice; its state
is part of the checkpoint, so a resumed campaign draws what the uninterrupted one would have.
"""
from __future__ import annotations

import json
import time

import numpy as np

from ..coverage.base import forward_outputs
from ..errors import InputError
from ..generate.base import compiled_forward, shared
from ..generate.guided import prediction_term
from ..lazy import tf
from ..params import Bool, Interval, IntRange, Param, Params
from ..zoo import class_labels
from .classes import feature_model
from .mutations import MUTATION_PARAMS, Mutator
from .queue import FaultSet, SeedQueue

CURVE_COLUMNS = ("seconds", "calls", "coverage", "distinct_faults", "distinct_pairs",
                 "queue", "faults", "model_seconds", "valid_faults", "valid_pairs",
                 "valid_roots")

LOOP_PARAMS = Params(
    Param("parents", 8, IntRange(1, 4096), "Queue entries picked per batch.",
          kinds=("image", "text", "sequence"), level="more"),
    Param("mutants", 8, IntRange(1, 1024), "Mutants made of each picked entry.",
          kinds=("image", "text", "sequence"), level="more"),
    Param("p_init", 0.8, Interval(0.0, 1.0, lo_open=True), "DeepHunter's initial pick "
          "probability.", kinds=("image", "text", "sequence"), level="cli"),
    Param("p_min", 0.3, Interval(0.0, 1.0, lo_open=True), "DeepHunter's least pick "
          "probability.", kinds=("image", "text", "sequence"), level="cli"),
    Param("gamma", 5.0, Interval(0.0, 1e6, lo_open=True), "Picks over which the probability "
          "decays (DeepHunter's γ).", kinds=("image", "text", "sequence"), level="cli"),
    Param("explore_faults", True, Bool(), "A mutant that is a new distinct fault enters the "
          "queue as a parent too (AFL's crash exploration; DeepHunter keeps no fault): its "
          "mutants stay within the bounds of its lineage's reference and are faults against "
          "the root seed's label.", kinds=("image", "text", "sequence"), level="more"),
    Param("stale_picks", 4.0, Interval(0.0, 1e6), "Picks of a root seed in a row whose "
          "mutants found no new distinct fault over which the pick weight of its lineage "
          "halves (0: off).", kinds=("image", "text", "sequence"), level="more"),
    Param("max_queue", 50_000, IntRange(1), "Most queue entries (memory bound).",
          kinds=("image", "text", "sequence"), level="more"),
    Param("components", 3, IntRange(1, 8), "Principal axes of the abstract state (DeepStellar) "
          "that tells faults apart.", kinds=("image", "text", "sequence"), level="more"),
    Param("cells", 10, IntRange(1, 1000), "Cells per axis of the abstract state.",
          kinds=("image", "text", "sequence"), level="more"))
CAMPAIGN_PARAMS = Params(*MUTATION_PARAMS, *LOOP_PARAMS)
# the loop's yield options as campaigns stored before they existed ran (their config lacks them)
YIELD_BEFORE = {"explore_faults": False, "stale_picks": 0.0}


def loop_label(values: dict) -> str:
    """The yield options of a campaign's loop, as text ("explore_faults=True,stale_picks=4"):
    what tells campaigns of the old loop (``YIELD_BEFORE``) from the new in a report."""
    v = {**YIELD_BEFORE, **{k: values[k] for k in YIELD_BEFORE if k in values}}
    return f"explore_faults={bool(v['explore_faults'])},stale_picks={float(v['stale_picks']):g}"


def widen_curve(rows) -> np.ndarray:
    """Curve rows of any earlier version (fewer columns: no validity) padded with NaN."""
    rows = np.asarray(rows, np.float64)
    rows = rows.reshape(len(rows), -1) if rows.size else np.zeros((0, len(CURVE_COLUMNS)))
    if rows.shape[1] < len(CURVE_COLUMNS):
        pad = np.full((len(rows), len(CURVE_COLUMNS) - rows.shape[1]), np.nan)
        rows = np.concatenate([rows, pad], axis=1)
    return rows


def _grad_fn(model):
    """d(prediction term)/dx for float inputs: the generators' objective (other classes'
    logits minus the label's), compiled once per model."""

    fwd = compiled_forward(model)

    def make():
        @tf.function(reduce_retracing=True)
        def grad(x, y):
            with tf.GradientTape() as tape:
                tape.watch(x)
                obj = prediction_term(fwd(x), y)
            return tape.gradient(obj, x)
        return grad
    fn = shared(model, ("campaign-grad",), make)
    return lambda x, y: fn(tf.constant(x, tf.float32), tf.constant(y, tf.int64)).numpy()


def guide_gains(guide, x) -> np.ndarray:
    """Update the guide with x; per input, how much coverage it added first (in items, or in
    weight for a weighted criterion), read from the guide's growth curve."""
    n0 = guide.n_inputs
    before = guide.rate()
    guide.update(x)
    return gains_since(guide, n0, before, len(x))


def gains_since(guide, n0: int, before: float, n: int) -> np.ndarray:
    """Per input of the last ``n`` given to the guide (after ``n0`` inputs, at rate
    ``before``): the coverage it added first (``Criterion.new_items``)."""
    try:
        gain = guide.new_items(n0)[:n]
    except InputError:            # no growth curve at this threshold: the batch's gain, shared
        gain = np.full(n, (guide.rate() - before) * max(1, guide.total) / max(1, n))
    return np.maximum(gain, 0.0)


class Campaign:
    """The loop's state and one batch at a time (``start`` once, then ``step``)."""

    def __init__(self, model, x, y, guide, values: dict, seed: int, kind: str,
                 abstraction, lexicon=None, faults_only: bool = False, validity=None):
        self.model, self.kind, self.values = model, kind, values
        self.validity = validity               # a validity.Oracle, or None (not checked)
        self.validity_seconds = 0.0            # spent checking faults and reading features
        self.guide = guide                     # a Criterion, or None (unguided)
        if faults_only and guide is not None:
            raise InputError("faults_only is the unguided baseline 'faults': give no guide")
        self.faults_only = faults_only         # keep only the new distinct faults
        if guide is not None:
            guide.KEEP_INPUTS = 0              # no inputs kept inside the guide (memory)
        self.abstraction = abstraction
        self.mutator = Mutator(kind, values, lexicon)
        self.x_seeds, self.y_seeds = x, np.asarray(y, np.int64)
        self.rng = np.random.default_rng(seed)
        self.queue = SeedQueue(values["p_init"], values["p_min"], values["gamma"],
                               values["max_queue"])
        self.faults = FaultSet()
        self.stale = np.zeros(len(x), np.int64)   # per root: picks in a row without a new fault
        self.curve: list[list[float]] = []
        self.calls, self.batches = 0, 0
        self.seconds = self.model_seconds = 0.0      # elapsed before this process's clock
        self.unstable = 0          # faults whose prediction changed when re-predicted
        self.delta = None          # on Ray: a second guide state of this round's inputs only
        self._clock = None
        self._grad = _grad_fn(model) if kind == "image" and \
            "gradient" in self.mutator.families else None
        self._outputs = None        # the traced pass without a guide (coverage.forward_outputs)
        self._with_features = None  # predictions and penultimate features (fault classes)

    # -- the model
    def predict(self, x) -> np.ndarray:

        t0 = time.perf_counter()
        fwd = compiled_forward(self.model)
        dtype = tf.int32 if self.kind == "text" else tf.float32
        out = [class_labels(np.asarray(fwd(tf.constant(x[i:i + 512], dtype))))
               for i in range(0, len(x), 512)]
        self.model_seconds += time.perf_counter() - t0
        self.calls += len(x)
        return np.concatenate(out) if out else np.zeros(0, np.int64)

    def predict_features(self, x) -> tuple[np.ndarray, np.ndarray]:
        """The model's own forward pass over x: (predicted labels, the penultimate layer's
        output, which fault classes are clustered in: ``classes``)."""

        dtype = tf.int32 if self.kind == "text" else tf.float32
        if self._with_features is None:      # one trace for every batch size
            fm = feature_model(self.model)
            spec = tf.TensorSpec([None, *self.x_seeds.shape[1:]], dtype)
            self._with_features = tf.function(lambda t: fm(t, training=False),
                                              input_signature=[spec])
        t0 = time.perf_counter()
        outs = [self._with_features(tf.constant(x[i:i + 512], dtype))
                for i in range(0, len(x), 512)]
        self.model_seconds += time.perf_counter() - t0
        self.calls += len(x)
        pred = np.concatenate([class_labels(np.asarray(o[0])) for o in outs])
        feat = np.concatenate([np.asarray(o[1], np.float32).reshape(len(o[1]), -1)
                               for o in outs])
        return pred, feat

    def run(self, x) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """ONE traced forward pass over the batch: (predictions, the last step's hidden
        state of the last recurrent layer (the faults' abstract states), the guide's gain
        per input); the guide (and, on Ray, this round's delta) take every input."""
        t0 = time.perf_counter()
        g = self.guide
        got = None
        if g is not None:
            n0, before = g.n_inputs, g.rate()
            got = g.update_with_outputs(x, also=() if self.delta is None else (self.delta,))
            gain = gains_since(g, n0, before, len(x))
        else:
            gain = np.zeros(len(x))
        if got is None:
            if self._outputs is None:
                self._outputs = forward_outputs(self.model)
            got = self._outputs(x)
        self.model_seconds += time.perf_counter() - t0
        self.calls += len(x)
        return class_labels(got[0]), got[1], gain

    def gradient(self, x, y):
        t0 = time.perf_counter()
        g = self._grad(x, y)
        self.model_seconds += time.perf_counter() - t0
        self.calls += len(x)
        return g

    def elapsed(self) -> float:
        return self.seconds + (time.perf_counter() - self._clock if self._clock else 0.0)

    def resume_clock(self) -> None:
        self._clock = time.perf_counter()

    def coverage(self) -> float:
        return float(self.guide.rate()) if self.guide is not None else float("nan")

    # -- the loop
    def warm_up(self) -> None:
        """Trace every compiled function (two batch sizes: the graphs generalize the batch
        axis on the second) before the clock starts; nothing is counted or kept."""
        x, y = self.x_seeds[:2], self.y_seeds[:2]
        calls, secs = self.calls, self.model_seconds
        for part in (x[:1], x):
            self.predict(part)
            self.predict_features(part)
            if self.validity is not None:
                self.validity.check(part, y[:len(part)], part)
            if self._grad is not None:
                self.gradient(part, y[:len(part)])
        self.calls, self.model_seconds = calls, secs
        if self.abstraction is not None:
            self.abstraction.states_of_hidden(np.zeros((1, self.abstraction._spec.units)))
            if self.guide is None:
                self._outputs = forward_outputs(self.model)
                for part in (x[:1], x):
                    self._outputs(part)
        if self.kind == "text":     # the substitutes of the seeds' words (WordNet, tagger)
            xs = self.x_seeds
            self.mutator.mutate(xs, xs, np.zeros(len(xs), bool), self.y_seeds,
                                np.random.default_rng(0))
        if self.guide is not None:
            twin = type(self.guide).from_config(self.model, self.guide.get_config())
            for part in (x[:1], x):
                twin.update_with_outputs(part)

    def start(self, warm: bool = True) -> None:
        """The dry run: the seeds' predictions and coverage; every seed enters the queue
        (``warm=False``: ``warm_up`` was called already)."""
        if warm:
            self.warm_up()
        self.resume_clock()
        x, y = self.x_seeds, self.y_seeds
        pred = self.predict(x)
        if np.any(pred != y):
            raise InputError("every seed must be predicted right (a campaign looks for inputs "
                             "whose prediction differs from their seed's label)")
        gain = guide_gains(self.guide, x) if self.guide is not None else np.zeros(len(x))
        n = len(x)
        self.queue.add(x=x, ref=x, root=np.arange(n), label=y, shifted=np.zeros(n, bool),
                       gain=gain, depth=np.zeros(n, np.int64), parent=np.full(n, -1))
        self._record()

    def step(self) -> dict:
        """One batch; returns what it added (for the run store and the Ray driver)."""
        q, v = self.queue, self.values
        picked = q.pick(self.rng, v["parents"], self._pick_scale())
        idx = np.repeat(picked, v["mutants"])
        rows = q.rows
        x, ref, label = rows["x"][idx], rows["ref"][idx], rows["label"][idx]
        grad = None if self._grad is None else self.gradient
        new, new_ref, shifted, ops, pos = self.mutator.mutate(
            x, ref, rows["shifted"][idx], label, self.rng, grad)
        idx, label = idx[pos], label[pos]
        q_start, f_start = len(q), len(self.faults)
        found = np.zeros(0, np.int64)            # parents of the new distinct faults
        if len(new):
            pred, hidden, gain = self.run(new)   # the guide takes every valid mutant
            bad = np.flatnonzero(pred != label)
            kept = self._faults(new[bad], idx[bad], label[bad], pred[bad], np.array(ops)[bad],
                                hidden[bad])
            found = idx[bad[kept]]             # (kept: the new VALID distinct faults)
            keep = self._keep(pred == label, gain)
            if v["explore_faults"] or self.faults_only:    # a new distinct fault: a parent
                keep[bad[kept]] = True
            sel = np.flatnonzero(keep)
            parents = idx[sel]
            q.add(x=new[sel], ref=new_ref[sel], root=rows["root"][parents],
                  label=label[sel], shifted=shifted[sel], gain=gain[sel],
                  depth=rows["depth"][parents] + 1, parent=parents)
        self._mark_stale(rows["root"][picked], rows["root"][found])
        self.batches += 1
        self._record()
        return {"queue": (q_start, len(q)), "faults": (f_start, len(self.faults))}

    def _keep(self, right, gain) -> np.ndarray:
        """The mutants predicted right kept as parents: those that raised the guide's
        coverage; with no guide, every one (``none``) or none at all (``faults``)."""
        if self.faults_only:
            return np.zeros(len(right), bool)
        return right & (gain > 0) if self.guide is not None else right

    def _pick_scale(self):
        """Per queue entry: 0.5 ** (its root's fruitless picks in a row / ``stale_picks``)
        (None when off)."""
        half = self.values["stale_picks"]
        if not half:
            return None
        return np.exp2(-np.minimum(self.stale / half, 30.0))[self.queue.rows["root"]]

    def _mark_stale(self, picked_roots, fruitful_roots) -> None:
        """A picked root's count of fruitless picks in a row: +1 per pick, back to 0 when
        one of its mutants was a new distinct fault (kept whether or not ``stale_picks`` is
        on, so the state is the same either way)."""
        np.add.at(self.stale, picked_roots, 1)
        self.stale[fruitful_roots] = 0

    def _faults(self, x, parent, label, pred, ops, hidden) -> np.ndarray:
        """Record the new distinct faults among these faulty mutants: each checked for
        validity (``validity``: would a reader still give it its root seed's label?) and
        re-predicted by the model's own forward pass before it is kept; returns the positions
        of the new VALID distinct faults (only those become parents or reset a root's stale
        count; an invalid one is kept with its reason, for the gallery)."""
        none = np.zeros(0, np.int64)
        if not len(x):
            return none
        self.faults.total += len(x)
        state = self.abstraction.states_of_hidden(hidden)
        todo = np.flatnonzero(~self.faults.known_valid(label, pred, state))
        if not len(todo):
            return none
        root = self.queue.rows["root"][parent[todo]]
        t0 = time.perf_counter()
        verdict = self.validity.check(x[todo], label[todo], self.x_seeds[root]) \
            if self.validity is not None else None
        self.validity_seconds += time.perf_counter() - t0
        valid = np.ones(len(todo), bool) if verdict is None else verdict.valid
        new = self.faults.new_mask(label[todo], pred[todo], state[todo], valid)
        if not new.any():
            return none
        at = todo[new]
        t0, m0 = time.perf_counter(), self.model_seconds
        again, feature = self.predict_features(x[at])   # every fault re-predicted first
        self.validity_seconds += time.perf_counter() - t0 - (self.model_seconds - m0)
        stable = again == pred[at]
        self.unstable += int((~stable).sum())
        m = int(stable.sum())
        # without a verdict FaultSet.add marks the rows valid (not checked)
        cols = {} if verdict is None else {k: v[new][stable] for k, v in verdict.rows().items()}
        self.faults.add(x=x[at][stable], root=root[new][stable], label=label[at][stable],
                        pred=pred[at][stable], state=state[at][stable],
                        op=ops[at][stable].astype("<U24"), batch=np.full(m, self.batches),
                        calls=np.full(m, self.calls), seconds=np.full(m, self.elapsed()),
                        feature=feature[stable], **cols)
        return at[stable & valid[new]]

    def _record(self) -> None:
        f = self.faults
        self.curve.append([self.elapsed(), self.calls, self.coverage(), len(f),
                           len(f.pairs), len(self.queue), f.total, self.model_seconds,
                           f.n_valid, len(f.valid_pairs), len(f.valid_roots)])

    # -- the state as a value
    def state(self, curve: bool = True) -> dict:
        """Everything mutable besides the queue's and faults' rows (which only grow); the
        curve too unless ``curve=False`` (the run appends its new rows to a log)."""
        out = {"picks": self.queue.picks.copy(), "stale": self.stale.copy(),
               "counters": np.array(json.dumps({
                   "calls": self.calls, "batches": self.batches, "seconds": self.elapsed(),
                   "model_seconds": self.model_seconds, "unstable": self.unstable,
                   "validity_seconds": self.validity_seconds,
                   "faults_total": self.faults.total, "n_queue": len(self.queue),
                   "n_faults": len(self.faults), "rng": self.rng.bit_generator.state}))}
        if curve:
            out["curve"] = np.array(self.curve, np.float64)
        if self.guide is not None:
            out.update({f"guide/{k}": np.asarray(a) for k, a in
                        self.guide.state().items()})
        return out

    def restore(self, state: dict, queue: dict, faults: dict, warm: bool = True) -> None:
        """Back to a saved state (rows beyond the state's counts, written after it, are
        dropped)."""
        c = json.loads(str(state["counters"]))
        self.queue = SeedQueue(self.queue.p_init, self.queue.p_min, self.queue.gamma,
                               self.queue.capacity)
        self.queue.add(**{k: np.asarray(v)[:c["n_queue"]] for k, v in queue.items()})
        self.queue.picks = np.asarray(state["picks"], np.int64).copy()
        if "stale" in state:                     # (checkpoints before it: all zeros)
            self.stale = np.asarray(state["stale"], np.int64).copy()
        self.faults.load({k: np.asarray(v)[:c["n_faults"]] for k, v in (faults or {}).items()})
        self.faults.total = c["faults_total"]
        self.curve = widen_curve(state.get("curve", np.zeros((0, len(CURVE_COLUMNS))))).tolist()
        self.calls, self.batches = c["calls"], c["batches"]
        self.seconds, self.model_seconds = c["seconds"], c["model_seconds"]
        self.unstable = c["unstable"]
        self.validity_seconds = c.get("validity_seconds", 0.0)
        if warm:
            self.warm_up()
        self.rng.bit_generator.state = c["rng"]
        if self.guide is not None:
            self.guide.load_state({k[6:]: v for k, v in state.items()
                                    if k.startswith("guide/")})
        self.resume_clock()
