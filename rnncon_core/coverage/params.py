"""The criteria's parameters: the checks of ``rnncon_core.params`` and the declarations several
criteria share (each criterion lists its own as ``params = Params(...)`` on the class)."""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..params import Bool, Check, IntRange, Interval, OneOf, Param, Params, Text, Thresholds

__all__ = ["Bool", "Check", "IntRange", "Interval", "OneOf", "Param", "Params", "Text",
           "Thresholds", "ProfilePath", "StepWindow", "threshold", "profile_inputs",
           "CURVE_THRESHOLDS", "PROFILE_PATH"]


class ProfilePath(Check):
    """None (the model's own cached profile) or a path to a profile .npz."""

    def check(self, name, v):
        if not isinstance(v, (str, Path)):
            raise InputError(f"{name} must be a path to a profile .npz (or None), got {v!r}")
        return str(v)

    def describe(self):
        return "a profile .npz path"


def threshold(default: float) -> Param:
    return Param("threshold", default, Interval(0.0, 1.0),
                 "Activation threshold: an item counts as covered once its normalized value "
                 "exceeds it.")


CURVE_THRESHOLDS = Param("curve_thresholds", None, Thresholds(),
                         "More thresholds to keep the coverage curve for (the report's grid).",
                         level="cli")
PROFILE_PATH = Param("profile_path", None, ProfilePath(),
                     "The training profile (.npz); default: the model's own in the cache, built "
                     "from the training data when needed (--dataset, x_train=).", level="cli")


class StepWindow(Check):
    """None (every step) or the first and last step of a window, inclusive ("4:24", [4, 24]):
    testRNN's ``--seq [t1,t2]``."""
    type = "text"

    def check(self, name, v):
        if isinstance(v, str):
            v = v.replace(",", ":").strip("[]() ").split(":")
        try:
            lo, hi = (int(str(a).strip()) for a in v)
        except (TypeError, ValueError):
            raise InputError(f"{name} must be FIRST:LAST (steps, inclusive, e.g. 4:24), got "
                             f"{v!r}") from None
        if not 0 <= lo <= hi:
            raise InputError(f"{name} must be FIRST:LAST with 0 <= FIRST <= LAST, got {lo}:{hi}")
        return f"{lo}:{hi}"

    def describe(self):
        return "FIRST:LAST steps, inclusive (default: all)"

    def parse(self, text):
        return text


def profile_inputs(default: str) -> Param:
    return Param("profile_inputs", default, OneOf(("all", "correct")),
                 "Which training inputs the profile holds: all of them, or only those the model "
                 "classifies correctly (DeepStellar's profile_train_data).", level="more")
