"""Static checks of the source tree's shape: import cycles, private imports, sizes.

Run ``python tests/structure.py [PREFIX]`` to list what breaks the rules (optionally only
modules whose dotted name starts with PREFIX); ``tests/test_structure.py`` asserts none do.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_FUNCTION_LINES = 60
MAX_FILE_LINES = 400


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module under src/."""
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` (a module or module.attribute) lies in."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def _imports(mod: str, path: Path, mods: dict[str, Path]):
    """(imported module, imported names, line) for every ``extrap`` import in ``path``."""
    tree = ast.parse(path.read_text())
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("extrap"):
                    yield _resolve(a.name, mods), [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            if not base.startswith("extrap"):
                continue
            names = [a.name for a in node.names]
            submodules = [f"{base}.{n}" for n in names if f"{base}.{n}" in mods]
            for s in submodules:
                yield s, [], node.lineno
            rest = [n for n in names if f"{base}.{n}" not in mods]
            if rest:
                yield _resolve(base, mods), rest, node.lineno


def _reexports(mods: dict[str, Path]) -> dict[tuple[str, str], str]:
    """(package, name) -> the module that a package's ``__init__`` re-exports ``name`` from."""
    out = {}
    for mod, path in mods.items():
        if path.name != "__init__.py":
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("extrap"):
                src = _resolve(node.module, mods)
                for a in node.names:
                    out[(mod, a.asname or a.name)] = src
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules it imports (at any depth of the file, lazy imports included).

    A name imported from a package that only re-exports it counts as an import of the module
    that defines it: the package's ``__init__`` is a hub, not a dependency.
    """
    mods = modules()
    hub = _reexports(mods)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for target, names, _ in _imports(mod, path, mods):
            if target is None:
                continue
            is_package = mods[target].name == "__init__.py"
            targets = {hub.get((target, n), target) for n in names} if is_package and names else {target}
            graph[mod] |= {t for t in targets if t != mod}
    return graph


def cycles() -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    graph = import_graph()
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def cycle_path(component: list[str]) -> list[str]:
    """One concrete import loop inside a strongly connected ``component``: [a, b, ..., a]."""
    graph, comp = import_graph(), set(component)
    start = component[0]
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & comp):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return component


def private_imports() -> list[str]:
    """``from extrap.x import _y`` where _y is a private name of another module."""
    mods = modules()
    bad = []
    for mod, path in mods.items():
        for target, names, line in _imports(mod, path, mods):
            for n in names:
                if n.startswith("_") and not n.startswith("__"):
                    bad.append(f"{path.relative_to(SRC)}:{line}: {n} from {target}")
    return bad


EXPERIMENTS = "extrap.experiments"
SKELETON_OF_EXPERIMENTS = ("protocol", "registry")  # shared modules inside extrap.experiments


def experiment_of(mod: str) -> str | None:
    """The experiment package ``mod`` belongs to (``extrap.experiments.<name>``), None for a shared module."""
    if not mod.startswith(EXPERIMENTS + "."):
        return None
    name = mod[len(EXPERIMENTS) + 1 :].split(".")[0]
    return None if name in SKELETON_OF_EXPERIMENTS else name


def experiment_imports() -> list[str]:
    """A shared module (anything outside an experiment's package) importing an experiment's package."""
    mods = modules()
    bad = []
    for mod, path in mods.items():
        if experiment_of(mod) is not None:
            continue
        for target, _, line in _imports(mod, path, mods):
            if target is not None and experiment_of(target) is not None:
                bad.append(f"{path.relative_to(SRC)}:{line}: imports {target}")
    return bad


def long_functions(limit: int = MAX_FUNCTION_LINES) -> list[str]:
    bad = []
    for path in modules().values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    bad.append(f"{path.relative_to(SRC)}:{node.lineno}: {node.name} has {n} lines")
    return bad


def long_files(limit: int = MAX_FILE_LINES) -> list[str]:
    bad = []
    for path in modules().values():
        n = len(path.read_text().splitlines())
        if n > limit:
            bad.append(f"{path.relative_to(SRC)}: {n} lines")
    return bad


# Packages whose public functions speak in typed records, never bare dicts.
TYPED_PACKAGES = ("evaluate", "erf", "align", "tasks", "study", "theory", "run")
# The JSON edge of a record, and torch's state-dict protocol: dicts by definition.
DICT_EDGES = {"to_json", "from_json", "state_dict", "load_state_dict"}


def _is_dict(ann: ast.expr | None) -> bool:
    """``dict``, ``dict[...]``, ``Dict[...]`` or a union holding one (string annotations parsed)."""
    if ann is None:
        return False
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return False
    if isinstance(ann, ast.Subscript):
        if ast.unparse(ann.slice).replace("torch.", "").strip("()") == "str, Tensor":
            return False  # tensors by name (weights, a state dict): a mapping, not a report
        ann = ann.value
    if isinstance(ann, ast.BinOp):
        return _is_dict(ann.left) or _is_dict(ann.right)
    name = ann.id if isinstance(ann, ast.Name) else ann.attr if isinstance(ann, ast.Attribute) else ""
    return name in ("dict", "Dict")


def dict_signatures(packages=TYPED_PACKAGES) -> list[str]:
    """Public functions and methods in ``packages`` that return a dict or take a dict parameter."""
    bad = []
    for mod, path in modules().items():
        parts = mod.split(".")
        if len(parts) < 2 or parts[1] not in packages:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name.startswith("_"):
                continue
            if node.name in DICT_EDGES:
                continue
            args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            what = [a.arg for a in args if _is_dict(a.annotation)]
            what += ["return"] if _is_dict(node.returns) else []
            if what:
                bad.append(f"{path.relative_to(SRC)}:{node.lineno}: {node.name} ({', '.join(what)})")
    return bad


if __name__ == "__main__":
    prefix = sys.argv[1] if len(sys.argv) > 1 else ""
    keep = (lambda s: prefix.replace(".", "/") in s) if prefix else (lambda s: True)
    loops = [c for c in cycles() if any(prefix in m for m in c)]
    print("cycles:", *[f"{' '.join(c)}\n    e.g. {' -> '.join(cycle_path(c))}" for c in loops], sep="\n  ")
    for title, items in (
        ("private imports", private_imports()),
        ("shared modules importing an experiment", experiment_imports()),
        ("long functions", long_functions()),
        ("long files", long_files()),
        ("dict signatures", dict_signatures()),
    ):
        print(f"{title}:", *[s for s in items if keep(s)], sep="\n  ")
