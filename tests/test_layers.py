"""The layers point down only: every import of rnncon_core and dashboard, read from the source
(top-level and inside functions alike, a module's import of its own package's ``__init__``
included) and every "module:Name" string a registry loads later, goes to the same layer or a
lower one, the import graph has no circle, neither the core nor the CLI imports the dashboard,
and every module imports on its own (a fresh start of the packages, no other module first).

The order (docs/internals.md draws it): ground (errors, paths, io, params, registry) ->
data, textdiff -> zoo, onnx_import -> trace -> coverage -> rnncon_core's own __init__ ->
generate -> text -> quality, checks, validity, prioritize -> retrain, campaign -> runs -> jobs
-> experiments -> reports -> cli -> dashboard.
"""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rnncon_core", "dashboard")

# lowest first; a module belongs to the longest prefix listed ("rnncon_core" alone is the
# package's own __init__, the public names it loads on first use from data, zoo and coverage)
LAYERS = [
    ("rnncon_core.errors", "rnncon_core.paths", "rnncon_core.io",
     "rnncon_core.params", "rnncon_core.registry", "rnncon_core.lazy"),
    ("rnncon_core.data", "rnncon_core.textdiff"),
    ("rnncon_core.zoo", "rnncon_core.onnx_import"),
    ("rnncon_core.trace",),
    ("rnncon_core.coverage",),
    ("rnncon_core",),
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


# a class or function named for a later import: "rnncon_core.coverage.rconc:ContributionCoverage"
_LATE = re.compile(r"^((?:rnncon_core|dashboard)(?:\.\w+)*)(?::[A-Za-z_][\w.]*)?$")


def _text(node, consts: dict[str, str]) -> str | None:
    """The string an expression always gives: a literal, a module-level string constant, or
    a sum of them (``_C + "rconc:ContributionCoverage"``); None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _text(node.left, consts), _text(node.right, consts)
        return a + b if a is not None and b is not None else None
    return None


def late_imports(tree: ast.Module) -> list[tuple[str, int]]:
    """(module, line) of each module a string names for a later import: "module:Name" (a
    registry's table) and ``importlib.import_module("module")``."""
    consts: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            value = _text(node.value, consts)
            if value is not None:
                consts[node.targets[0].id] = value
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and (
                getattr(node.func, "attr", None) == "import_module"
                or getattr(node.func, "id", None) in ("import_module", "__import__")):
            text = _text(node.args[0], consts)
            m = _LATE.match(text or "")
            if m:
                out.append((m.group(1), node.lineno))
        elif isinstance(node, (ast.Constant, ast.BinOp)):
            text = _text(node, consts)
            if text and ":" in text and _LATE.match(text):
                out.append((_LATE.match(text).group(1), node.lineno))
    return out


def import_graph(root: Path = ROOT) -> dict[str, dict[str, int]]:
    """module -> {imported module: line}, for the modules of our packages only: import
    statements anywhere in the module (a child's import of its own package's ``__init__``
    too: that is how a circle through ``__init__`` runs) and "module:Name" strings."""
    known = modules(root)
    graph: dict[str, dict[str, int]] = {m: {} for m in known}
    for name, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for t in _targets(name, node, path.name == "__init__.py", known):
                    if t != name:
                        graph[name].setdefault(t, node.lineno)
        for text, line in late_imports(tree):
            t = text
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                graph[name].setdefault(t, line)
    return graph


def layer(module: str) -> int:
    best, rank = -1, None
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or (module.startswith(p + ".") and p != "rnncon_core")) \
                    and len(p) > best:
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


def upward(graph: dict[str, dict[str, int]]) -> list[str]:
    """Every edge of the graph that points to a higher layer (and is not allowed)."""
    return [f"{m}:{line} imports {t} (layer {layer(t)} > {layer(m)})"
            for m, targets in graph.items() for t, line in targets.items()
            if layer(t) > layer(m) and (m, t) not in ALLOWED_UP]


# Pages Streamlit runs as scripts (AppTest covers them); every other module must import alone.
SCRIPTS = ("dashboard.app", "dashboard.views", "rnncon_core.__main__")

_IMPORT_EACH = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
failed = {}
for name in sys.argv[2:]:
    for m in [m for m in sys.modules if m.split(".")[0] in ("rnncon_core", "dashboard")]:
        del sys.modules[m]
    try:
        importlib.import_module(name)
    except BaseException as e:
        failed[name] = f"{type(e).__name__}: {e}"
        continue
    heavy = [h for h in ("tensorflow", "keras", "ray", "nltk") if h in sys.modules]
    if heavy:           # they load on first use only, through rnncon_core.lazy
        failed[name] = f"imports {', '.join(heavy)} when it is imported"
        break
print(json.dumps(failed))
"""


def import_each(root: Path = ROOT, names: list[str] | None = None) -> dict[str, str]:
    """module -> error, for each module (default: all but the page scripts) that fails to
    import when it is the first of our modules to load, or that imports TensorFlow, Keras, Ray
    or NLTK (they load on first use, through ``rnncon_core.lazy``): one Python process clears
    ``rnncon_core`` and ``dashboard`` from ``sys.modules`` before each (the other libraries
    stay loaded; about 4 s for all)."""
    names = names or [m for m in modules(root)
                      if not any(m == s or m.startswith(s + ".") for s in SCRIPTS)]
    out = subprocess.run([sys.executable, "-c", _IMPORT_EACH, str(root), *names], cwd=root,
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_module_has_a_layer():
    for m in modules():
        layer(m)


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_imports_point_down():
    assert upward(import_graph()) == []


def test_every_module_imports_alone():
    assert import_each() == {}


def test_the_lazy_stand_in_imports_on_first_use():
    """rnncon_core.lazy's stand-in imports its library on the first attribute read, not
    before (a small standard module stands in for TensorFlow here)."""
    code = ("import sys\nfrom rnncon_core.lazy import LazyModule, available\n"
            "m = LazyModule('colorsys')\nbefore = 'colorsys' in sys.modules\n"
            "rgb = m.hsv_to_rgb(0, 0, 1)\n"
            "print(before, 'colorsys' in sys.modules, rgb, available(LazyModule('no_such_lib')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.split() == ["False", "True", "(1,", "1,", "1)", "False"], out.stderr


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


def _copy(tmp_path) -> Path:
    root = tmp_path / "copy"
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, root / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _inject(root: Path, rel: str, text: str, after: str | None = None) -> None:
    path = root / rel
    s = path.read_text()
    path.write_text(s.replace(after, after + text, 1) if after else s + text)


def _measure(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "measure_structure.py"),
                           str(root)], capture_output=True, text=True, timeout=120)


def test_injected_faults_fail_the_checks(tmp_path):
    """Into a copy of the packages: a circle through a package's __init__, an upward import
    inside a function, a registry string that points up, imports (down, and of TensorFlow)
    inside a function, a long function. The script exits
    with 1 on each (and 0 on the copy as it is), and the tests' own checks see each."""
    out = _measure(_copy(tmp_path / "clean"))
    assert out.returncode == 0, out.stdout

    root = _copy(tmp_path / "circle")       # nc needs its package's __init__, which needs nc
    _inject(root, "rnncon_core/coverage/nc.py", "from . import register_criterion\n",
            after="from __future__ import annotations\n")
    _inject(root, "rnncon_core/coverage/__init__.py", "from .nc import NeuronCoverage\n",
            after="from __future__ import annotations\n")
    out = _measure(root)
    assert out.returncode == 1 and "rnncon_core.coverage <-> " in out.stdout, out.stdout
    assert ["rnncon_core.coverage", "rnncon_core.coverage.nc"] in circles(import_graph(root))
    failed = import_each(root, ["rnncon_core.coverage", "rnncon_core.coverage.nc"])
    assert "circular import" in failed["rnncon_core.coverage"], failed

    root = _copy(tmp_path / "late")         # the data layer reaches up to the reports
    _inject(root, "rnncon_core/data.py", "\n\ndef _late():\n    from .reports import html\n")
    out = _measure(root)
    assert out.returncode == 1 and "rnncon_core.data:" in out.stdout, out.stdout
    assert any(u.startswith("rnncon_core.data:") and "rnncon_core.reports.html" in u
               for u in upward(import_graph(root)))

    root = _copy(tmp_path / "string")       # the ground floor names a criterion's class
    _inject(root, "rnncon_core/registry.py",
            '\n_C = "rnncon_core.coverage."\nCRITERIA.declare({"x": _C + "nc:NeuronCoverage"})\n')
    out = _measure(root)
    assert out.returncode == 1 and "rnncon_core.registry:" in out.stdout, out.stdout
    assert any(u.startswith("rnncon_core.registry:") and "rnncon_core.coverage.nc" in u
               for u in upward(import_graph(root)))

    root = _copy(tmp_path / "inside")       # imports that point down but hide in a function
    _inject(root, "rnncon_core/runs.py", "\n\ndef _inside():\n    from .data import load_dataset\n"
            "    import tensorflow as tf\n")
    _inject(root, "dashboard/state.py", "\n\ndef _inside():\n    from rnncon_core import zoo\n")
    out = _measure(root)
    late = [u.split()[-1] for u in out.stdout.splitlines()
            if u.strip().startswith(("rnncon_core.runs:", "dashboard.state:"))]
    assert out.returncode == 1 and late == ["rnncon_core.data", "tensorflow",
                                            "rnncon_core.zoo"], out.stdout

    root = _copy(tmp_path / "long")
    _inject(root, "rnncon_core/paths.py",
            "\n\ndef _long():\n" + "    x = 1\n" * 80 + "    return x\n")
    out = _measure(root)
    assert out.returncode == 1 and "rnncon_core/paths.py:_long" in out.stdout, out.stdout


CRITERION_METHODS = 20      # the Criterion base keeps to its life cycle (docs/internals.md)


def criterion_methods(root: Path = ROOT) -> list[str]:
    """Every def in the body of ``class Criterion`` (rnncon_core/coverage/base.py), properties,
    class methods and dunders included: the rest lives in its collaborators (engine, state,
    report, targets, statefile)."""
    tree = ast.parse((root / "rnncon_core" / "coverage" / "base.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Criterion")
    return [n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_the_criterion_base_keeps_to_its_life_cycle():
    assert len(criterion_methods()) <= CRITERION_METHODS, criterion_methods()


def test_an_injected_criterion_method_fails_the_checks(tmp_path):
    """A 21st method on the Criterion base, in a copy: the script exits with 1."""
    root = _copy(tmp_path)
    _inject(root, "rnncon_core/coverage/base.py", "\n    def one_too_many(self):\n"
            "        return None\n", after="    KEEP_INPUTS = 2048\n")
    assert len(criterion_methods(root)) == len(criterion_methods()) + 1
    out = _measure(root)
    methods = len(criterion_methods(root))
    assert (out.returncode == 1) == (methods > CRITERION_METHODS), out.stdout
    assert f"methods on the Criterion base: {methods}" in out.stdout, out.stdout


def dataset_name_tests(root: Path = ROOT) -> list[str]:
    """Places outside the data layer that test a built-in data set's name (``== "imdb"``,
    ``in ("mnist", ...)``): they ask ``data.dataset_kind`` / ``DATA_SETS`` instead."""
    from rnncon_core.data import DATASETS
    out = []
    for name, path in modules(root).items():
        if name == "rnncon_core.data":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                for side in [node.left, *node.comparators]:
                    items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) \
                        else [side]
                    if any(isinstance(i, ast.Constant) and i.value in DATASETS for i in items):
                        out.append(f"{name}:{node.lineno}")
    return out


def test_no_module_outside_the_data_layer_tests_a_data_set_name():
    assert dataset_name_tests() == []


def private_imports(root: Path = ROOT) -> list[str]:
    """``from X import _name`` where X is another module of ours: a private name used across
    modules (make it public, or keep the use inside its module)."""
    known = modules(root)
    out = []
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__") \
                            and _targets(name, node, path.name == "__init__.py", known):
                        out.append(f"{name}:{node.lineno} imports {a.name}")
    return out


def test_no_private_name_is_imported_across_modules():
    assert private_imports() == []
