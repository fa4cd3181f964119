"""Every notebook in notebooks/ executes headless on its default parameters, through the main job's runner."""

from __future__ import annotations

import papermill
import pytest

from tests.conftest import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))

pytestmark = pytest.mark.notebooks


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ is empty"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, notebook_run):
    assert papermill.inspect_notebook(str(path)), f"{path.name} has no cell tagged 'parameters'"
    outcome = {o.notebook: o for o in notebook_run.outcomes}[path.name]
    assert outcome.ok, f"{path.name} failed at cell {outcome.failed_cell}: {outcome.error}"
    assert outcome.html and (notebook_run.run_dir / outcome.html).is_file()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_parameter_is_visible_to_papermill(path):
    """papermill silently drops a parameter whose line it cannot parse (e.g. '=' in its comment);
    then `ascend-workbench run -p NAME=VALUE` could not override it."""
    import ast

    import nbformat

    cell = next(c for c in nbformat.read(path, as_version=4).cells if "parameters" in c.metadata.get("tags", []))
    assigned = {t.id for node in ast.parse(cell.source).body if isinstance(node, ast.Assign) for t in node.targets}
    assert assigned == set(papermill.inspect_notebook(str(path)))
