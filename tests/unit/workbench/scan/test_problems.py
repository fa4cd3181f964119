"""Files the scan cannot (fully) read are reported as problems, and the scan goes on with the rest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT
from workbench.scan.findings import ProblemKind
from workbench.scan.runner import ScanOptions, scan

GOOD = "import torch\ntorch.cuda.synchronize()\n"


def _tree(tmp_path, files: dict[str, str | bytes]):
    for name, content in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return tmp_path


def _kinds(report) -> dict[str, ProblemKind]:
    return {os.path.basename(p.path): p.kind for p in report.problems}


def test_syntax_error_is_reported_with_its_line_and_the_scan_goes_on(tmp_path):
    root = _tree(tmp_path, {"broken.py": "def f(:\n    pass\n", "good.py": GOOD})
    report = scan([root], ScanOptions(jobs=1))
    [problem] = report.problems
    assert (os.path.basename(problem.path), problem.kind, problem.line) == ("broken.py", ProblemKind.SYNTAX_ERROR, 1)
    assert [(os.path.basename(f.file), f.rule) for f in report.findings] == [("good.py", "torch_cuda.api")]
    assert report.files_scanned == 1


def test_python_2_file_is_a_syntax_error_not_a_crash(tmp_path):
    report = scan([_tree(tmp_path, {"legacy.py": 'print "on cuda"\n'})], ScanOptions(jobs=1))
    assert _kinds(report) == {"legacy.py": ProblemKind.SYNTAX_ERROR}


def test_binary_content_in_a_text_kind_is_reported_not_scanned(tmp_path):
    root = _tree(
        tmp_path,
        {"model.py": b"\x00\x01CUDA_VISIBLE_DEVICES\x00", "run.sh": b"export X=1\x00\xff", "ok.sh": "nvidia-smi\n"},
    )
    report = scan([root], ScanOptions(jobs=1))
    assert _kinds(report) == {"model.py": ProblemKind.BINARY, "run.sh": ProblemKind.BINARY}
    assert [(os.path.basename(f.file), f.rule) for f in report.findings] == [("ok.sh", "tool.nvidia_smi")]


def test_undecodable_text_is_reported_and_still_scanned(tmp_path):
    root = _tree(
        tmp_path,
        {"launch.sh": b"# caf\xe9 \xff\nexport CUDA_VISIBLE_DEVICES=0\n", "m.py": b"x = '\xff'\nimport pynvml\n"},
    )
    report = scan([root], ScanOptions(jobs=1))
    assert _kinds(report) == {"launch.sh": ProblemKind.UNDECODABLE, "m.py": ProblemKind.UNDECODABLE}
    assert {(os.path.basename(f.file), f.line, f.rule) for f in report.findings} == {
        ("launch.sh", 2, "env.cuda_visible_devices"),
        ("m.py", 2, "lib.nvml"),
    }


def test_latin1_python_with_a_coding_cookie_is_not_a_problem(tmp_path):
    source = "# -*- coding: latin-1 -*-\nNAME = 'caf\xe9'\nimport xformers\n".encode("latin-1")
    report = scan([_tree(tmp_path, {"m.py": source})], ScanOptions(jobs=1))
    assert report.problems == ()
    assert [f.rule for f in report.findings] == ["lib.xformers"]


def _scan_where_permissions_hold(root) -> tuple[dict[str, str], list[str]]:
    """({file name: problem kind}, [finding rules]) of scanning `root` where chmod 000 really denies reads.

    As a normal user that is this process. As root (CAP_DAC_OVERRIDE reads anything) the scan runs in a
    child process started by `setpriv` without the DAC capabilities, so the denial is real there too.
    """
    if os.geteuid() != 0:
        report = scan([root], ScanOptions(jobs=1))
        return {k: v.value for k, v in _kinds(report).items()}, [f.rule for f in report.findings]
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot make a file unreadable to the scan")
    out = root.parent / f"{root.name}-scan.json"
    command = [setpriv, "--bounding-set", "-dac_override,-dac_read_search", sys.executable, "-m", "workbench.cli",
               "scan", str(root), "--jobs", "1", "--no-progress", "--json", str(out)]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, cwd=REPO_ROOT, timeout=120)
    payload = json.loads(out.read_text())
    problems = {os.path.basename(p["path"]): p["kind"] for p in payload["problems"]}
    return problems, [f["rule"] for f in payload["findings"]]


def test_unreadable_file_is_reported_and_the_scan_goes_on(tmp_path):
    root = _tree(tmp_path / "service", {"secret.py": GOOD, "good.sh": "nvidia-smi\n"})
    (root / "secret.py").chmod(0)
    try:
        problems, rules = _scan_where_permissions_hold(root)
    finally:
        (root / "secret.py").chmod(0o644)
    assert problems == {"secret.py": "unreadable"}
    assert rules == ["tool.nvidia_smi"]


def test_unlistable_directory_is_reported(tmp_path):
    root = _tree(tmp_path / "service", {"locked/m.py": GOOD, "open/m.py": GOOD})
    (root / "locked").chmod(0)
    try:
        problems, rules = _scan_where_permissions_hold(root)
    finally:
        (root / "locked").chmod(0o755)
    assert problems == {"locked": "unreadable"}
    assert rules == ["torch_cuda.api"]


def test_too_large_text_file_is_reported_not_read(tmp_path):
    root = _tree(tmp_path, {"big.yaml": "x: 1\n" * 300_000 + "CUDA_VISIBLE_DEVICES: 0\n", "small.sh": "nvidia-smi\n"})
    report = scan([root], ScanOptions(jobs=1, max_file_mib=1.0))
    assert _kinds(report) == {"big.yaml": ProblemKind.TOO_LARGE}
    assert [f.rule for f in report.findings] == ["tool.nvidia_smi"]
    assert scan([root], ScanOptions(jobs=1, max_file_mib=5.0)).problems == ()


def test_deeply_nested_python_is_malformed_not_a_crash(tmp_path):
    root = _tree(tmp_path, {"deep.py": "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n", "ok.sh": "nvidia-smi\n"})
    report = scan([root], ScanOptions(jobs=1))
    assert _kinds(report)["deep.py"] in (ProblemKind.MALFORMED, ProblemKind.SYNTAX_ERROR)
    assert [f.rule for f in report.findings] == ["tool.nvidia_smi"]


def test_a_rule_that_raises_is_an_internal_error_problem(tmp_path, monkeypatch):
    from workbench.scan import file_scan

    def broken(*args, **kwargs):
        raise ValueError("boom")

    monkeypatch.setattr(file_scan, "text_hits", broken)
    report = scan([_tree(tmp_path, {"run.sh": "nvidia-smi\n", "m.py": GOOD})], ScanOptions(jobs=1))
    assert _kinds(report) == {"run.sh": ProblemKind.INTERNAL_ERROR}
    assert "ValueError: boom" in report.problems[0].message
    assert [f.rule for f in report.findings] == ["torch_cuda.api"]


def test_notebook_cells_and_magics_are_scanned(tmp_path):
    import json

    notebook = {
        "cells": [
            {"cell_type": "markdown", "source": ["import flash_attn  (prose, not code)"]},
            {"cell_type": "code", "source": ["!nvidia-smi\n", "import torch\n", "x = torch.ones(2).cuda()\n"]},
            {"cell_type": "code", "source": "import xformers\n"},
        ]
    }
    report = scan([_tree(tmp_path, {"explore.ipynb": json.dumps(notebook)})], ScanOptions(jobs=1))
    assert report.problems == ()
    assert [(f.line, f.rule, f.detail.split(";")[0]) for f in report.findings] == [
        (1, "lib.xformers", "cell 2"),
        (1, "tool.nvidia_smi", "cell 1"),
        (3, "tensor.cuda_method", "cell 1"),
    ]
