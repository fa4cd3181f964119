"""The layers of `workbench/` (docs/ARCHITECTURE.md), enforced from the code's own imports.

Every import counts — at module level, inside a function (a lazy import is still a dependency) and under
TYPE_CHECKING — so a cycle cannot hide behind a deferred import. Four rules:

1. every package and root module of `workbench/` has a layer in LAYERS (a new one must be placed);
2. nothing imports a higher layer;
3. no cycle, between modules or between packages (the domains form a DAG among themselves);
4. the CLI verbs and the notebooks reach a domain only through its one API module (`<domain>.api`), its
   pure figures (`charts`) and its notebook panels (`widgets`): there is no second facade.
"""

from __future__ import annotations

import ast
import json
from collections import defaultdict
from pathlib import Path

from tests.conftest import REPO_ROOT

# Bottom up. A unit is a package of workbench/ or a root module; it may import its own layer and below.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("foundation", frozenset({"errors", "settings"})),
    ("results", frozenset({"results", "display"})),
    ("recipes", frozenset({"recipes"})),
    ("stack", frozenset({"stack"})),
    (
        "domains",
        frozenset(
            {
                "accuracy",
                "backend",
                "bisect",
                "deploy",
                "embedded_models",
                "envcheck",
                "evaluate",
                "lint",
                "profiling",
                "quantize",
                "regress",
                "run",
                "scan",
                "serving",
                "sweep",
                "triage",
                "twin",
            }
        ),
    ),
    ("interfaces", frozenset({"verbs", "cli", "cli_reference"})),
)
LAYER_OF = {unit: rank for rank, (_, units) in enumerate(LAYERS) for unit in units}
PACKAGE = REPO_ROOT / "workbench"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def unit_of(module: str) -> str:
    """'workbench.sweep.runner' -> 'sweep'; 'workbench.settings' -> 'settings'."""
    return module.split(".")[1] if module.count(".") >= 1 else ""


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    return [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]


def import_graph() -> dict[str, set[str]]:
    """module -> the workbench modules it imports (a `from pkg import name` counts `pkg.name` if a module)."""
    known = modules()
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            for name in _imported(node, module, path.name == "__init__.py"):
                if name.split(".")[0] != "workbench":
                    continue
                while name not in known and "." in name:
                    name = name.rsplit(".", 1)[0]
                if name in known and name not in (module, "workbench"):  # the root package holds nothing
                    targets.add(name)
        graph[module] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
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


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    units: dict[str, set[str]] = defaultdict(set)
    for module, targets in graph.items():
        units[unit_of(module)] |= {unit_of(t) for t in targets} - {unit_of(module)}
    return dict(units)


def test_every_package_and_root_module_has_a_layer():
    units = {unit_of(m) for m in modules()} - {""}
    assert sorted(units - LAYER_OF.keys()) == [], "place the new package in LAYERS (and docs/ARCHITECTURE.md)"


def test_nothing_imports_a_higher_layer():
    upward = [
        f"{module} -> {target}"
        for module, targets in import_graph().items()
        for target in targets
        if LAYER_OF.get(unit_of(target), -1) > LAYER_OF.get(unit_of(module), len(LAYERS))
    ]
    assert sorted(upward) == []


def test_no_import_cycle_between_modules():
    assert cycles(import_graph()) == []


def test_no_import_cycle_between_packages():
    assert cycles(package_graph(import_graph())) == []


def test_the_checker_sees_a_cycle_and_an_upward_import():
    """The rules above must be able to fail: a planted cycle and a planted upward edge are found."""
    graph = {"workbench.stack.a": {"workbench.sweep.b"}, "workbench.sweep.b": {"workbench.stack.a"}}
    assert cycles(graph) == [["workbench.stack.a", "workbench.sweep.b"]]
    assert cycles(package_graph(graph)) == [["stack", "sweep"]]
    assert LAYER_OF["sweep"] > LAYER_OF["stack"]


DOMAIN_FACES = frozenset({"api", "charts", "widgets"})


def _domain_reach(source: str, where: str) -> list[str]:
    """`where: module` for every import of a domain module that is not one of its faces."""
    domains = dict(LAYERS)["domains"]
    found = []
    for node in ast.walk(ast.parse(source)):
        for name in _imported(node, "", False):
            parts = name.split(".")
            if parts[0] == "workbench" and len(parts) >= 3 and parts[1] in domains and parts[2] not in DOMAIN_FACES:
                if name in modules():  # `from workbench.x.api import name` also yields `...api.name`
                    found.append(f"{where}: {name}")
    return found


def test_verbs_and_notebooks_reach_domains_through_their_api():
    found = []
    for path in sorted((PACKAGE / "verbs").glob("*.py")):
        found += _domain_reach(path.read_text(encoding="utf-8"), path.name)
    for path in sorted((REPO_ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        found += _domain_reach(code, path.name)
    assert found == [], "add what they need to the domain's api.py"


def test_the_api_rule_sees_a_facade_bypassed():
    code = "from workbench.sweep.spec import load_sweep_spec\nfrom workbench.sweep import api, charts"
    assert _domain_reach(code, "nb") == ["nb: workbench.sweep.spec"]


def test_the_architecture_page_names_every_layer_and_unit():
    """docs/ARCHITECTURE.md states these rules in words; it must name every layer and unit placed here."""
    page = (REPO_ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    missing = [unit for _, units in LAYERS for unit in sorted(units) if f"`{unit}`" not in page]
    assert missing == [], "describe the new package in docs/ARCHITECTURE.md's layer table"
