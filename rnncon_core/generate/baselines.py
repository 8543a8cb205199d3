"""Reference points: FGSM, PGD (both on the prediction loss) and random noise of a given L2."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import InputError
from ..lazy import tf
from ..params import Bool, IntRange, Interval, Param, Params
from ..zoo import class_probabilities
from .base import BatchOutput, Generator, GradientGenerator
from .constraints import UNIT_BOX

EPS = Param("eps", 0.3, Interval(0.0, 1.0, lo_open=True), "L-infinity radius of the change.",
            label="ε (L∞ radius)")


def loss_from_output(out, y):
    """Per-seed cross-entropy of the label y given class probabilities (a sigmoid unit is two
    classes: zoo.class_probabilities); tf (B,)."""
    eps = 1e-7
    p = tf.gather(class_probabilities(out), y, axis=1, batch_dims=1)
    return -tf.math.log(tf.clip_by_value(p, eps, 1.0))


class PGD(GradientGenerator):
    """Projected gradient ascent on the prediction loss inside an L-infinity ball of radius
    ``eps`` (Madry et al.); signed steps of ``step`` unless a constraint shapes them."""
    method = "pgd"
    traces = False
    params = Params(EPS, *GradientGenerator.params.replace("step", default=0.01),
                    Param("random_start", False, Bool(), "Start from a random point of the "
                                                         "ball.", level="more"))

    def __init__(self, model, *, eps: float, random_start: bool, **kw):
        super().__init__(model, **kw)
        self.eps = float(eps)
        self.random_start = bool(random_start)

    def _objective(self, x, y, ctx):
        return loss_from_output(self.forward(x), y)

    def _direction(self, grad, x0, p, cstate, rng):
        if self.constraint.name == "none":
            return np.sign(grad).astype(np.float32)
        return self.constraint.direction(grad, x0, p, cstate, rng)

    def _project(self, p, x0):
        return self.constraint.project(np.clip(p, -self.eps, self.eps), x0)

    def _initial_perturbation(self, x0, rng):
        if self.random_start and self.constraint.name == "none":
            return self._project(rng.uniform(-self.eps, self.eps, x0.shape).astype(np.float32),
                                 x0)
        return np.zeros_like(x0)



class FGSM(PGD):
    """One signed step of size ``eps`` on the prediction loss (Goodfellow et al.)."""
    method = "fgsm"
    params = Params(replace(EPS, default=0.1),
                    *(GradientGenerator.params[n] for n in ("constraint", "minimize")),
                    # minimal: ART's minimal FGSM (the smallest scale of the one signed step)
                    replace(GradientGenerator.params["min_steps"], default=0),
                    GradientGenerator.params["polish_steps"])

    def __init__(self, model, *, eps: float, **kw):
        super().__init__(model, eps=eps, step=eps, iterations=1, window=128, random_start=False,
                         **kw)


class Noise(Generator):
    """Random Gaussian noise scaled so the perturbation (after clipping to [0, 1]) has the
    L2 norm asked for: one number, or one per seed (to match another strategy's perturbations
    on the same seeds). ``tries`` draws per seed; the first adversarial one is kept."""
    method = "noise"
    traces = False
    params = Params(Param("l2", 1.0, Interval(0.0, 1e6, many=True), "L2 norm of the noise "
                                                                     "(Python: one per seed).",
                          label="L2 norm of the noise"),
                    Param("tries", 1, IntRange(1, 1000), "Draws per seed; the first adversarial "
                                                         "one is kept.", level="more"))

    def __init__(self, model, *, l2, tries: int, batch_size: int = 128, seed: int = 0):
        super().__init__(model, batch_size=batch_size, seed=seed)
        self.l2 = np.asarray(l2, np.float32).reshape(-1)
        self.tries = int(tries)
        self._offset = 0

    def _prepare(self, x, y):
        if len(self.l2) not in (1, len(x)):
            raise InputError(f"noise l2 has {len(self.l2)} values for {len(x)} seeds: give one "
                             f"value, or one per seed")
        self._offset = 0
        self._n = len(x)

    def _generate_batch(self, x, y, rng):
        B = len(x)
        target = self.l2 if len(self.l2) == 1 else self.l2[self._offset:self._offset + B]
        self._offset += B
        target = np.broadcast_to(target, (B,)).astype(np.float32)
        best = x.copy()
        found = np.zeros(B, bool)
        used = np.zeros(B, np.int64)
        for t in range(self.tries):
            noise = rng.standard_normal(x.shape).astype(np.float32)
            cand = clipped_to_l2(x, noise, target, self.box)
            pred = self.predict(cand).argmax(1)
            new = ~found
            best[new] = cand[new]
            used[new] = t + 1
            found |= pred != y
            if found.all():
                break
        return BatchOutput(x_gen=best, iterations=used, extras={"l2_target": target})

    def get_config(self):
        return {**super().get_config(), "l2": self.l2.tolist() if len(self.l2) <= 8
                else f"{len(self.l2)} per-seed values"}


def clipped_to_l2(x0: np.ndarray, direction: np.ndarray, l2: np.ndarray,
                  box: tuple = UNIT_BOX, rounds: int = 40) -> np.ndarray:
    """clip(x0 + s * direction, *box) with s chosen per seed (bisection) so that the actual
    perturbation's L2 norm is ``l2`` (or as close as the box allows)."""
    B = len(x0)
    shape = (B,) + (1,) * (x0.ndim - 1)
    d = direction / (np.linalg.norm(direction.reshape(B, -1), axis=1).reshape(shape) + 1e-12)
    norm = lambda s: np.linalg.norm((np.clip(x0 + s.reshape(shape) * d, *box) - x0)  # noqa
                                    .reshape(B, -1), axis=1)
    lo = np.zeros(B, np.float32)
    hi = np.maximum(l2, 1e-6).astype(np.float32)
    for _ in range(30):                     # grow hi until it reaches the norm (or saturates)
        short = norm(hi) < l2
        if not short.any():
            break
        hi = np.where(short, hi * 2, hi)
    for _ in range(rounds):
        mid = (lo + hi) / 2
        below = norm(mid) < l2
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return np.clip(x0 + hi.reshape(shape) * d, *box).astype(np.float32)
