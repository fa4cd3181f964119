"""The NPU tests' worker (tests/npu/worker.py) run on the CPU: the harness itself must be right where it can
be checked. On the CPU every op is served natively, so the counts say native and the errors are those of
native float16/bfloat16 against float32; on an NPU the same harness proves the kernel ran."""

from __future__ import annotations

import pytest

from tests.npu.runs import worker

pytestmark = pytest.mark.slow  # three fresh processes, each importing torch


@pytest.mark.parametrize("group", ["attention", "tokens", "rotary"])
def test_worker_runs_every_case_and_reports_counts_errors_and_untouched_inputs(group, monkeypatch):
    monkeypatch.setenv("ASCEND_BACKEND_FUSED_DECODE", "off")  # no Inductor compile: the harness is under test
    results = worker("release=0.18.0,chip=A2", "bfloat16", group, "64", "cpu")
    assert results
    for r in results:
        assert r["counts"] == {"native": 1}, r
        assert r["torch_npu_calls"] == {} and r["unchanged"], r
        assert r["max_abs_err"] < 0.1, r
        assert r["row"] is not None  # the table row the NPU would use is named even here
