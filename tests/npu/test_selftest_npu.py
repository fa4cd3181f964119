"""`selftest --npu` on a real Ascend NPU: every recipe this release and chip select runs and matches float32.

The other chips' recipes run too (through the override) and are reported, not asserted: whether this
hardware executes them is what the report is for.
"""

from __future__ import annotations

import pytest

from workbench.selftest.api import SelftestRequest, run_selftest
from workbench.selftest.report import KernelStatus

pytestmark = pytest.mark.npu


def test_this_chips_recipes_run_and_match_float32(tmp_path):
    report = run_selftest(SelftestRequest(npu=True, native=False))
    own = [r for r in report.kernels if not r.item.other_chip]
    assert own, "no recipe planned for this release and chip"
    errors = [f"{r.item.key}: {r.reason}" for r in own if r.status is KernelStatus.ERROR]
    assert errors == []
    for run in own:
        if run.status is KernelStatus.NATIVE:  # the guard's documented limit or the table, with its reason
            assert run.reason, run.item.key
    print(report.text())
    report.write(tmp_path / "selftest.json", {"created_at": "test"})
