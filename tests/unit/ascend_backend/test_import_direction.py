"""ascend_backend must never import workbench (the data flow is one way); torch_npu enters through one door."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

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


BACKEND = REPO_ROOT / "ascend_backend"
PROBE = BACKEND / "platform" / "device.py"  # the device probe: the one import of torch_npu
GUARD = BACKEND / "npu" / "guard.py"  # the guard factory: the one place that takes torch_npu from the probe
ADAPTERS = BACKEND / "npu" / "adapters"
TORCH_NPU_CALL = re.compile(r"^_?npu_")  # torch_npu's kernels: npu_rms_norm, _npu_paged_attention, ...


def backend_modules() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(), filename=str(path))) for path in sorted(BACKEND.rglob("*.py"))]


def _imports_torch_npu(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] == "torch_npu" for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == "torch_npu"
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        return name in {"import_module", "__import__"} and str(node.args[0].value).split(".")[0] == "torch_npu"
    return False


def test_only_the_npu_probe_imports_torch_npu():
    importers = {path for path, tree in backend_modules() for node in ast.walk(tree) if _imports_torch_npu(node)}
    assert importers == {PROBE}


def _probe_aliases(tree: ast.Module) -> set[str]:
    """Names a module binds to the probe (`from ascend_backend.platform import device`, `import ... as d`)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "ascend_backend.platform":
            names |= {a.asname or a.name for a in node.names if a.name == "device"}
        if isinstance(node, ast.Import):
            names |= {a.asname for a in node.names if a.name == "ascend_backend.platform.device" and a.asname}
    return names


def test_only_the_guard_factory_takes_torch_npu_from_the_probe():
    takers = set()
    for path, tree in backend_modules():
        aliases = _probe_aliases(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "ascend_backend.platform.device":
                takers |= {path for a in node.names if a.name == "torch_npu"}
            if isinstance(node, ast.Attribute) and node.attr == "torch_npu" and isinstance(node.value, ast.Name):
                takers |= {path} if node.value.id in aliases else set()
    assert takers == {GUARD}


def _imported_names(tree: ast.Module) -> set[str]:
    return {
        alias.asname or alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }


def test_every_torch_npu_call_goes_through_the_guard_factory():
    """Every `npu_*` / `_npu_*` call is made on the `npu` a recipe receives from the guard (its first parameter),
    in an adapter module; calls on an imported module (`device.npu_status()`) are the probe's own functions."""
    offenders = []
    for path, tree in backend_modules():
        imported = _imported_names(tree)
        for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            params = [a.arg for a in function.args.args]
            for node in ast.walk(function):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                if not TORCH_NPU_CALL.match(node.func.attr):
                    continue
                receiver = node.func.value
                if isinstance(receiver, ast.Name) and receiver.id in imported:
                    continue
                handed = isinstance(receiver, ast.Name) and receiver.id == "npu" and params[:1] == ["npu"]
                if not (handed and path.is_relative_to(ADAPTERS)):
                    offenders.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} {ast.unparse(node.func)}")
    assert offenders == []


def test_the_npu_runtime_is_touched_only_by_the_probe():
    # torch.npu (device queries) and torch.ops.atb (the ATB kernels' registration) exist once torch_npu is
    # imported; only the probe that imported it asks them anything.
    users = set()
    for path, tree in backend_modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in {"npu", "atb"}:
                base = node.value
                if (isinstance(base, ast.Name) and base.id == "torch") or (
                    isinstance(base, ast.Attribute) and base.attr == "ops"
                ):
                    users.add(path)
    assert users == {PROBE}
