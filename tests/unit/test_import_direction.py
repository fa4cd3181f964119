"""ascend_backend must never import workbench (the data flow is one way)."""

from __future__ import annotations

import ast
import subprocess
import sys

from tests.conftest import REPO_ROOT


def test_no_workbench_import_in_backend_sources():
    offenders = []
    for path in (REPO_ROOT / "ascend_backend").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(REPO_ROOT)}: {n}" for n in names if n.split(".")[0] == "workbench"]
    assert offenders == []


def test_importing_the_backend_loads_no_workbench_module():
    code = (
        "import sys, ascend_backend, ascend_backend.ops; ascend_backend.registry.describe('cpu'); "
        "print([m for m in sys.modules if m.split('.')[0] == 'workbench'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    assert out.stdout.strip() == "[]"


def test_only_device_module_imports_torch_npu():
    importers = []
    for path in (REPO_ROOT / "ascend_backend").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "torch_npu" for a in node.names):
                importers.append(path.name)
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch_npu":
                importers.append(path.name)
    assert set(importers) <= {"device.py"}
