"""DeepXplore's image constraints: they reshape each gradient step so the change stays realistic.

Inputs are (B, T, F) sequences whose image is ``to_images``: pixel (row r, column c) is
``x[c, r]``. Rectangles are given in image coordinates (row, column, height m, width n).

- ``none``: the gradient, scaled to unit per-pixel RMS (DeepXplore's ``normalize``).
- ``light``: every pixel moves by one amount, up or down by the sign of mean(gradient); the
  perturbation is a single brightness shift (pixels that hit 0 or 1 stay clipped).
- ``occlusion``: only one m x n rectangle changes (given position, or random per seed).
- ``blackout``: at each iteration, ``patches`` m x m squares at random positions; a square whose
  mean gradient is negative is darkened uniformly (by ``scale`` x step), the others are left
  alone, so pixels only get darker.

``direction(grad, x0, p, state, rng)`` gives the step direction, ``project(p, x0)`` keeps the
image in [0, 1].
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InputError
from ..params import Check, IntRange, Interval, Param, Params
from ..registry import CONSTRAINTS

_EPS = 1e-12


class Pair(Check):
    """Two integers (rows, columns) of at least ``low``, or one integer for both."""
    type = "list"

    def __init__(self, low: int = 1):
        self.low = low

    def check(self, name, v):
        try:
            a, b = (int(v), int(v)) if np.isscalar(v) else (int(v[0]), int(v[1]))
            if not np.isscalar(v) and len(v) != 2:
                raise ValueError
        except (TypeError, ValueError, IndexError):
            raise InputError(f"{name} must be {self.describe()}, got {v!r}") from None
        if a < self.low or b < self.low:
            raise InputError(f"{name} must be {self.describe()}, got {v!r}")
        return [a, b]

    def describe(self):
        return f"two integers ROWS,COLUMNS of at least {self.low}"

    def parse(self, text):
        try:
            return [int(t) for t in str(text).split(",")]
        except ValueError:
            return text


def _rms(a: np.ndarray, axis=(1, 2)) -> np.ndarray:
    return np.sqrt(np.mean(np.square(a), axis=axis, keepdims=True))


UNIT_BOX = (0.0, 1.0)          # images; real-valued sequences: each feature's range (data_box)


class Constraint:
    """The gradient, scaled to unit per-pixel RMS (no constraint)."""
    name = "none"
    params = Params()          # what a constraint takes, declared (checked by get_constraint)
    box = UNIT_BOX             # the (lo, hi) the perturbed input stays in (set by the generator)

    # the minimal-perturbation stage (base.py) may reshape the perturbation pixel by pixel;
    # False: it only scales it (one brightness shift, dark patches stay patches)
    refine = True

    def init(self, x0: np.ndarray, rng: np.random.Generator) -> dict:
        """Per-seed state (arrays with first axis B), e.g. the occlusion masks."""
        return {}

    def direction(self, grad, x0, p, state, rng) -> np.ndarray:
        return grad / (_rms(grad) + _EPS)

    def project(self, p: np.ndarray, x0: np.ndarray) -> np.ndarray:
        return np.clip(x0 + p, *self.box) - x0

    def effective(self, p: np.ndarray, x0: np.ndarray) -> np.ndarray:
        """The part of the perturbation p that reaches the image (what the minimal stage
        scales down)."""
        return np.clip(x0 + p, *self.box) - x0

    def get_config(self) -> dict:
        return {"name": self.name}


class Light(Constraint):
    """One brightness shift: every pixel moves by the same amount."""
    name = "light"
    refine = False

    def effective(self, p, x0):
        return np.clip(p, -1.0, 1.0)      # still one shift: a larger one changes nothing more

    def direction(self, grad, x0, p, state, rng):
        sign = np.sign(grad.mean(axis=(1, 2), keepdims=True))
        return np.broadcast_to(sign, grad.shape).astype(np.float32)

    def project(self, p, x0):
        # the shift stays one number per seed; clipping happens when the image is formed
        return p


class Occlusion(Constraint):
    """Only one rectangle changes (at a given position, or a random one per seed)."""
    name = "occlusion"
    params = Params(
        Param("size", (10, 10), Pair(1), "Occlusion: the rectangle's rows and columns.",
              kinds=("image",), level="more", when=("constraint", "occlusion")),
        Param("position", None, Pair(0), "Occlusion: its top-left pixel (row, column); "
              "default: random per seed.", kinds=("image",), level="more",
              when=("constraint", "occlusion")))

    def __init__(self, size=(10, 10), position=None):
        self.size = tuple(Pair(1).check("occlusion size", size))
        self.position = None if position is None else \
            tuple(Pair(0).check("occlusion position", position))

    def init(self, x0, rng):
        B, T, F = x0.shape          # image: F rows, T columns
        m, n = self.size
        if m > F or n > T:
            raise InputError(f"occlusion rectangle {m}x{n} does not fit the {F}x{T} image")
        if self.position is not None:
            i, j = self.position
            if i + m > F or j + n > T:
                raise InputError(f"occlusion rectangle {m}x{n} at (row {i}, column {j}) leaves "
                                 f"the {F}x{T} image; move it or make it smaller")
            rows, cols = np.full(B, i), np.full(B, j)
        else:
            rows, cols = rng.integers(0, F - m + 1, B), rng.integers(0, T - n + 1, B)
        mask = np.zeros(x0.shape, bool)
        for b in range(B):
            mask[b, cols[b]:cols[b] + n, rows[b]:rows[b] + m] = True
        return {"mask": mask}

    def direction(self, grad, x0, p, state, rng):
        mask = state["mask"]
        g = np.where(mask, grad, 0.0)
        rms = np.sqrt(np.sum(g * g, axis=(1, 2), keepdims=True) / mask.sum(axis=(1, 2),
                                                                          keepdims=True))
        return (g / (rms + _EPS)).astype(np.float32)

    def get_config(self):
        return {"name": self.name, "size": list(self.size),
                "position": None if self.position is None else list(self.position)}


class Blackout(Constraint):
    """Dark squares: patches whose gradient asks for darker are darkened, pixels only get
    darker."""
    name = "blackout"
    params = Params(
        Param("size", 6, IntRange(1), "Blackout: the side of each square patch.",
              kinds=("image",), level="more", when=("constraint", "blackout")),
        Param("patches", 1, IntRange(1), "Blackout: squares per iteration.", kinds=("image",),
              level="more", when=("constraint", "blackout")),
        Param("scale", 10.0, Interval(0, math.inf, lo_open=True),
              "Blackout: a patch darkens by scale x step per iteration.", kinds=("image",),
              level="more", when=("constraint", "blackout")))
    refine = False

    def __init__(self, size: int = 6, patches: int = 1, scale: float = 10.0):
        self.size = int(size)
        self.patches = int(patches)
        self.scale = float(scale)         # a patch darkens by scale * step per iteration

    def direction(self, grad, x0, p, state, rng):
        B, T, F = grad.shape
        m = self.size
        if m > min(T, F):
            raise InputError(f"blackout patch {m}x{m} does not fit the {F}x{T} image")
        d = np.zeros_like(grad)
        for _ in range(self.patches):
            rows, cols = rng.integers(0, F - m + 1, B), rng.integers(0, T - m + 1, B)
            for b in range(B):
                sl = (b, slice(cols[b], cols[b] + m), slice(rows[b], rows[b] + m))
                if grad[sl].mean() < 0:       # the objective wants this patch darker
                    d[sl] = -self.scale
        return d

    def get_config(self):
        return {"name": self.name, "size": self.size, "patches": self.patches,
                "scale": self.scale}


_G = "rnncon_core.generate.constraints:"
CONSTRAINTS.declare({"none": _G + "Constraint", "light": _G + "Light",
                     "occlusion": _G + "Occlusion", "blackout": _G + "Blackout"},
                    base=_G + "Constraint")
register_constraint = CONSTRAINTS.register


def constraint_params() -> dict[str, list]:
    """Parameter name -> the constraints that declare it (a strategy passes these on)."""
    out: dict[str, list] = {}
    for name, cls in CONSTRAINTS.classes().items():
        for p in cls.params:
            out.setdefault(p.name, []).append(name)
    return out


def get_constraint(name="none", **params) -> Constraint:
    """A constraint by name (or an instance, returned as is), its parameters checked by its
    declaration (an InputError names the parameter, what it allows and the value)."""
    if isinstance(name, Constraint):
        return name
    cls = CONSTRAINTS.load(name)
    values = cls.params.check(f"constraint {name!r}", params)
    return cls(**values)
