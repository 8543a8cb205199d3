"""Declared parameters: what a generation strategy or a coverage criterion accepts, said once.

Each strategy (``rnncon_core.generate``) and each criterion (``rnncon_core.coverage``) lists its
parameters on the class as ``params = Params(Param(...), ...)``: name, default, a check (the
type and the range or choices), a help text and the data kinds it applies to. Construction
checks every value against it (an ``InputError`` that names the parameter, what it allows and
the value), and everything else reads it: ``rnncon generate``/``coverage`` options and their
listings (``rnncon methods``, ``rnncon criteria``), the dashboard's forms, retraining and the
run summaries.

    params = Params(Param("eps", 0.3, Interval(0, 1, lo_open=True), "L-infinity radius"))
    params.check("method 'pgd'", {"eps": 2})   # InputError: eps must be a number in (0, 1], got 2
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InputError

# ---------------------------------------------------------------- checks
# A check turns a value into the parameter's type or raises InputError; ``describe`` says what
# it allows (for help texts and errors), ``parse`` reads a command-line string, ``type`` names
# the widget a form uses ("float", "int", "str", "bool", "list").


class Check:
    type = "str"

    def check(self, name: str, v):
        return v

    def describe(self) -> str:
        return "text"

    def parse(self, text: str):
        return text


def _is_number(v) -> bool:
    return not isinstance(v, (bool, np.bool_)) and isinstance(v, (int, float, np.integer,
                                                                   np.floating))


def _fmt(v) -> str:
    return "inf" if v == math.inf else f"{v:g}"


@dataclass(frozen=True)
class Interval(Check):
    """A number in [lo, hi] ((lo, hi] with lo_open); ``many``: also a list of such numbers
    (one per seed)."""
    lo: float
    hi: float
    lo_open: bool = False
    many: bool = False
    type = "float"

    def _ok(self, v) -> bool:
        return _is_number(v) and (self.lo < float(v) if self.lo_open else self.lo <= float(v)) \
            and float(v) <= self.hi

    def check(self, name, v):
        if self.many and not _is_number(v) and np.ndim(v) == 1 and len(v) \
                and all(self._ok(t) for t in np.asarray(v).tolist()):
            return [float(t) for t in np.asarray(v).tolist()]
        if not self._ok(v):
            raise InputError(f"{name} must be {self.describe()}, got {v!r}")
        return float(v)

    def describe(self):
        text = f"a number in {'(' if self.lo_open else '['}{_fmt(self.lo)}, {_fmt(self.hi)}" \
               f"{')' if self.hi == math.inf else ']'}"
        return text + (" (or one per seed)" if self.many else "")

    def parse(self, text):
        return _parse_number(text, float)


@dataclass(frozen=True)
class IntRange(Check):
    """An integer in [lo, hi] (hi None: no upper bound)."""
    lo: int = 1
    hi: int | None = None
    type = "int"

    def check(self, name, v):
        if not _is_number(v) or float(v) != int(v) or v < self.lo \
                or (self.hi is not None and v > self.hi):
            raise InputError(f"{name} must be {self.describe()}, got {v!r}")
        return int(v)

    def describe(self):
        if self.hi is not None:
            return f"an integer in [{self.lo}, {self.hi}]"
        return f"an integer of at least {self.lo}"

    def parse(self, text):
        return _parse_number(text, int)


@dataclass(frozen=True)
class OneOf(Check):
    options: tuple

    def check(self, name, v):
        if v not in self.options:
            raise InputError(f"{name} must be one of {', '.join(map(repr, self.options))}, "
                             f"got {v!r}")
        return v

    def describe(self):
        return "one of " + " | ".join(map(str, self.options))


class Bool(Check):
    type = "bool"
    TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")     # as typed

    def check(self, name, v):
        if not isinstance(v, (bool, np.bool_)):
            raise InputError(f"{name} must be True or False, got {v!r}")
        return bool(v)

    def describe(self):
        return "true | false"

    def parse(self, text):
        t = str(text).strip().lower()
        if t in self.TRUE:
            return True
        if t in self.FALSE:
            return False
        return text                 # check() says what is wrong


class Thresholds(Check):
    """A list of thresholds in [0, 1] (kept sorted, without repeats)."""
    type = "list"

    def check(self, name, v):
        try:
            return tuple(sorted({Interval(0, 1).check(name, float(t)) for t in v}))
        except (TypeError, ValueError):
            raise InputError(f"{name} must be a list of thresholds in [0, 1], got {v!r}") \
                from None

    def describe(self):
        return "thresholds in [0, 1], comma separated"

    def parse(self, text):
        return [_parse_number(t, float) for t in split_list(text)]


@dataclass(frozen=True)
class Text(Check):
    """Any text; ``choices`` are the named values a form offers first (e.g. "random" before
    the model's layer names: ``layers`` says which of the model's layers it lists)."""
    choices: tuple = ()
    layers: str = ""                # "" | "all" | "recurrent"
    what: str = "text"

    def check(self, name, v):
        if not isinstance(v, str) or not v:
            raise InputError(f"{name} must be {self.describe()}, got {v!r}")
        return v

    def describe(self):
        return " | ".join((*self.choices, self.what)) if self.choices else self.what


class FilePath(Check):
    """A path to an existing file."""

    def check(self, name, v):
        if not isinstance(v, (str, Path)) or not Path(v).is_file():
            raise InputError(f"{name}: no such file: {v}")
        return str(v)

    def describe(self):
        return "a file path"


def _parse_number(text: str, kind):
    try:
        return kind(text)
    except ValueError:
        try:
            v = json.loads(text)
            return v if _is_number(v) else text
        except ValueError:
            return text             # check() says what is wrong, naming the parameter


def split_list(text, option: str = "the list") -> list[str]:
    """"a, b,,c " -> ["a", "b", "c"]: one way to read every comma-separated option (items
    stripped, empty ones dropped); ``None`` or "" is the empty list."""
    if text is None:
        return []
    if not isinstance(text, str):
        raise InputError(f"{option} must be comma-separated text, got {text!r}")
    return [t.strip() for t in text.split(",") if t.strip()]


def summary(cls) -> str:
    """What a strategy or criterion is, in one line: the first sentence of its docstring."""
    text = " ".join((cls.__doc__ or "").split("\n\n")[0].split()).replace("``", "")
    head, dot, _ = text.partition(". ")
    return head.rstrip(".") if dot else text.rstrip(".")


# ---------------------------------------------------------------- declarations

@dataclass(frozen=True)
class Param:
    """One declared parameter. ``default`` None means "chosen for you" (the help says how) and
    is always allowed. ``level``: "form" (the dashboard's form shows it), "more" (under More
    settings), "cli" (command line and Python only, e.g. a file path). ``when=(name, value)``:
    it only applies while parameter ``name`` is ``value``. ``aliases``: older names still
    read. ``label``: the form's label (default: the name)."""
    name: str
    default: Any
    check: Check = field(default_factory=Text)
    help: str = ""
    kinds: tuple = ("image", "text")
    level: str = "form"
    when: tuple | None = None
    aliases: tuple = ()
    label: str = ""

    @property
    def type(self) -> str:
        return self.check.type

    def validate(self, value):
        if value is None and self.default is None:
            return None
        return self.check.check(self.name, value)

    def parse(self, text: str):
        """The value of a command-line string (``none`` is None where the default is)."""
        if self.default is None and str(text).strip().lower() in ("none", "auto", ""):
            return None
        return self.check.parse(text)

    def describe(self) -> dict:
        """What a listing shows: type, default, what is allowed, help."""
        default = self.default
        return {"name": self.name, "type": self.type,
                "default": list(default) if isinstance(default, tuple) else default,
                "allowed": self.check.describe(), "help": self.help,
                "kinds": list(self.kinds), "level": self.level,
                **({"when": f"{self.when[0]}={self.when[1]}"} if self.when else {})}


class Params:
    """The declared parameters of a class, in order. ``Base.params.add(...)`` extends a base
    class's (a parameter of the same name replaces the base's, e.g. another default);
    ``without(...)`` drops some."""

    def __init__(self, *params: Param):
        self._items: dict[str, Param] = {}
        for p in params:
            self._items.pop(p.name, None)
            self._items[p.name] = p

    def __iter__(self):
        return iter(self._items.values())

    def __len__(self):
        return len(self._items)

    def __contains__(self, name) -> bool:
        return name in self._items

    def __getitem__(self, name: str) -> Param:
        return self._items[name]

    def __repr__(self):
        return f"Params({', '.join(self._items)})"

    @property
    def names(self) -> list[str]:
        return list(self._items)

    def add(self, *params: Param) -> "Params":
        return Params(*self, *params)

    def without(self, *names: str) -> "Params":
        return Params(*(p for p in self if p.name not in names))

    def replace(self, name: str, **changes) -> "Params":
        """A copy where parameter ``name`` has ``changes`` (e.g. another default)."""
        return Params(*(replace(p, **changes) if p.name == name else p for p in self))

    def defaults(self) -> dict:
        return {p.name: p.default for p in self}

    def resolve(self, name: str) -> str | None:
        """The declared name for ``name`` or one of its aliases (None: not declared)."""
        if name in self._items:
            return name
        return next((p.name for p in self if name in p.aliases), None)

    def check(self, owner: str, given: dict, extra: tuple = ()) -> dict:
        """Every declared value (the default where not given) checked; the names in ``extra``
        pass as given; any other name is an InputError that lists what ``owner`` takes."""
        unknown = [k for k in given if self.resolve(k) is None and k not in extra]
        if unknown:
            raise InputError(f"{owner} has no parameter {', '.join(map(repr, unknown))}; it "
                             f"takes {', '.join(self.names) or 'none'}")
        values = {self.resolve(k) or k: v for k, v in given.items()}
        out = {p.name: p.validate(values[p.name]) if p.name in values else p.default
               for p in self}
        return out | {k: v for k, v in values.items() if k not in self._items}

    def describe(self) -> list[dict]:
        return [p.describe() for p in self]


# ---------------------------------------------------------------- the commands' own arguments
# Declared once for the CLI, the API and the dashboard's forms (``check_args`` reads them);
# a method's or criterion's parameters are declared on its class, retraining's in
# rnncon_core.retrain.PARAMS.

ARGS = Params(
    Param("seed", 0, IntRange(0), "Random seed (same seed, same run)."),
    Param("seeds", 100, IntRange(1), "Number of seeds."),
    Param("n", None, IntRange(1), "Use the first N inputs (default: all)."),
    Param("workers", None, IntRange(1), "Ray workers."),
    Param("batch_size", None, IntRange(1), "Inputs per batch."),
    Param("limit", None, IntRange(1), "At most this many."),
    Param("kind", None, OneOf(("image", "sequence", "text")),
          "What the inputs are (default: guessed from the model's input shape)."),
    Param("split", "test", OneOf(("train", "test")), "The data set's split."),
    Param("epochs", None, IntRange(1), "Most epochs."),
    Param("patience", None, IntRange(1), "Early stopping patience (epochs)."),
    Param("learning_rate", None, Interval(0, math.inf, lo_open=True), "Adam's learning rate."),
    Param("validation_split", 0.1, Interval(0, 0.9), "Share of the training split held out."),
    # the reports' sizes (rnncon report ...)
    Param("repeats", None, IntRange(1), "Repeats."),
    Param("iterations", None, IntRange(1), "Iteration budget per seed."),
    Param("other_seeds", None, IntRange(1), "Seeds of the other rows."),
    Param("n_mnist", None, IntRange(0), "MNIST test inputs per model (0: all)."),
    Param("n_imdb", None, IntRange(0), "IMDB test inputs per model (0: all)."),
    Param("n_clean", None, IntRange(1), "Clean test inputs in each pool."),
    Param("n_seeds", None, IntRange(1), "Seeds per generation method."),
    Param("n_suites", None, IntRange(1), "Random suites per size."),
    Param("n_profile", None, IntRange(0), "Training inputs of a profile (0: all)."),
    Param("table5_repeats", None, IntRange(1), "Repeats per candidate for Table 5."),
    Param("recipe_epochs", None, IntRange(1), "Epochs of the recipe search."),
    Param("recipe_repeats", None, IntRange(1), "Repeats of the recipe search."),
    Param("max_fraction", None, Interval(0, 1, lo_open=True), "Most words changed (share)."),
    Param("max_changes", None, IntRange(1), "Most words changed (count)."),
)


def check_args(declared: Params = ARGS, prefix: str = "--", **values) -> dict:
    """``values`` checked against their declarations (None: not given, the default): an
    InputError names the option (``--seed must be an integer of at least 0, got -1``)."""
    out = {}
    for name, value in values.items():
        p = declared[name]
        if value is None:
            out[name] = p.default
            continue
        out[name] = p.check.check(prefix + name.replace("_", "-") if prefix else name, value)
    return out
