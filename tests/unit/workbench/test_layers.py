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
from pathlib import Path

from tests.conftest import REPO_ROOT
from tests.import_graph import cycles, imported, unit_graph
from tests.import_graph import import_graph as package_import_graph
from tests.import_graph import modules as graph_modules

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
                "cluster",
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
                "selftest",
                "serving",
                "sweep",
                "triage",
                "truth",
                "twin",
            }
        ),
    ),
    ("interfaces", frozenset({"verbs", "cli", "cli_reference"})),
)
LAYER_OF = {unit: rank for rank, (_, units) in enumerate(LAYERS) for unit in units}
PACKAGE = REPO_ROOT / "workbench"


def modules() -> dict[str, Path]:
    return graph_modules(PACKAGE, REPO_ROOT)


def unit_of(module: str) -> str:
    """'workbench.sweep.runner' -> 'sweep'; 'workbench.settings' -> 'settings'."""
    return module.split(".")[1] if module.count(".") >= 1 else ""


def import_graph() -> dict[str, set[str]]:
    """module -> the workbench modules it imports (every import counts: tests/import_graph.py)."""
    return package_import_graph(PACKAGE, REPO_ROOT)


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    return unit_graph(graph, unit_of)


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
        for name in imported(node, "", False):
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
