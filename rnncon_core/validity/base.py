"""A validity check answers, per generated input, whether a reader would still accept it as an
input of its seed's class: ``check(x, labels, roots) -> Verdict`` (``roots``: the root seeds
the inputs were made from, for checks that compare with them). An ``Oracle`` combines checks:
an input is valid when every check passes; its reason names the checks that failed."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

REASON_DTYPE = "<U120"


@dataclass
class Verdict:
    """Per input: ``valid`` (bool), ``reason`` ("" when valid, else what failed, for a
    reader), ``scores`` (check name -> float per input: the figure behind the verdict)."""
    valid: np.ndarray
    reason: np.ndarray
    scores: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def all_valid(cls, n: int) -> "Verdict":
        return cls(np.ones(n, bool), np.full(n, "", REASON_DTYPE), {})

    def __len__(self) -> int:
        return len(self.valid)

    def rows(self) -> dict[str, np.ndarray]:
        """The verdict as fault-row columns: valid, reason, score/<check>."""
        return {"valid": self.valid.astype(bool), "reason": self.reason.astype(REASON_DTYPE),
                **{f"score/{k}": np.asarray(v, np.float32) for k, v in self.scores.items()}}


class Validator:
    """One check. Subclasses set ``name``, ``kinds`` (input kinds it reads: image, sequence,
    text) and ``title``, and implement ``check``. Fitted checks (trained on a data set) also
    have ``fit(x_train, y_train, ...)``, ``save(folder)`` and ``load(folder)``."""
    name = ""
    kinds: tuple[str, ...] = ()
    title = ""

    def check(self, x, labels, roots=None) -> Verdict:
        raise NotImplementedError

    def get_config(self) -> dict:
        return {"name": self.name}

    def describe(self) -> str:
        """One line for a reader: what the check asks and how its threshold was set."""
        return self.title


class Oracle:
    """Checks combined: valid when every check passes (``checks`` empty: every input valid,
    ``unchecked`` says why)."""

    def __init__(self, checks: list[Validator], unchecked: str = ""):
        self.checks = list(checks)
        self.unchecked = unchecked

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.checks]

    def check(self, x, labels, roots=None) -> Verdict:
        n = len(x)
        out = Verdict.all_valid(n)
        if not n:
            return out
        reasons = [[] for _ in range(n)]
        for c in self.checks:
            v = c.check(x, labels, roots)
            out.valid &= v.valid
            out.scores.update(v.scores)
            for i in np.flatnonzero(~v.valid):
                reasons[i].append(str(v.reason[i]))
        out.reason = np.array(["; ".join(r)[:120] for r in reasons], REASON_DTYPE)
        return out

    def describe(self) -> list[str]:
        return [f"{c.name}: {c.describe()}" for c in self.checks] or \
            [f"not checked: {self.unchecked}"]

    def get_config(self) -> dict:
        return {"checks": [c.get_config() for c in self.checks], "unchecked": self.unchecked}
