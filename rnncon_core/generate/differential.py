"""DeepXplore's differential testing over two or more models (Pei et al., Algorithm 1).

Labels are the models' majority vote on each seed (no ground truth needed). Per seed one model
j is drawn; gradient ascent maximizes

    obj = sum_{k != j} F_k(x)[c]  -  lambda1 * F_j(x)[c]  +  lambda2 * f_n(x)

where c is the seed's voted class and f_n the scaled output of a neuron of model j that the
seeds leave inactive (DeepXplore's coverage term, threshold t). A generated input counts when
the seed had all models agree and the models disagree on it (a difference-inducing input).
"""
from __future__ import annotations

import numpy as np

from ..coverage import NeuronCoverage
from ..errors import InputError
from ..lazy import tf
from ..params import Interval, Param
from ..zoo import class_labels
from .base import GradientGenerator, compiled_forward, predict_proba


class Differential(GradientGenerator):
    """DeepXplore's differential testing against other models (see the module docstring)."""
    method = "differential"
    params = GradientGenerator.params.add(
        Param("lambda1", 1.0, Interval(0.0, 1e3), "DeepXplore's lambda1: weight of model j's "
                                                  "own class probability.", level="more"),
        Param("lambda2", 0.1, Interval(0.0, 1e3), "DeepXplore's lambda2: weight of the neuron "
                                                  "coverage term (0: none).", level="more"),
        Param("threshold", 0.0, Interval(0.0, 1.0), "Neuron activation threshold of the "
                                                    "coverage term.", level="more"))
    accepts = ("others",)                   # the other models (Keras models)
    needs_others = True

    def __init__(self, model, *, others=(), lambda1: float, lambda2: float, threshold: float,
                 **kw):
        super().__init__(model, **kw)
        self.models = [model, *others]
        if len(self.models) < 2:
            raise InputError("differential testing needs at least two models: give the others "
                             "(CLI: --models a,b)")
        shape = tuple(model.input_shape[1:])
        for m in self.models[1:]:
            if tuple(m.input_shape[1:]) != shape or m.output_shape[-1] != model.output_shape[-1]:
                raise InputError(f"model {m.name!r} takes {tuple(m.input_shape[1:])} -> "
                                 f"{m.output_shape[-1]} classes, but {model.name!r} takes "
                                 f"{shape} -> {model.output_shape[-1]}: differential testing "
                                 f"needs models of the same task")
        self.lambda1, self.lambda2, self.threshold = float(lambda1), float(lambda2), \
            float(threshold)
        self._nc = None
        self._pools: list[np.ndarray] = []
        self._forwards = [compiled_forward(m) for m in self.models]

    def _votes(self, x: np.ndarray) -> np.ndarray:
        """(M, N) predictions of every model."""
        return np.stack([class_labels(predict_proba(m, x)) for m in self.models])

    @staticmethod
    def majority(votes: np.ndarray) -> np.ndarray:
        """The most frequent class per column (ties: the smallest class)."""
        n_cls = int(votes.max()) + 1
        counts = np.stack([(votes == c).sum(0) for c in range(n_cls)])
        return counts.argmax(0)

    def _prepare(self, x, y):
        self._pools = []
        self._step_fn = None        # the objective's graph holds the pools: trace it again
        if self.lambda2 > 0:
            if self._nc is None:
                self._nc = [NeuronCoverage(m, threshold=self.threshold) for m in self.models]
            for nc in self._nc:
                nc.reset()
                for i in range(0, len(x), 256):
                    nc.update(x[i:i + 256])
                self._pools.append(np.asarray(nc.report.uncovered(None), np.int64))

    def _generate_batch(self, x, y, rng):
        votes = self._votes(x)
        label = self.majority(votes)
        self._agree = (votes == label).all(0)
        out = super()._generate_batch(x, label, rng)
        out.extras["label_vote"] = label
        out.extras["model_j"] = self._last_ctx["j"]
        return out

    def _context(self, x, y, rng):
        B, M = len(x), len(self.models)
        j = rng.integers(0, M, B)
        neuron = np.full(B, -1, np.int64)
        if self.lambda2 > 0:
            for b in range(B):
                pool = self._pools[j[b]]
                if len(pool):
                    neuron[b] = rng.choice(pool)
        ctx = {"j": j.astype(np.int64), "neuron": neuron}
        self._last_ctx = ctx
        return ctx

    def _objective(self, x, y, ctx):
        j, neuron = ctx["j"], ctx["neuron"]
        obj = 0.0
        for m_i, fwd in enumerate(self._forwards):
            out = fwd(x)                       # class probabilities, two or more columns
            pc = tf.gather(out, y, axis=1, batch_dims=1)
            is_j = tf.cast(tf.equal(j, m_i), pc.dtype)
            obj = obj + (1 - is_j) * pc - self.lambda1 * is_j * pc
            if self.lambda2 > 0 and len(self._pools[m_i]):
                # the seeds' neurons of this model (index 0 where model j is another one)
                mine = tf.where(tf.equal(j, m_i) & (neuron >= 0), neuron, 0)
                f_n = tf.linalg.diag_part(self._nc[m_i].targets.graph_values(x, mine))
                has = tf.cast(neuron >= 0, f_n.dtype)
                obj = obj + self.lambda2 * is_j * has * f_n
        return obj

    def _gradient_and_prediction(self, x, y, ctx):
        grad, _ = super()._gradient_and_prediction(x, y, ctx)
        votes = self._votes(x)
        differ = ~(votes == votes[0]).all(0)
        return grad, np.where(differ, -1, y)    # -1: marks the seed done (pred != label)

    def _adversarial(self, x, y, final=False):
        """The models disagree on x (final: the oracle's own call, on the whole batch)."""
        if final:
            votes = self._votes(x)
        else:
            xt = tf.convert_to_tensor(x, tf.float32)
            votes = np.stack([class_labels(f(xt).numpy()) for f in self._forwards])
        return ~(votes == votes[0]).all(0)

    def _keep_values(self, x, y, ctx):
        """The minimal stage keeps DeepXplore's objective to first order."""
        return [self._objective(x, y, ctx)]

    def _keep_floors(self):
        return ("hold",)          # no floor known: hold its current value to first order

    def _oracle(self, y, pred_seed, pred_gen, x_gen):
        if not len(y):              # a run stopped before its first batch
            return np.zeros(0, bool)
        votes = self._votes(x_gen)
        return self._agree & ~(votes == votes[0]).all(0)
