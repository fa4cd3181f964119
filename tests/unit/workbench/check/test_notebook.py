"""notebooks/02_check.ipynb: its parameters are the context's inputs and they take effect."""

from __future__ import annotations

import inspect

import papermill
import pytest

from tests.conftest import REPO_ROOT
from tests.unit.workbench.check.fakes import build_ascend_tree
from workbench.check.context import CheckContext

NOTEBOOK = REPO_ROOT / "notebooks" / "02_check.ipynb"


def test_parameters_map_onto_check_context():
    params = set(papermill.inspect_notebook(str(NOTEBOOK)))
    fields = set(inspect.signature(CheckContext).parameters) | {"matrix_files", "ascend_root"}
    assert params - {"focus_module", "lint_source", "lint_release", "lint_to"} <= fields
    assert {"ascend_root", "run_probe", "server_url"} <= params


@pytest.mark.notebooks
def test_runs_against_a_fake_ascend_root(tmp_path):
    import nbformat

    tree = build_ascend_tree(tmp_path / "Ascend")
    out = tmp_path / "out.ipynb"
    papermill.execute_notebook(
        str(NOTEBOOK),
        str(out),
        kernel_name="python3",
        cwd=str(REPO_ROOT),
        parameters={"ascend_root": str(tree.root), "focus_module": "GE"},
        progress_bar=False,
    )
    nb = nbformat.read(out, as_version=4)
    texts = [
        o.get("data", {}).get("text/html", "") + o.get("data", {}).get("text/plain", "")
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
    ]
    joined = "\n".join(texts)
    assert "driver installed at" in joined  # the fake tree's driver makes it an Ascend machine
    assert "GE=0" in joined
