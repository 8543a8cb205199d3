"""Mutations of a campaign, declared like a generator's parameters, each within validity bounds.

Images follow DeepHunter (Xie et al., ISSTA 2019; its code: ``deephunter/mutators.py``,
``Mutators.mutate_one`` and ``image_random_mutate``, read in github:Shimmer93/Deephunter-backup):

- **pixel** mutations (DeepHunter's class A: brightness, contrast, pixel change, noise, blur)
  and our **gradient** step (one step of the generators' prediction-term ascent,
  ``generate.guided.prediction_term``, shaped by a DeepXplore constraint of
  ``generate.constraints``: none, light, occlusion, blackout) are checked against the lineage's
  reference image: valid when the share of changed pixels is at most ``max_changed`` (α) or the
  largest change at most ``max_linf`` (β) -- DeepHunter's Eq. 1, "either" -- or both
  (``validity="both"``, stricter);
- **affine** mutations (class B: translation, scale, shear, rotation) are allowed once per
  lineage (DeepHunter's "cl" state); they move the reference image with the input, so later
  pixel mutations are measured against the transformed image.

Text: one reader-checked substitution (``text.eda.synonym_replacement`` with the substitutes of
``text.lexical.Substitutes``: same part of speech, re-inflected, same sentiment, no antonym,
number, negation or name) per mutation, at most ``max_fraction`` of the root review's words
changed (``textdiff.words_changed``).

Other float sequences: per-step Gaussian noise on a few steps, and a time shift of at most
``max_shift`` steps once per lineage (like an affine mutation); changes at most ``max_linf``.

Images are (B, T, F) sequences whose image pixel (row r, column c) is ``x[c, r]``
(``data.to_images``); the mutations work on the image and give the sequence back.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..generate.constraints import CONSTRAINTS, get_constraint
from ..params import IntRange, Interval, OneOf, Param, Params, Text, split_list
from ..text.eda import synonym_replacement
from ..textdiff import words_changed
from ..trace import input_domain

PIXEL = ("brightness", "contrast", "pixel", "noise", "blur")
AFFINE = ("translation", "scale", "shear", "rotation")
IMAGE_FAMILIES = ("pixel", "affine", "gradient")
SEQUENCE_FAMILIES = ("noise", "shift")
TEXT_FAMILIES = ("substitution",)

MUTATION_PARAMS = Params(
    Param("mutations", None, Text(what="comma-separated families"),
          "Mutation families: images pixel,affine,gradient; sequences noise,shift; text "
          "substitution (default: all of the input's).", kinds=("image", "text", "sequence")),
    Param("max_linf", 0.2, Interval(0.0, 1.0, lo_open=True),
          "Largest change of one value against the lineage's reference (DeepHunter's β, "
          "pixels in [0, 1]).", kinds=("image", "sequence"), label="Largest change (L∞)"),
    Param("max_changed", 0.02, Interval(0.0, 1.0, lo_open=True),
          "Largest share of changed pixels against the reference (DeepHunter's α).",
          kinds=("image",), label="Changed-pixel share"),
    Param("validity", "either", OneOf(("either", "both")),
          "either: a pixel mutation is valid within one of the two bounds (DeepHunter's Eq. "
          "1); both: within both.", kinds=("image",), level="more"),
    Param("constraint", "none", OneOf(CONSTRAINTS),
          "DeepXplore's constraint on the gradient step: none, light, occlusion, blackout.",
          kinds=("image",), level="more"),
    Param("step", 0.02, Interval(0.0, 1.0, lo_open=True),
          "Per-pixel RMS change of one gradient step.", kinds=("image",), level="more"),
    Param("noise", 0.05, Interval(0.0, 1.0, lo_open=True),
          "Standard deviation of the per-step noise (sequences).", kinds=("sequence",),
          level="more"),
    Param("max_shift", 2, IntRange(0, 100), "Largest time shift in steps (sequences).",
          kinds=("sequence",), level="more"),
    Param("max_fraction", 0.1, Interval(0.0, 1.0, lo_open=True),
          "Most words changed, as a share of the root review.", kinds=("text",),
          label="Most words changed (share)"))


def input_kind(model) -> str:
    """"image", "text" (word ids) or "sequence" (other float inputs)."""
    return {"ids": "text", "image": "image"}.get(input_domain(model), "sequence")


def check_family_names(text: str | None) -> None:
    """The names of ``--mutations`` checked before the model is known: each a family of some
    input kind (which kind's, ``families`` checks once the model is loaded)."""
    known = dict.fromkeys((*IMAGE_FAMILIES, *SEQUENCE_FAMILIES, *TEXT_FAMILIES))
    bad = [m for m in split_list(text, "mutations") if m not in known] if text else []
    if bad:
        raise InputError(f"no mutation family {', '.join(map(repr, bad))}; the families are "
                         f"{', '.join(known)} (`rnncon campaign --help`)")


def families(kind: str, text: str | None) -> tuple[str, ...]:
    allowed = {"image": IMAGE_FAMILIES, "sequence": SEQUENCE_FAMILIES,
               "text": TEXT_FAMILIES}[kind]
    chosen = tuple(split_list(text, "mutations")) if text else allowed
    bad = [m for m in chosen if m not in allowed]
    if bad or not chosen:
        raise InputError(f"mutations {', '.join(bad) or '(none)'} do not apply to {kind} "
                         f"inputs; choose among {', '.join(allowed)}")
    return chosen


# ---------------------------------------------------------------- image operations
# each op: (image (H, W) in [0, 1], rng) -> image; the ranges are DeepHunter's, pixels
# rescaled from 0..255 to [0, 1]

def _brightness(img, rng):
    return img + rng.integers(-20, 20) / 255.0


def _contrast(img, rng):
    return img * (rng.integers(5, 13) / 10.0)


def _pixel(img, rng):
    out = img.copy().ravel()
    idx = rng.integers(0, out.size, int(rng.integers(1, 10)))
    out[idx] = rng.random(len(idx))
    return out.reshape(img.shape)


def _noise(img, rng):
    return img + rng.normal(0.0, 0.02, img.shape)


def _blur(img, rng):
    from scipy import ndimage
    size = int(rng.integers(2, 4))
    return ndimage.uniform_filter(img, size=size, mode="constant")


def _affine(img, matrix, offset):
    from scipy import ndimage
    return ndimage.affine_transform(img, matrix, offset=offset, order=1, mode="constant")


def _around_centre(img, matrix):
    centre = (np.array(img.shape) - 1) / 2.0
    return _affine(img, matrix, centre - matrix @ centre)


def _translation(img, rng):
    d = float(rng.integers(-3, 3))
    return _affine(img, np.eye(2), np.array([-d, -d]))


def _scale(img, rng):
    s = rng.integers(7, 12) / 10.0
    return _around_centre(img, np.eye(2) / s)


def _shear(img, rng):
    f = rng.integers(-6, 6) / 10.0
    return _around_centre(img, np.array([[1.0, 0.0], [f, 1.0]]))


def _rotation(img, rng):
    a = np.deg2rad(float(rng.integers(-50, 50)))
    c, s = np.cos(a), np.sin(a)
    return _around_centre(img, np.array([[c, -s], [s, c]]))


OPS = {"brightness": _brightness, "contrast": _contrast, "pixel": _pixel, "noise": _noise,
       "blur": _blur, "translation": _translation, "scale": _scale, "shear": _shear,
       "rotation": _rotation}


class Mutator:
    """Makes mutants of queue entries. ``mutate(x, ref, shifted, root_x, rng, grad_fn)`` returns
    (mutants, refs, shifted flags, op names, parent positions) of the valid mutants only."""

    def __init__(self, kind: str, values: dict, lexicon=None):
        self.kind = kind
        self.values = values
        self.families = families(kind, values.get("mutations"))
        self.lexicon = lexicon
        if kind == "image" and "gradient" in self.families:
            self.constraint = get_constraint(values["constraint"])

    # -- validity (DeepHunter's Eq. 1 against the lineage's reference)
    def valid(self, new: np.ndarray, ref: np.ndarray) -> bool:
        d = np.abs(new.astype(np.float32) - ref.astype(np.float32))
        linf_ok = float(d.max(initial=0.0)) <= self.values["max_linf"] + 1e-6
        if self.kind == "sequence":
            return linf_ok
        share_ok = float(np.mean(d > 1e-6)) <= self.values["max_changed"]
        return (linf_ok or share_ok) if self.values["validity"] == "either" \
            else (linf_ok and share_ok)

    def choose(self, rng, affine_left: bool) -> str:
        fams = [f for f in self.families if affine_left or f not in ("affine", "shift")]
        return str(fams[int(rng.integers(len(fams)))]) if fams else ""

    def mutate(self, x, ref, shifted, y, rng, grad_fn=None):
        """One mutant per row of x (parents repeated by the caller); invalid ones dropped."""
        if self.kind == "text":
            return self._text(x, ref, rng)
        fams = [self.choose(rng, not bool(s)) for s in shifted]
        grads = {}
        want = [i for i, f in enumerate(fams) if f == "gradient"]
        if want and grad_fn is not None:
            g = grad_fn(x[want], y[want])
            grads = {i: g[n] for n, i in enumerate(want)}
        out, refs, flags, ops, keep = [], [], [], [], []
        for i, fam in enumerate(fams):
            res = self._one(fam, x[i], ref[i], rng, grads.get(i))
            if res is None:
                continue
            new, new_ref, moved, op = res
            out.append(new), refs.append(new_ref), ops.append(op), keep.append(i)
            flags.append(bool(shifted[i]) or moved)
        if not keep:
            return x[:0], ref[:0], np.zeros(0, bool), [], np.zeros(0, np.int64)
        return (np.stack(out).astype(np.float32), np.stack(refs).astype(np.float32),
                np.array(flags), ops, np.array(keep, np.int64))

    def _one(self, fam, x, ref, rng, grad):
        if fam == "affine":              # DeepHunter: transform the input and its reference
            op = AFFINE[int(rng.integers(len(AFFINE)))]
            state = rng.bit_generator.state
            new = _image_op(op, x, rng)
            rng.bit_generator.state = state          # the same parameters for the reference
            return new, _image_op(op, ref, rng), True, op
        if fam == "shift":
            s = int(rng.integers(-self.values["max_shift"], self.values["max_shift"] + 1))
            return _shift(x, s), _shift(ref, s), True, "shift"
        if fam == "noise" and self.kind == "sequence":
            new = x.copy()
            steps = rng.choice(len(x), max(1, len(x) // 10), replace=False)
            new[steps] += rng.normal(0.0, self.values["noise"], new[steps].shape)
            new = np.clip(new, ref - self.values["max_linf"], ref + self.values["max_linf"])
            return new, ref, False, "noise"
        if fam == "gradient":
            if grad is None:
                return None
            p = (x - ref)[None]
            cstate = self.constraint.init(ref[None], rng)
            d = self.constraint.direction(grad[None], ref[None], p, cstate, rng)
            p = self.constraint.project(p + self.values["step"] * d, ref[None])
            new, op = np.clip(ref + p[0], 0.0, 1.0), f"gradient-{self.constraint.name}"
        else:
            op = PIXEL[int(rng.integers(len(PIXEL)))]
            new = _image_op(op, x, rng)
        if np.array_equal(new, x) or not self.valid(new, ref):
            return None
        return new, ref, False, op

    # -- text
    def _text(self, x, root, rng):
        lex = self.lexicon
        out, keep = [], []
        for i in range(len(x)):
            words, start = lex.words_of(x[i])
            root_words = lex.words_of(root[i])[0]
            new = synonym_replacement(words, 1, rng, lex, reader=True)
            if new == words:
                continue
            budget = max(1, int(np.floor(self.values["max_fraction"] * len(root_words))))
            if words_changed(root_words, new) > budget:
                continue
            out.append(lex.ids_of(new, start, x.shape[1]))
            keep.append(i)
        if not keep:
            return x[:0], root[:0], np.zeros(0, bool), [], np.zeros(0, np.int64)
        keep = np.array(keep, np.int64)
        return (np.stack(out).astype(x.dtype), root[keep], np.zeros(len(keep), bool),
                ["substitution"] * len(keep), keep)


def _image_op(op, x, rng):
    """An image op on one (T, F) sequence (image = its transpose), kept in [0, 1]."""
    img = x.T.astype(np.float64)
    return np.clip(OPS[op](img, rng), 0.0, 1.0).T.astype(np.float32)


def _shift(x, s: int):
    if s == 0:
        return x.copy()
    out = np.roll(x, s, axis=0)
    if s > 0:
        out[:s] = x[:1]
    else:
        out[s:] = x[-1:]
    return out
