"""Every notebook in notebooks/ executes headless with papermill on its default parameters."""

from __future__ import annotations

import papermill
import pytest

from tests.conftest import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))

pytestmark = pytest.mark.notebooks


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ is empty"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path, monkeypatch):
    assert papermill.inspect_notebook(str(path)), f"{path.name} has no cell tagged 'parameters'"
    out = tmp_path / path.name
    monkeypatch.setenv("ASCEND_WORKBENCH_HEADLESS", "1")  # as `ascend-workbench run` executes them
    papermill.execute_notebook(str(path), str(out), kernel_name="python3", cwd=str(REPO_ROOT),
                               progress_bar=False, execution_timeout=900)
    import nbformat

    nb = nbformat.read(out, as_version=4)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_parameter_is_visible_to_papermill(path):
    """papermill silently drops a parameter whose line it cannot parse (e.g. '=' in its comment);
    then `ascend-workbench run -p NAME=VALUE` could not override it."""
    import ast

    import nbformat

    cell = next(c for c in nbformat.read(path, as_version=4).cells if "parameters" in c.metadata.get("tags", []))
    assigned = {t.id for node in ast.parse(cell.source).body if isinstance(node, ast.Assign) for t in node.targets}
    assert assigned == set(papermill.inspect_notebook(str(path)))
