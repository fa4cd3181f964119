"""The op suite: recipe validation, verdicts on CPU, injected faults caught, standalone repro scripts."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from ascend_backend.registry import REGISTRY
from workbench.accuracy import opsuite
from workbench.errors import WorkbenchError


def test_every_registry_op_with_a_builder_is_in_the_recipes():
    covered = {c.op for c in opsuite.load_cases()}
    from workbench.accuracy.op_inputs import BUILDERS

    assert set(BUILDERS) <= covered
    assert covered <= set(REGISTRY.ops())


def test_float32_on_cpu_passes_and_lower_precision_is_not_an_error():
    suite = opsuite.run_suite(opsuite.load_cases(), "cpu", progress=False)
    table = suite.table()
    assert set(table.loc[table["dtype"] == "float32", "verdict"]) == {"pass"}
    assert "error" not in set(table["verdict"])  # native fp16/bf16 rounding is at most a warning
    assert suite.counts()["pass"] > 0


def test_an_injected_scale_fault_is_an_error():
    cases = opsuite.load_cases(ops=["silu_and_mul"])
    with REGISTRY.inject("silu_and_mul", fault="scale", factor=1.05):
        suite = opsuite.run_suite(cases, "cpu", progress=False)
    assert {r.verdict.value for r in suite.results} == {"error"}


def test_an_injected_nan_is_counted_and_an_error():
    cases = [c for c in opsuite.load_cases(ops=["rms_norm"]) if str(c.dtype) == "torch.float32"]
    with REGISTRY.inject("rms_norm", fault="nan", call=1):
        result = opsuite.run_case(cases[0], __import__("torch").device("cpu"))
    assert result.verdict.value == "error" and result.row()["nan_count"] > 0


def test_a_kernel_that_raises_is_a_finding(monkeypatch):
    case = opsuite.load_cases(ops=["gelu"])[0]

    def broken(*args, **kwargs):
        raise RuntimeError("aclnnGelu failed, error code 561103")

    monkeypatch.setattr(REGISTRY, "dispatch", broken)
    result = opsuite.run_case(case, __import__("torch").device("cpu"))
    assert result.verdict.value == "error" and "561103" in result.row()["reason"]


def test_repro_script_is_standalone_and_runs(tmp_path):
    with REGISTRY.inject("gelu", fault="scale", factor=1.2):
        suite = opsuite.run_suite(opsuite.load_cases(ops=["gelu"]), "cpu", progress=False)
    failure = suite.failures()[0]
    script = opsuite.export_repro(failure, tmp_path)
    imported = {
        (n.module if isinstance(n, ast.ImportFrom) else a.name).split(".")[0]
        for n in ast.walk(ast.parse(script.read_text()))
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in (n.names if isinstance(n, ast.Import) else [n])
    }
    assert "workbench" not in imported and "ascend_backend" in imported
    out = subprocess.run([sys.executable, str(script), "--device", "cpu"], capture_output=True, text=True, check=True)
    # Outside the injection the op is healthy again: the script shows near-perfect agreement.
    assert "cosine=1.0000" in out.stdout or "cosine=0.9999" in out.stdout


@pytest.mark.parametrize(
    "text,message",
    [
        ("ops: {rms_norm: {cases: [{tokens: 2, hidden: 8}]}}\nextra: 1", "extra"),
        ("ops: {rms_norrm: {cases: [{tokens: 2, hidden: 8}]}}", "unknown op"),
        ("ops: {rms_norm: {cases: [{tokens: 2}]}}", "missing sizes"),
        ("ops: {rms_norm: {cases: [{tokens: 2, hidden: 8}], dtypes: [float17]}}", "unknown dtype"),
        ("ops: {rms_norm: {cases: []}}", "cases"),
        ("ops: [", "not valid YAML"),
    ],
)
def test_bad_recipes_name_the_file_and_the_field(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(WorkbenchError, match=message) as info:
        opsuite.load_cases([path])
    assert str(path) in str(info.value)


def test_unknown_op_filter_lists_registry_ops():
    with pytest.raises(WorkbenchError, match="registry ops"):
        opsuite.load_cases(ops=["rms_norml"])


def test_cli_compare_ops(tmp_path, capsys):
    from workbench.cli import main

    out = tmp_path / "ops.json"
    assert main(["compare-ops", "--device", "cpu", "--op", "linear", "--json", str(out)]) == 0
    import json

    report = json.loads(out.read_text())
    assert report["provenance"]["stack"]["versions"]["torch"]
    rows = report["rows"]
    assert {r["dtype"] for r in rows} == {"float16", "bfloat16", "float32"}
    assert main(["compare-ops", "--device", "npu:0"]) == (
        0 if __import__("ascend_backend").device.npu_status().available else 2
    )


def test_the_compare_ops_use_case_exports_the_requested_repros(tmp_path):
    """Failures only for the verb (none here: native on CPU passes), the worst case for the notebook."""
    from workbench.accuracy.api import CompareOpsRequest, ReproExport, run_compare_ops
    from workbench.errors import WorkbenchError

    failures = run_compare_ops(
        CompareOpsRequest("cpu", ("rms_norm",), repros=ReproExport.FAILURES, repro_dir=tmp_path), progress=False
    )
    assert failures.suite.results and not failures.failures and failures.repros == ()
    worst = run_compare_ops(CompareOpsRequest("cpu", ("rms_norm",), repros="worst", repro_dir=tmp_path), progress=False)
    (script,) = worst.repros
    assert script.parent == tmp_path and script.with_suffix(".pt").is_file()
    with pytest.raises(WorkbenchError, match="repros='all': choose none, failures, worst"):
        CompareOpsRequest(repros="all")
