"""One registration mechanism for generation strategies, coverage criteria and image
constraints: a name -> class mapping per kind, filled from three places.

- built in: each sub-package declares its own (``CRITERIA.declare({"rconc":
  "rnncon_core.coverage.rconc:ContributionCoverage", ...})`` in ``rnncon_core/coverage``, the
  image strategies in ``rnncon_core/generate``, the text ones in ``rnncon_core/text``), each
  module imported on first use (the strategies pull in TensorFlow, the text ones NLTK);
- the decorator ``@REGISTRY.register("name")`` (a class defined in a script or a notebook);
- installed packages: Python entry points of the registry's group (``rnncon.generators``,
  ``rnncon.criteria``, ``rnncon.constraints``), e.g. in a plugin's pyproject.toml::

      [project.entry-points."rnncon.generators"]
      shift = "rnncon_shift:Shift"

The three registries are at the end of this module, empty: this module sits on the ground
floor and knows nothing of what it registers. A registry holds a sub-package's built-ins once
that package is imported (``rnncon_core.coverage``: the criteria; ``rnncon_core.generate``: the
image strategies and the constraints; ``rnncon_core.text``: the text strategies). Listing the
names imports nothing more; the CLI's help, ``rnncon methods`` / ``criteria``, the dashboard's
forms and ``get_generator`` / ``get_criterion`` all read the same registry.
"""
from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib import metadata

from .errors import InputError


class Registry(Mapping):
    """name -> class for one kind of plugin (``kind``: "generation method", "criterion", ...).
    ``registry[name]`` loads the class (KeyError if unknown); ``registry.load(name)`` does the
    same with an InputError that lists the names; ``registry.names()`` imports nothing."""

    def __init__(self, kind: str, group: str, builtins: dict[str, str] | None = None,
                 base: str | None = None):
        self.kind, self.group, self.base = kind, group, None
        self._paths: dict[str, str] = {}     # name -> "module:Class"
        self._classes: dict[str, type] = {}
        self.declare(builtins or {}, base)

    # -- registering
    def declare(self, builtins: dict[str, str], base: str | None = None) -> None:
        """A sub-package's built-ins: name -> "module:Class", each imported on first use;
        ``base`` ("module:Class"): the class every registered one must subclass."""
        self._paths.update(builtins)
        if base is not None:
            self.base = base

    def register(self, name: str | None = None):
        """Class decorator: ``@REGISTRY.register("name")`` (default: the class's ``name`` or
        ``method`` attribute)."""
        def deco(cls):
            self.add(name or getattr(cls, "name", None) or getattr(cls, "method", None), cls)
            return cls
        return deco

    def add(self, name: str, cls: type) -> type:
        if not name or not isinstance(cls, type):
            raise TypeError(f"register a class under a name, got {name!r}: {cls!r}")
        if self.base is not None:
            base = _import(self.base)
            if not issubclass(cls, base):
                raise TypeError(f"{cls.__name__} is not a {base.__name__} subclass")
        self._classes[name] = cls
        return cls

    def remove(self, name: str) -> None:
        """Forget a registered class (tests; a built-in name falls back to its module)."""
        self._classes.pop(name, None)

    # -- reading
    def _entry_points(self) -> dict[str, str]:
        return {ep.name: ep.value for ep in metadata.entry_points(group=self.group)}

    def names(self) -> list[str]:
        """Every name: built in, registered and installed; nothing is imported."""
        return list(dict.fromkeys([*self._paths, *self._classes, *self._entry_points()]))

    def load(self, name: str) -> type:
        """The class registered as ``name``, imported if needed; InputError if none is."""
        if name in self._classes:
            return self._classes[name]
        path = self._paths.get(name) or self._entry_points().get(name)
        if path is None:
            raise InputError(f"unknown {self.kind} {name!r}; choose one of "
                             f"{', '.join(self.names())}")
        try:
            cls = _import(path)
        except ImportError as e:
            raise InputError(f"{self.kind} {name!r} needs the Python package "
                             f"{getattr(e, 'name', None) or e}, which is missing here ({e}); "
                             f"run `make setup` (it installs requirements.txt)") from None
        return self.add(name, cls)

    def classes(self) -> dict[str, type]:
        """name -> class for every name (imports them all)."""
        return {n: self.load(n) for n in self.names()}

    # -- the Mapping protocol (so ``name in CRITERIA``, ``CRITERIA[name]``, iteration work)
    def __getitem__(self, name: str) -> type:
        if name not in self._classes and name not in self._paths \
                and name not in self._entry_points():
            raise KeyError(name)
        return self.load(name)

    def __contains__(self, name) -> bool:
        return name in self._classes or name in self._paths or name in self._entry_points()

    def __iter__(self):
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self.names())})"

    __hash__ = object.__hash__

    def __eq__(self, other) -> bool:
        return self is other


def _import(path: str):
    module, _, attr = path.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


# ---------------------------------------------------------------- the three registries
# Filled by the sub-packages they serve (see the module's docstring).

GENERATORS = Registry("generation method", "rnncon.generators")
CRITERIA = Registry("criterion", "rnncon.criteria")
CONSTRAINTS = Registry("constraint", "rnncon.constraints")
