"""The Generate form, built from each method's declared parameters (rnncon_core.params): a
number box per number (its range, its default), a choice per set of choices, a checkbox per
flag, the help texts as tooltips; what a method marks "more" goes under More settings, and a
parameter that only applies under another's value (``when``) shows only then."""
from __future__ import annotations

import math

import streamlit as st

from rnncon_core import text  # noqa: F401  (its strategies join GENERATORS)
from rnncon_core.generate import generator_class
from rnncon_core.generate.constraints import CONSTRAINTS
from rnncon_core.params import Param, summary


def description(method: str) -> str:
    return summary(generator_class(method))


def controls(cls) -> list[Param]:
    """The parameters that decide whether others apply (e.g. synonym-gradient's objective):
    drawn outside the form, which only reruns the page on submit."""
    deciding = {p.when[0] for p in cls.params if p.when}
    return [p for p in cls.params if p.name in deciding]


def fields(cls, kind: str, chosen: dict) -> list[Param]:
    """What the form shows for the class: its parameters for the data kind, but those kept
    for the command line, the controls (drawn outside) and those that do not apply under the
    chosen controls."""
    outside = {p.name for p in controls(cls)}
    return [p for p in cls.params if kind in p.kinds and p.level != "cli"
            and p.name not in outside
            and (p.when is None or chosen.get(p.when[0]) == p.when[1])]


def _increment(p: Param, value) -> float:
    """A number box's step: about a quarter of the default's order of magnitude."""
    base = value if value else (p.check.hi if math.isfinite(p.check.hi) else 1.0)
    return 10 ** math.floor(math.log10(abs(base))) / 2


def widget(where, p: Param, key: str, default=None, layers: dict | None = None,
           label: str = ""):
    """One parameter's widget in ``where`` (a column or the page); returns its value."""
    label = label or p.label or p.name.replace("_", " ").capitalize()
    value = p.default if default is None else default
    kw = {"key": key, "help": p.help or None}
    check, kind = p.check, p.type
    if kind == "bool":
        return where.checkbox(label, value=bool(value), **kw)
    if hasattr(check, "options"):
        options = list(check.options)
        if len(options) <= 3:
            return where.radio(label, options, index=options.index(value), horizontal=True,
                               **kw)
        return where.selectbox(label, options, index=options.index(value), **kw)
    if kind == "int":
        return where.number_input(label, min_value=check.lo, max_value=check.hi, value=value,
                                  step=1, **kw)
    if kind == "float":
        step = _increment(p, value)
        low = check.lo + step / 10 if check.lo_open else check.lo
        return where.number_input(label, min_value=float(low),
                                  max_value=float(check.hi) if math.isfinite(check.hi) else None,
                                  value=None if value is None else float(value), step=step,
                                  format="%.3f" if step < 0.01 else "%.2f", **kw)
    if getattr(check, "layers", ""):
        options = [*check.choices, *(layers or {}).get(check.layers, [])]
        if p.default is None:
            options = [None, *options]
        return where.selectbox(label, options, index=options.index(value), **kw,
                               format_func=lambda v: "all layers" if v is None else str(v))
    if isinstance(value, (list, tuple)):            # e.g. a rectangle's rows, columns
        value = ",".join(str(v) for v in value)
    if p.default is None:                           # say what an empty box means
        kw["placeholder"] = "empty: the default (see ?)"
    return where.text_input(label, value=value or "", **kw) or None


def constraint_fields(cls, kind: str) -> dict[str, list[Param]]:
    """Per registered constraint, the parameters it declares, for a method that takes a
    constraint on this kind of data (the form shows them all; only the chosen constraint's
    are passed on)."""
    if not any(p.name == "constraint" and kind in p.kinds for p in cls.params):
        return {}
    return {name: [p for p in c.params if kind in p.kinds]
            for name, c in CONSTRAINTS.classes().items() if len(c.params)}


def draw(cls, kind: str, chosen: dict, defaults: dict, layers: dict, prefix: str = "gen_",
         columns: int = 4) -> dict:
    """The form's widgets for the class's parameters (inside an ``st.form``): the main ones in
    rows of ``columns``, the rest under More settings. ``defaults`` prefill the parameters
    whose declared default is None ("chosen for you", e.g. the data set's threshold). Returns
    name -> value."""
    shown = fields(cls, kind, chosen)
    values = {}
    for group, where in ((([p for p in shown if p.level == "form"]), None),
                         (([p for p in shown if p.level == "more"]), "More settings")):
        if not group:
            continue
        box = st.expander(where) if where else st.container()
        with box:
            for start in range(0, len(group), columns):
                cols = st.columns(columns)
                for col, p in zip(cols, group[start:start + columns]):
                    values[p.name] = widget(col, p, prefix + p.name, None if p.default
                                            is not None else defaults.get(p.name), layers)
    constrained = constraint_fields(cls, kind)
    if constrained:
        with st.expander("Constraint settings (used by the chosen constraint only)"):
            for name, ps in constrained.items():
                for col, p in zip(st.columns(columns), ps):
                    label = f"{name.capitalize()}: {p.name.replace('_', ' ')}"
                    values[f"{name}.{p.name}"] = widget(col, p, f"{prefix}{name}_{p.name}",
                                                        label=label)
    return values


def draw_controls(cls, kind: str, prefix: str = "gen_") -> dict:
    """The controls' widgets, outside the form (see ``controls``)."""
    return {p.name: widget(st, p, prefix + p.name) for p in controls(cls) if kind in p.kinds}


def generation_params(cls, values: dict) -> dict:
    """run_generation's keyword arguments from the form's values, each checked by its
    declaration (an InputError naming the parameter, for the page to show). A value keyed
    ``"constraint.name"`` is that constraint's parameter, passed only when it is chosen."""
    params = {}
    for key, v in values.items():
        owner, _, name = key.rpartition(".")
        if owner and owner != values.get("constraint"):
            continue
        p = CONSTRAINTS.load(owner).params[name] if owner else cls.params[name]
        if p.type == "int" and v is not None:
            v = int(v)
        elif isinstance(v, str) and p.type == "list":
            v = p.parse(v)
        params[name] = p.validate(v)
    return params


def batch_size(n_seeds: int) -> int:
    """Batches small enough for about ten progress updates, large enough to stay vectorized."""
    return int(min(128, max(4, math.ceil(n_seeds / 10))))
