"""The import graph of one of our packages, read from its source: what the layer and cycle tests check.

Every import counts: at module level, inside a function (a lazy import is still a dependency), under
TYPE_CHECKING, and `importlib.import_module("a.b")` with a literal name. `from pkg import name` depends on
`pkg.name` where that is a module of the package, else on `pkg` itself (the name is defined there): so
`from ascend_backend.attention import fused_decode` is an edge to the submodule, not to the package's
`__init__` that re-exports from it.

Used by tests/unit/workbench/test_layers.py, tests/unit/ascend_backend/test_layers.py and
tests/unit/scripts/test_import_cycles.py.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path


def module_name(path: Path, root: Path) -> str:
    """'<root>/workbench/sweep/runner.py' -> 'workbench.sweep.runner'; a package's __init__ is the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: Path, root: Path) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(package.rglob("*.py"))}


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    base = parts[: len(parts) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def imported(node: ast.AST, module: str, is_package: bool, known: dict[str, Path] | None = None) -> list[str]:
    """The module names one AST node imports (empty for any other node).

    Without `known`, `from pkg import name` yields both `pkg` and `pkg.name` (the caller keeps what exists)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        prefix = _absolute(node, module, is_package)
        names = [f"{prefix}.{alias.name}" for alias in node.names]
        if known is None:
            return [prefix, *names]
        submodules = [name for name in names if name in known]
        return submodules if len(submodules) == len(names) else [prefix, *submodules]
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name == "import_module" and isinstance(node.args[0].value, str):
            return [node.args[0].value]
    return []


def import_graph(package: Path, root: Path) -> dict[str, set[str]]:
    """module -> the modules of `package` it imports (its root package, which holds nothing, left out)."""
    known = modules(package, root)
    top = package.name
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        targets: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            for name in imported(node, module, path.name == "__init__.py", known):
                if name.split(".")[0] != top:
                    continue
                while name not in known and "." in name:
                    name = name.rsplit(".", 1)[0]
                if name in known and name not in (module, top):
                    targets.add(name)
        graph[module] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def unit_graph(graph: dict[str, set[str]], unit_of: Callable[[str], str]) -> dict[str, set[str]]:
    """The graph between units (packages, or root modules) that `unit_of` names."""
    units: dict[str, set[str]] = defaultdict(set)
    for module, targets in graph.items():
        units[unit_of(module)] |= {unit_of(t) for t in targets} - {unit_of(module)}
    return dict(units)
