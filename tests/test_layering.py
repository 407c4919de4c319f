"""The layering contract of ``docs/architecture.md``, checked on the source.

Every ``import`` of every module of ``graphpipe/`` and ``cli/`` (``graphpipe.cli``) is
read from its syntax tree, lazy ones inside functions included (``if TYPE_CHECKING:``
blocks left out: they never run). The contract:

1. no import cycle between modules (:data:`KNOWN_CYCLES` lists the cycles being
   removed now; a new one fails, and a listed one that is gone must leave the list);
2. nothing inside the package imports its face, ``graphpipe/__init__.py``
   (``import graphpipe`` / ``from graphpipe import X`` where ``X`` is not a submodule);
3. a room imports only rooms below it (:data:`LAYERS`, the layer table of
   ``docs/architecture.md``; :data:`KNOWN_UPWARD` lists the exceptions being removed now).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"graphpipe": ROOT / "graphpipe", "graphpipe.cli": ROOT / "cli"}

LAYERS: list[set[str]] = [
    {"_version", "omp", "memory", "jit_notice", "interrupt"},
    {"allocator", "progress"},
    {"ops", "store", "text"},
    {"ingest", "loaders", "derive", "export"},
    {"synthetic", "interop", "service", "dgl"},
    {"train", "graphbolt"},
    {"cli"},
]
"""Rooms from the bottom up (the layer table of ``docs/architecture.md``): a room imports
rooms of lower layers only, never one of its own layer or above."""

KNOWN_CYCLES: list[set[str]] = [
]
"""Cycles being removed now; each entry is the exact set of modules of one strongly
connected component. This list only shrinks: remove an entry when its cycle is gone."""

KNOWN_UPWARD: set[tuple[str, str]] = set()
"""``(importer, imported)`` imports against :data:`LAYERS` being removed now (only shrinks)."""


def _module_name(path: Path) -> str:
    for package, folder in PACKAGES.items():
        if path.is_relative_to(folder):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            return ".".join([package, *parts])
    raise ValueError(path)


@cache
def modules() -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    found = {}
    for folder in PACKAGES.values():
        for path in sorted(folder.rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _is_package(name: str) -> bool:
    return modules()[name].name == "__init__.py"


def _resolve(name: str) -> str | None:
    """The module ``name`` lives in: itself, or the longest enclosing module we have."""
    while name and name not in modules():
        name = name.rpartition(".")[0]
    return name or None


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST):
    """Every Import / ImportFrom, at any depth, outside ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _absolute(node: ast.ImportFrom, importer: str) -> str:
    if not node.level:
        return node.module or ""
    base = importer if _is_package(importer) else importer.rpartition(".")[0]
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    return f"{base}.{node.module}" if node.module else base


@cache
def imports() -> dict[str, dict[str, int]]:
    """importer -> {imported graphpipe module: line}; ``"graphpipe"`` is the face."""
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules().items():
        edges: dict[str, int] = {}
        for node in _import_nodes(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _absolute(node, name)
                # `from pkg import sub` names the submodule when it is one
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules() else base
                           for a in node.names]
            for target in targets:
                if target == "graphpipe" or target.startswith("graphpipe."):
                    resolved = _resolve(target)
                    if resolved and resolved != name:
                        edges.setdefault(resolved, node.lineno)
        graph[name] = edges
    return graph


def _components() -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph = {m: [t for t in ts if t != "graphpipe"] for m, ts in imports().items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[set[str]] = []
    counter = 0
    for root, targets in graph.items():
        if root in index:
            continue
        work = [(root, iter(targets))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def room(module: str) -> str:
    """The room of a module: ``cli``, or the first name under ``graphpipe``."""
    if module == "graphpipe.cli" or module.startswith("graphpipe.cli."):
        return "cli"
    return module.split(".")[1] if "." in module else "graphpipe"


def _layer(name: str) -> int:
    for level, rooms in enumerate(LAYERS):
        if name in rooms:
            return level
    raise AssertionError(f"room {name!r} is in no layer of tests/test_layering.py: add it to "
                         f"LAYERS and to the table of docs/architecture.md")


def _describe(component: set[str]) -> str:
    lines = []
    for module in sorted(component):
        for target, line in sorted(imports()[module].items()):
            if target in component:
                lines.append(f"  {modules()[module].relative_to(ROOT)}:{line} imports {target}")
    return "\n".join(lines)


def test_the_parser_sees_lazy_imports() -> None:
    """The check reads imports inside functions (the face's lazy NeighborLoader)."""
    assert "graphpipe.loaders" in imports()["graphpipe"]
    assert "graphpipe.store.reader" in imports()["graphpipe.store"]


def test_no_new_import_cycle() -> None:
    found = _components()
    new = [c for c in found if c not in KNOWN_CYCLES]
    assert not new, "import cycles:\n" + "\n\n".join(_describe(c) for c in new)


def test_known_cycles_still_exist() -> None:
    """A cycle that is gone leaves KNOWN_CYCLES (so that it cannot come back unseen)."""
    gone = [sorted(c) for c in KNOWN_CYCLES if c not in _components()]
    assert not gone, f"remove these from KNOWN_CYCLES in tests/test_layering.py: {gone}"


def test_nothing_imports_the_face() -> None:
    offenders = [f"{modules()[m].relative_to(ROOT)}:{line}" for m, targets in imports().items()
                 if m != "graphpipe" for t, line in targets.items() if t == "graphpipe"]
    assert not offenders, "imports of graphpipe/__init__.py from inside the package: " \
        + ", ".join(offenders)


def _upward(module: str) -> list[str]:
    mine = room(module)
    found = []
    for target, line in imports()[module].items():
        theirs = room(target)
        if theirs in (mine, "graphpipe") or _layer(theirs) < _layer(mine):
            continue
        if (module, target) not in KNOWN_UPWARD:
            found.append(f"{modules()[module].relative_to(ROOT)}:{line} ({mine}) imports {target} "
                         f"({theirs})")
    return found


def test_imports_point_down() -> None:
    up = [line for module in sorted(modules()) if module != "graphpipe" for line in _upward(module)]
    assert not up, "imports that do not point down:\n" + "\n".join(up)


def test_known_upward_imports_still_exist() -> None:
    gone = sorted(pair for pair in KNOWN_UPWARD if pair[1] not in imports().get(pair[0], {}))
    assert not gone, f"remove these from KNOWN_UPWARD in tests/test_layering.py: {gone}"
