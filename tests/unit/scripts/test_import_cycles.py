"""No import cycle among the maintenance scripts (`scripts/`), between modules or between packages.

Every import counts, lazy ones included (tests/import_graph.py): `kernel_truth.probes` and `.linears`
once imported each other inside functions, which hid the circle from a module-level reading.
"""

from __future__ import annotations

from tests.conftest import REPO_ROOT
from tests.import_graph import cycles, import_graph, unit_graph

SCRIPTS = REPO_ROOT / "scripts"


def package_of(module: str) -> str:
    """'scripts.kernel_truth.trace' -> 'kernel_truth'; 'scripts.quant_capabilities' -> 'quant_capabilities'."""
    return module.split(".")[1] if module.count(".") >= 1 else ""


def test_no_import_cycle_between_script_modules():
    assert cycles(import_graph(SCRIPTS, REPO_ROOT)) == []


def test_no_import_cycle_between_script_packages():
    assert cycles(unit_graph(import_graph(SCRIPTS, REPO_ROOT), package_of)) == []


def test_a_circle_through_lazy_imports_is_found(tmp_path):
    """The check can fail: two modules importing each other inside functions form a cycle."""
    package = tmp_path / "scripts" / "tool"
    package.mkdir(parents=True)
    (tmp_path / "scripts" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "probes.py").write_text("def entries():\n    from scripts.tool.linears import linear_entries\n")
    (package / "linears.py").write_text("def linear_entries():\n    from scripts.tool.probes import entries\n")
    assert cycles(import_graph(tmp_path / "scripts", tmp_path)) == [["scripts.tool.linears", "scripts.tool.probes"]]
