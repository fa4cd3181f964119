"""One use case per task: the lint and triage verbs only translate flags into a request, notebook 02 calls
the same `run_lint`, and both results are typed documents (kinds "lint" and "triage")."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from tests.conftest import FIXTURES, REPO_ROOT


def _calls(tree: ast.AST) -> set[str]:
    return {
        node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
    }


def test_the_lint_verb_and_notebook_02_call_run_lint():
    verb = ast.parse((REPO_ROOT / "workbench" / "verbs" / "lint.py").read_text())
    assert {"LintRequest", "run_lint"} <= _calls(verb)
    assert not {"lint_source", "lint_upgrade", "write_fix", "lint_checkpoint"} & _calls(verb)
    cells = json.loads((REPO_ROOT / "notebooks" / "02_check.ipynb").read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert {"LintRequest", "run_lint"} <= _calls(ast.parse(code))


def test_the_triage_verb_calls_run_triage_and_writes_a_triage_document(tmp_path, capsys):
    verb = ast.parse((REPO_ROOT / "workbench" / "verbs" / "triage.py").read_text())
    assert {"TriageRequest", "run_triage"} <= _calls(verb)
    from workbench.cli import main
    from workbench.triage.api import TRIAGE_KIND

    out = tmp_path / "triage.json"
    log = FIXTURES / "triage" / "va1972_507034_ez9999_aivec_llama4.log"
    assert main(["triage", str(log), "--json", str(out)]) == 0
    document = TRIAGE_KIND.read(out)
    assert document["schema_version"] == 1 and document["first_error"]["code"] == "EZ9999"


def test_a_triage_request_names_what_it_refuses(tmp_path):
    import pytest

    from workbench.errors import WorkbenchError
    from workbench.triage.api import TriageRequest, run_triage

    with pytest.raises(WorkbenchError, match="give log files"):
        TriageRequest(paths=())
    with pytest.raises(WorkbenchError, match="--codes"):
        TriageRequest(paths=(tmp_path,), codes=tmp_path / "none.yaml")
    with pytest.raises(WorkbenchError, match="nothing to triage"):
        run_triage(TriageRequest(paths=(Path(tmp_path / "missing.log"),)))
