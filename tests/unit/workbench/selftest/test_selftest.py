"""`selftest`: the plan of recipes, the runner against float32, the report, and the verb, on this CPU machine.

On a machine without an NPU the kernels are listed with the reason they need hardware, every op's native
path runs against the float32 reference, and the report is one `selftest` document. The runner itself is
exercised for real on the CPU (a pinned recipe, the registry's counters, the op suite's metrics): there the
registry serves the native path, which the report must say.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from packaging.version import Version

from ascend_backend.platform import kernels
from ascend_backend.platform.kernels import ChipFamily, SelectionContext
from ascend_backend.platform.kernels.context import apply_override
from workbench.cli import main
from workbench.errors import WorkbenchError
from workbench.selftest.api import SelftestRequest, read_selftest, run_selftest
from workbench.selftest.plan import plan_items
from workbench.selftest.report import KernelRun, KernelStatus
from workbench.selftest.run import error_code, run_item


def context(release: str, chip: ChipFamily = ChipFamily.A2) -> SelectionContext:
    base = SelectionContext(Version(release), "test", (), chip, chip.value, None)
    return replace(base, release=Version(release))


def test_the_plan_names_every_recipe_the_release_and_chip_select_and_the_other_chips():
    items = plan_items(context("0.11.0"))
    keys = {(i.op, i.recipe, i.other_chip) for i in items}
    assert ("paged_decode_attention", "atb_paged_attention", False) in keys
    assert ("prefill_cache_hit_attention", "atb_flash_attention_qlens", False) in keys
    assert ("add_rms_norm", "add_then_npu_rms_norm", True) in keys  # 310P's split norm, through the override
    assert all(i.recipe != "native" for i in items)


def test_each_item_override_selects_its_recipe():
    ctx = context("0.18.0")
    for item in plan_items(ctx):
        pinned = apply_override(ctx, tuple(tuple(p.split("=", 1)) for p in item.override(ctx).split(",")))
        assert kernels.select(item.op, pinned).recipe == item.recipe, item.key


def test_the_runner_on_the_cpu_reports_the_native_path_it_really_took():
    # On the CPU the registry serves native whatever is pinned: the counters say so and the status follows.
    item = next(i for i in plan_items(context("0.18.0"), ops=("rms_norm",)))
    runs = run_item(item, context("0.18.0"), torch.device("cpu"), (torch.bfloat16,))
    assert runs[0].backend == "native" and runs[0].verdict in ("pass", "warning") and runs[0].seconds > 0
    assert KernelRun.of(item, runs).status is KernelStatus.NATIVE


def test_cann_error_codes_are_read_from_the_kernel_error():
    # vllm-ascend #7443 (the float16 scale): what aclnn raises through torch_npu
    text = (
        "RuntimeError: npu_quant_matmul_symint: NPU function error: call aclnnQuantMatmulWeightNz failed, "
        "error code is 161002\nAclNN_Parameter_Error(EZ1001): Tensor scale not implemented for DT_FLOAT16"
    )
    assert error_code(text) == "161002" and error_code("[ERROR] EZ1001: bad") == "EZ1001"
    assert error_code("nothing here") is None


def test_a_cpu_selftest_lists_what_needs_hardware_and_checks_the_native_paths(tmp_path):
    report = run_selftest(SelftestRequest(npu=True, ops=("rms_norm", "rotary_embedding")))
    assert report.kernels and all(r.status is KernelStatus.SKIPPED for r in report.kernels)
    assert all("needs an Ascend NPU" in r.reason for r in report.kernels)
    assert {r.item.op for r in report.native} == {"rms_norm", "rotary_embedding"}
    assert all(r.status is KernelStatus.RAN for r in report.native) and not report.failed
    assert report.serve.status is KernelStatus.SKIPPED and report.needs_hardware
    path = report.write(tmp_path / "selftest.json", {"created_at": "now"})
    stored = read_selftest(path)
    assert stored["counts"]["skipped"] == len(report.kernels) and stored["limits"]["limits"] > 0
    assert "needs hardware" in report.text()


def test_requests_are_checked_where_they_are_made():
    with pytest.raises(WorkbenchError, match="--op"):
        SelftestRequest(ops=("no_such_op",))
    with pytest.raises(WorkbenchError, match="--dtype"):
        SelftestRequest(dtypes=("float32",))
    with pytest.raises(WorkbenchError, match="--serve"):
        SelftestRequest(serve=True)


def test_the_verb_writes_the_report(tmp_path, capsys):
    out = tmp_path / "report.json"
    assert main(["selftest", "--npu", "--op", "silu_and_mul", "--dtype", "bfloat16", "--json", str(out)]) == 0
    assert "needs hardware" in capsys.readouterr().out
    assert json.loads(out.read_text())["kind"] == "selftest"
