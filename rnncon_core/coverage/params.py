"""Parameter checks: each criterion declares its parameters once and they are checked here."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError


@dataclass(frozen=True)
class Interval:
    lo: float
    hi: float

    def check(self, name, v):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) \
                or not (self.lo <= float(v) <= self.hi):
            raise InputError(f"{name} must be a number in [{self.lo}, {self.hi}], got {v!r}")
        return float(v)


@dataclass(frozen=True)
class OneOf:
    options: tuple

    def check(self, name, v):
        if v not in self.options:
            raise InputError(f"{name} must be one of {', '.join(map(repr, self.options))}, "
                             f"got {v!r}")
        return v


class Bool:
    def check(self, name, v):
        if not isinstance(v, (bool, np.bool_)):
            raise InputError(f"{name} must be True or False, got {v!r}")
        return bool(v)


class Thresholds:
    def check(self, name, v):
        if v is None:
            return None
        try:
            vals = tuple(sorted({Interval(0, 1).check(name, float(t)) for t in v}))
        except TypeError:
            raise InputError(f"{name} must be a list of thresholds in [0, 1], got {v!r}") from None
        return vals


class PositiveIntOrNone:
    def check(self, name, v):
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise InputError(f"{name} must be a positive integer (or None), got {v!r}")
        return int(v)
