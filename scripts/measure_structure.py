"""Structure figures of the code base: import circles, imports against the layer order,
functions over 80 lines, private names imported across modules, tests of a data set's name
outside the data layer, methods on the Criterion base, hand-rolled atomic writers and
file-hash copies. Exits with 1 when there is any circle (between modules or between
packages), any import against the layer order (a late import inside a function and a
registry's "module:Class" string included), any function over 80 lines, private import, data
set name test, import of our own modules (or of TensorFlow, Keras, Ray, NLTK) inside a
function that LATE_IMPORTS_ALLOWED does not allow, or more than 20 methods on the Criterion
base; CI runs it (scripts/test.sh, before the tests).

    python scripts/measure_structure.py [ROOT]      # ROOT: a checkout (default: this one)

The layer order and the import graph are tests/test_layers.py's (read from ROOT's copy when it
has one, else this checkout's)."""
from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


LONG = 80          # lines: a function longer than this fails

# Where an import of our own modules (or of TensorFlow, Keras, Ray, NLTK: rnncon_core.lazy's)
# may sit inside a function: importer prefix -> (the imported prefixes allowed, or None for
# any; the reason). docs/internals.md, "Imports". Anywhere else such an import fails the check.
LATE_IMPORTS_ALLOWED = {
    "rnncon_core.cli": (None, "the commands import the engine when they run, so `rnncon --help` "
                              "and the argument checks stay quick"),
    "dashboard": (("dashboard.tables", "rnncon_core.coverage", "rnncon_core.reports",
                   "rnncon_core.campaign"),
                  "the modules that bring pandas and plotly load when a page first needs them, "
                  "so the Models page's first view loads neither"),
}
HEAVY = ("tensorflow", "keras", "ray", "nltk")


def _allowed(importer: str, target: str) -> bool:
    for prefix, (targets, _) in LATE_IMPORTS_ALLOWED.items():
        if importer == prefix or importer.startswith(prefix + "."):
            return targets is None or any(target == t or target.startswith(t + ".")
                                          for t in targets)
    return False


def late_internal_imports(root: Path) -> list[str]:
    """"module:line imported" of each import inside a function (or a page's block) of one of
    our modules, or of TensorFlow/Keras/Ray/NLTK, that LATE_IMPORTS_ALLOWED does not allow."""
    L = _layers_module(root)
    known = L.modules(root)
    out = []
    for name, path in known.items():
        tree = ast.parse(path.read_text())
        top = {id(n) for n in tree.body}
        for n in ast.walk(tree):
            if not isinstance(n, (ast.Import, ast.ImportFrom)) or id(n) in top:
                continue
            heavy = [a.name for a in n.names if a.name.split(".")[0] in HEAVY] \
                if isinstance(n, ast.Import) else \
                ([n.module] if not n.level and n.module.split(".")[0] in HEAVY else [])
            ours = L._targets(name, n, path.name == "__init__.py", known)
            bad = [t for t in heavy + ours if not _allowed(name, t)]
            if bad:
                out.append(f"{name}:{n.lineno} {', '.join(bad)}")
    return out


def _layers_module(root: Path = HERE):
    path = root / "tests" / "test_layers.py"
    if not path.is_file():
        path = HERE / "tests" / "test_layers.py"
    spec = importlib.util.spec_from_file_location("layers", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def long_functions(root: Path, limit: int = LONG) -> list[tuple[str, int]]:
    out = []
    for p in sorted((root / "rnncon_core").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    out.append((f"{p.relative_to(root)}:{node.name}", n))
    return sorted(out, key=lambda t: -t[1])


def writers(root: Path) -> tuple[list[str], list[str]]:
    """Atomic writers written by hand (a temporary file moved into place) outside io.py, and
    sha256 computations of a file's bytes outside io.py."""
    atomic, hashes = [], []
    for p in sorted((root / "rnncon_core").rglob("*.py")):
        if p.name == "io.py" and p.parent.name == "rnncon_core":
            continue
        lines = p.read_text().splitlines()
        for i, line in enumerate(lines, 1):
            if re.search(r"os\.replace\(|\btmp\w*\.replace\(", line) and "db" not in line:
                atomic.append(f"{p.relative_to(root)}:{i}")
            near = " ".join(lines[i - 1:i + 4])
            if re.search(r"sha256\(.*read_bytes", line) or (
                    "hashlib.sha256()" in line and "open(" in near):
                hashes.append(f"{p.relative_to(root)}:{i}")
    return atomic, hashes


def main(root: Path) -> int:
    """Prints the figures; the number of failures (circles, upward imports, long functions)."""
    L = _layers_module(root)
    graph = L.import_graph(root)
    circles = L.circles(graph)
    up = L.upward(graph)
    # the same graph between packages (rnncon_core.coverage, rnncon_core.runs, dashboard, ...)
    def pkg(m):
        parts = m.split(".")
        return ".".join(parts[:2]) if parts[0] == "rnncon_core" and len(parts) > 1 else parts[0]
    pgraph: dict = {}
    for m, targets in graph.items():
        for t in targets:
            if pkg(t) != pkg(m):
                pgraph.setdefault(pkg(m), {})[pkg(t)] = 1
    pcircles = L.circles(pgraph)
    lazy = 0
    for name, path in L.modules(root).items():
        tree = ast.parse(path.read_text())
        top = {id(n) for n in tree.body}
        lazy += sum(isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in top
                    for n in ast.walk(tree))
    longf = long_functions(root)
    atomic, hashes = writers(root)
    private = L.private_imports(root)
    named = L.dataset_name_tests(root)
    late = late_internal_imports(root)
    methods = L.criterion_methods(root)
    over = max(0, len(methods) - L.CRITERION_METHODS)
    print(f"root {root}")
    print(f"modules {len(graph)}, import edges {sum(map(len, graph.values()))}, "
          f"imports inside functions {lazy}")
    print(f"imports of our modules or of {'/'.join(HEAVY)} inside functions that "
          f"LATE_IMPORTS_ALLOWED does not allow: {len(late)}")
    for u in late:
        print("   ", u)
    print(f"import circles (groups of modules importing each other): {len(circles)}")
    for c in circles:
        print("   ", " <-> ".join(c))
    print(f"package circles (rnncon_core's sub-packages as nodes): {len(pcircles)}")
    for c in pcircles:
        print("   ", " <-> ".join(c))
    print(f"imports against the layer order: {len(up)}")
    for u in up:
        print("   ", u)
    print(f"functions over {LONG} lines in rnncon_core: {len(longf)}")
    for name, n in longf:
        print(f"    {n:4d}  {name}")
    print(f"private names imported across modules: {len(private)}")
    for u in private:
        print("   ", u)
    print(f"tests of a data set's name outside the data layer: {len(named)}  {named}")
    print(f"methods on the Criterion base: {len(methods)} (at most {L.CRITERION_METHODS})")
    print(f"hand-rolled atomic writers outside io.py: {len(atomic)}  {atomic}")
    print(f"file sha256 computations outside io.py: {len(hashes)}  {hashes}")
    failures = len(circles) + len(pcircles) + len(up) + len(longf) + len(private) + len(named) \
        + len(late) + over
    if failures:
        print(f"FAILED: {failures} circle(s), upward import(s), long function(s), private "
              f"import(s), data set name test(s), late import(s) or Criterion method(s) above")
    return failures


if __name__ == "__main__":
    sys.exit(1 if main(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else HERE) else 0)
