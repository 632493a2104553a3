"""Static checks of the source tree's shape: import cycles, private imports, sizes.

Run ``python tests/structure.py [PREFIX]`` to list what breaks the rules (optionally only
modules whose dotted name starts with PREFIX); ``tests/test_structure.py`` asserts none do.
"""

from __future__ import annotations

import ast
import re
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
SKELETON_OF_EXPERIMENTS = ("protocol", "registry", "assemble")  # shared modules inside extrap.experiments


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


REGISTRY = "extrap.experiments.registry"
# study.json and a StudyRequest that name no experiment were written or made before experiments had names:
# study/plan.py reads them as the registry's DEFAULT, which it cannot import (the spec's types import it)
NAME_EXEMPT = {("extrap.study.plan", "extrapolation")}
# the shared skeleton of the experiments (issue 29): elsewhere "extension" is a JSON key of extrap.extend
SKELETON = ("extrap.study", "extrap.report", "extrap.results", "extrap.commands.study", EXPERIMENTS)


def experiment_names(mods: dict[str, Path]) -> set[str]:
    """Every name the registry lists: the string keys of its module-level dict literals."""
    names = set()
    for node in ast.parse(mods[REGISTRY].read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            names |= {k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return names


def experiment_name_literals() -> list[str]:
    """A string literal equal to an experiment's name in the shared skeleton (docstrings aside): a module that
    branches on, defaults to or looks up an experiment by name, which only the registry may do."""
    mods = modules()
    names, bad = experiment_names(mods), []
    for mod, path in mods.items():
        if experiment_of(mod) is not None or mod == REGISTRY or not mod.startswith(SKELETON):
            continue
        tree = ast.parse(path.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree) if getattr(n, "body", None) and isinstance(n.body, list)
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}  # fmt: skip
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in names and id(node) not in docs:
                if (mod, node.value) not in NAME_EXEMPT:
                    bad.append(f"{path.relative_to(SRC)}:{node.lineno}: {node.value!r}")
    return bad


COMMANDS = "extrap.commands"
STUDY_COMMAND = "extrap.commands.study"


def command_experiment_mentions() -> list[str]:
    """An experiment named in a CLI module: its help and choices come from the registry and the experiment's
    ``about``.  ``extrap study``'s module may not name one anywhere (comments and docstrings too); the other
    commands may use the one-word names as words of their own ("extension", "alignment"), not a hyphenated one."""
    mods = modules()
    names, bad = experiment_names(mods), []
    for mod, path in mods.items():
        if mod != COMMANDS and not mod.startswith(COMMANDS + "."):
            continue
        told = names if mod == STUDY_COMMAND else {n for n in names if "-" in n}
        if not told:
            continue
        pattern = re.compile(
            r"(?<![\w-])(" + "|".join(map(re.escape, sorted(told, key=len, reverse=True))) + r")(?![\w-])"
        )
        for i, line in enumerate(path.read_text().splitlines(), 1):
            bad += [f"{path.relative_to(SRC)}:{i}: {m.group(1)!r}" for m in pattern.finditer(line)]
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


# Writing APIs that only the checked writer (extrap/io.py) may call: every other module writes through it.
WRITER = "extrap/io.py"
RAW_FUNCTIONS = {
    "os": {"open", "write", "replace", "rename", "renames", "mkdir", "makedirs", "symlink", "link", "truncate",
           "ftruncate", "mkfifo", "mknod", "fdopen"},
    "shutil": {"copy", "copy2", "copyfile", "copyfileobj", "copytree", "move"},
    "tempfile": {"mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryFile", "SpooledTemporaryFile"},
    "json": {"dump"},
    "pickle": {"dump"},
    "torch": {"save"},
    "np": {"save", "savez", "savez_compressed", "savetxt"},
    "numpy": {"save", "savez", "savez_compressed", "savetxt"},
    "safetensors.torch": {"save_file"},
}  # fmt: skip
RAW_METHODS = {"write_text", "write_bytes", "mkdir", "touch", "symlink_to", "hardlink_to", "to_csv", "tofile",
               "save_pretrained", "savefig"}  # fmt: skip
TEXT_METHODS = {"to_csv"}  # without a destination, these return the text instead of writing it
# Serialisers that may write into memory (an io.BytesIO), whose bytes then go to the writer: (argument, keyword).
IN_MEMORY = {"savefig": (0, "fname"), "torch.save": (1, "f"), "np.save": (0, "file"), "numpy.save": (0, "file")}


def _write_mode(call: ast.Call, position: int) -> bool:
    """Whether an ``open``'s mode (argument ``position`` or ``mode=``) may write: not a constant read-only mode.

    A method's first argument counts as its mode only as a string (``path.open("w")``): ``gzip.open(path)`` reads.
    """
    mode = call.args[position] if len(call.args) > position else None
    if position == 0 and not (isinstance(mode, ast.Constant) and isinstance(mode.value, str)):
        mode = None
    mode = next((k.value for k in call.keywords if k.arg == "mode"), mode)
    if mode is None:
        return False  # open's default mode reads
    return not (isinstance(mode, ast.Constant) and isinstance(mode.value, str) and not set("wax+") & set(mode.value))


def _memory_names(tree: ast.AST) -> set[str]:
    """Names bound to an ``io.BytesIO()`` anywhere in the module."""
    return {
        t.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
        and ast.unparse(node.value.func) in ("io.BytesIO", "BytesIO")
        for t in node.targets
        if isinstance(t, ast.Name)
    }  # fmt: skip


def _raw_write(node: ast.AST, memory: set[str]) -> str | None:
    """The raw writing API that ``node`` uses (a call, or an import of a writing function), else None."""
    if isinstance(node, ast.ImportFrom) and node.module in RAW_FUNCTIONS:
        hits = [a.name for a in node.names if a.name in RAW_FUNCTIONS[node.module]]
        return f"from {node.module} import {', '.join(hits)}" if hits else None
    if not isinstance(node, ast.Call):
        return None
    dotted = ast.unparse(node.func)
    module, _, name = dotted.rpartition(".")
    if dotted == "open" and _write_mode(node, 1) or name == "open" and module != "os" and _write_mode(node, 0):
        return f"{dotted} for writing"
    if not (name in RAW_METHODS or name in RAW_FUNCTIONS.get(module, ())):
        return None
    if name in TEXT_METHODS and not node.args and not node.keywords:
        return None  # returns the text (extrap's Table.to_csv); it writes nothing
    key = "savefig" if name == "savefig" else dotted
    if key in IN_MEMORY:
        position, keyword = IN_MEMORY[key]
        dest = node.args[position] if len(node.args) > position else None
        dest = next((k.value for k in node.keywords if k.arg == keyword), dest)
        if isinstance(dest, ast.Name) and dest.id in memory:
            return None  # serialised into memory; the bytes go to the writer
    return dotted


def raw_writes() -> list[str]:
    """Every call of a raw writing API (or import of one) outside extrap/io.py, the one checked writer."""
    bad = []
    for path in modules().values():
        rel = path.relative_to(SRC).as_posix()
        if rel == WRITER:
            continue
        tree = ast.parse(path.read_text())
        memory = _memory_names(tree)
        for node in ast.walk(tree):
            what = _raw_write(node, memory)
            if what:
                bad.append(f"{rel}:{node.lineno}: {what}")
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
        ("raw writes", raw_writes()),
    ):
        print(f"{title}:", *[s for s in items if keep(s)], sep="\n  ")
