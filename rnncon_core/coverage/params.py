"""The criteria's parameters: the checks of ``rnncon_core.params`` and the declarations several
criteria share (each criterion lists its own as ``params = Params(...)`` on the class)."""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..params import Bool, Check, IntRange, Interval, OneOf, Param, Params, Text, Thresholds

__all__ = ["Bool", "Check", "IntRange", "Interval", "OneOf", "Param", "Params", "Text",
           "Thresholds", "ProfilePath", "threshold", "CURVE_THRESHOLDS", "PROFILE_PATH"]


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
                     "The training profile (.npz); default: the model's own, built once by "
                     "`rnncon profile`.", level="cli")
