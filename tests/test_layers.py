"""The layers point down only: every import of rnncon_core and dashboard, read from the source
(top-level and inside functions alike), goes to the same layer or a lower one, the import graph
has no circle, and neither the core nor the CLI imports the dashboard.

The order (docs/internals.md draws it): ground (errors, paths, io, params, registry) ->
data, textdiff -> zoo, onnx_import -> trace -> coverage -> generate -> text -> quality,
validity, prioritize -> retrain, campaign -> runs -> jobs -> experiments -> reports -> cli ->
dashboard.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rnncon_core", "dashboard")

# lowest first; a module belongs to the longest prefix listed
LAYERS = [
    ("rnncon_core", "rnncon_core.errors", "rnncon_core.paths", "rnncon_core.io",
     "rnncon_core.params", "rnncon_core.registry"),
    ("rnncon_core.data", "rnncon_core.textdiff"),
    ("rnncon_core.zoo", "rnncon_core.onnx_import"),
    ("rnncon_core.trace",),
    ("rnncon_core.coverage",),
    ("rnncon_core.generate",),
    ("rnncon_core.text",),
    ("rnncon_core.quality", "rnncon_core.checks", "rnncon_core.validity",
     "rnncon_core.prioritize"),
    ("rnncon_core.retrain", "rnncon_core.campaign"),
    ("rnncon_core.runs",),
    ("rnncon_core.jobs",),
    ("rnncon_core.experiments",),
    ("rnncon_core.reports",),
    ("rnncon_core.cli", "rnncon_core.__main__"),
    ("dashboard",),
]

# (importer, imported) pairs allowed to point up, each with its reason. Keep it empty.
ALLOWED_UP: dict[tuple[str, str], str] = {}


def modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in sorted((root / pkg).rglob("*.py")):
            parts = list(p.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def _targets(name: str, node, is_pkg: bool, known) -> list[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            pkg = name.split(".") if is_pkg else name.split(".")[:-1]
            pkg = pkg[:len(pkg) - node.level + 1]
            base = ".".join(pkg + ([base] if base else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                 for a in node.names]
    out = []
    for n in names:
        while n and n not in known:
            n = n.rpartition(".")[0]
        if n:
            out.append(n)
    return out


def import_graph(root: Path = ROOT) -> dict[str, dict[str, int]]:
    """module -> {imported module: line}, for the modules of our packages only. Importing a
    package's own ``__init__`` from inside it (``from . import X``) is not an edge."""
    known = modules(root)
    graph: dict[str, dict[str, int]] = {m: {} for m in known}
    for name, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for t in _targets(name, node, path.name == "__init__.py", known):
                    if t != name and not name.startswith(t + "."):
                        graph[name].setdefault(t, node.lineno)
    return graph


def layer(module: str) -> int:
    best, rank = -1, None
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    assert rank is not None, f"{module} is in no layer: add it to LAYERS"
    return rank


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_module_has_a_layer():
    for m in modules():
        layer(m)


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_imports_point_down():
    up = [f"{m}:{line} imports {t} (layer {layer(t)} > {layer(m)})"
          for m, targets in import_graph().items() for t, line in targets.items()
          if layer(t) > layer(m) and (m, t) not in ALLOWED_UP]
    assert up == []


def test_core_and_cli_never_import_the_dashboard():
    bad = [f"{m} imports {t}" for m, targets in import_graph().items() if m.startswith("rnncon_core")
           for t in targets if t.split(".")[0] == "dashboard" and (m, t) not in ALLOWED_UP]
    assert bad == []
    # nor by a path trick: no sys.path edits in the core
    allowed = {m for m, _ in ALLOWED_UP}
    hacks = [m for m, p in modules().items()
             if m.startswith("rnncon_core") and m not in allowed and "sys.path" in p.read_text()]
    assert hacks == []


def test_the_checker_sees_circles_and_upward_imports(tmp_path):
    """The checks above fail on a circle and on an upward import, lazy ones included."""
    pkg = tmp_path / "rnncon_core"
    (pkg / "coverage").mkdir(parents=True)
    (tmp_path / "dashboard").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "data.py").write_text("def f():\n    from .coverage import base\n")
    (pkg / "coverage" / "__init__.py").write_text("")
    (pkg / "coverage" / "base.py").write_text("from ..data import f\n")
    graph = import_graph(tmp_path)
    assert circles(graph) == [["rnncon_core.coverage.base", "rnncon_core.data"]]
    assert graph["rnncon_core.data"] == {"rnncon_core.coverage.base": 2}
    assert layer("rnncon_core.coverage.base") > layer("rnncon_core.data")
