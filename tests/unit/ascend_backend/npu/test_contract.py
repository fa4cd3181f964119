"""Every NPU adapter call, for every kernel-table row, against op-plugin's declared interface.

For each row and each op-plugin branch its releases ship with (torch_npu -> branch, evidence in
data/op_plugin_schemas.json), the adapter runs with torch_npu replaced by a recording stand-in built
from that branch's schemas, on `meta` tensors (the NPU's stand-in device: real shapes and dtypes, no
data). The test checks what we pass: the functions the row names, in order, and nothing else, names, arity and
keyword-only arguments (binding fails otherwise), that the branch implements the function for the release's torch,
and the rules in `rules.py` (dtypes, devices, int32 host lengths, layouts, consistent sizes). Rows that
say native must be refused by the adapter's guard with the row's reason, and make no call.
"""

from __future__ import annotations

import pytest
import torch

import ascend_backend.npu.adapters.rotary as rotary_mod
import ascend_backend.platform.device as device_mod
from ascend_backend.platform.kernels import OVERRIDE_VAR, calls
from ascend_backend.platform.kinds import NpuStatus, NpuUnavailable
from ascend_backend.registry import REGISTRY, Backend
from tests.unit.ascend_backend.npu.cases import DEVICE, Case, all_cases_by_dtype, cases, inputs, torch_minor
from tests.unit.ascend_backend.npu.rules import problems
from tests.unit.ascend_backend.npu.schema import available, signatures
from tests.unit.ascend_backend.npu.stand_in import StandIn

AVAILABLE = NpuStatus(NpuUnavailable.AVAILABLE, "stand-in", "")
CASES = all_cases_by_dtype()


@pytest.fixture
def stand_in(monkeypatch):
    """Install a stand-in for a branch; the guard hands it to the adapters from ascend_backend.platform.device.torch_npu()."""

    def install(branch: str) -> StandIn:
        fake = StandIn(signatures(branch))
        module = fake.module
        monkeypatch.setattr(device_mod, "_load_torch_npu", lambda: (module, AVAILABLE))
        monkeypatch.setattr(device_mod, "atb_status", lambda: AVAILABLE)
        # The machine facts (CANN, device name) come from the override here, never from the stand-in.
        monkeypatch.setattr(device_mod, "cann_version", lambda: None)
        monkeypatch.setattr(device_mod, "npu_device_name", lambda: None)
        monkeypatch.setattr(rotary_mod, "ATB_ROPE_CACHE", rotary_mod.AtbRopeCache())
        return fake

    return install


def _run(case: Case, dtype: torch.dtype, stand_in, monkeypatch) -> tuple[StandIn, str | None]:
    fake = stand_in(case.branch)
    monkeypatch.setenv(OVERRIDE_VAR, case.override)
    entry = REGISTRY.entry(case.row.op)
    args = inputs(case.row.op, case.call, dtype)
    reason = entry.supports[Backend.NPU](*args)
    if reason is None:
        entry.impls[Backend.NPU](*args)
    return fake, reason


def test_every_row_is_reachable_and_has_cases():
    ids = {c.row.id for c in cases()}
    from ascend_backend.platform.kernels import kernel_table

    assert ids == {r.id for r in kernel_table()}


@pytest.mark.parametrize(("case", "dtype"), CASES, ids=[f"{c.id}-{str(d).split('.')[-1]}" for c, d in CASES])
def test_adapter_call_fits_the_declared_interface(case, dtype, stand_in, monkeypatch):
    if Backend.NPU not in REGISTRY.entry(case.row.op).impls:
        assert case.row.recipe == "native", f"{case.row.op} has no NPU adapter but row {case.row.id} names a kernel"
        return
    if dict(case.row.when).get("sliding_window"):
        # The ops take no sliding window (ascend_backend.attention.ops): such a row tells describe() and
        # `kernels --diff` what vllm-ascend does for those layers; no adapter call can reach it.
        assert case.row.recipe == "native"
        return
    fake, reason = _run(case, dtype, stand_in, monkeypatch)
    if case.row.recipe == "native":
        assert reason is not None and case.row.id in reason
        assert fake.calls == []
        return
    assert reason is None, reason
    assert [c.function for c in fake.calls] == list(calls(case.row.kernel))
    for call in fake.calls:
        assert available(case.branch, call.function, torch_minor(case.torch_npu))
        assert problems(call, DEVICE) == []


def test_float32_is_refused_before_any_kernel(stand_in, monkeypatch):
    decode = next(c for c in cases() if c.row.id == "decode.pa")
    fake = stand_in(decode.branch)
    monkeypatch.setenv(OVERRIDE_VAR, decode.override)
    args = inputs("paged_decode_attention", decode.call, torch.float32)
    reason = REGISTRY.entry("paged_decode_attention").supports[Backend.NPU](*args)
    assert "float32" in reason and fake.calls == []


@pytest.mark.parametrize("op", ["w8a8_linear", "w8a8_dynamic_linear"])
def test_float32_w8a8_activations_are_refused_before_any_kernel(op, stand_in, monkeypatch):
    # npu_quant_matmul writes float16/bfloat16 (or int8), never float32: the native integer path serves.
    case = next(c for c in cases() if c.row.op == op and c.row.recipe in ("quantize_reciprocal", "dynamic_quant"))
    fake = stand_in(case.branch)
    monkeypatch.setenv(OVERRIDE_VAR, case.override)
    reason = REGISTRY.entry(op).supports[Backend.NPU](*inputs(op, case.call, torch.float32))
    assert "torch.float32 x" in reason and fake.calls == []


def test_a_kwarg_the_branch_does_not_declare_fails_binding(stand_in, monkeypatch):
    # The check has teeth: cache_mode exists from op-plugin 26.0.0 on; against 7.3.0 (torch_npu 2.9.0)
    # the Norm recipe must fail, which is why the table keeps A5 on the plain recipe until v0.20.2rc1.
    case = next(c for c in cases() if c.row.id == "cache_write.a5_scatter_norm")
    stand_in("7.3.0")
    monkeypatch.setenv(OVERRIDE_VAR, case.override)
    with pytest.raises(TypeError, match="cache_mode"):
        REGISTRY.entry("reshape_and_cache").impls[Backend.NPU](*inputs("reshape_and_cache", case.call, torch.float16))


def test_atb_workspace_kwarg_is_not_passed_to_old_branches(stand_in, monkeypatch):
    # _npu_paged_attention's `workspace` appears in op-plugin 7.2.0; the eager decode never passes it.
    case = next(c for c in cases() if c.row.id == "decode.pa" and c.branch == "7.0.0")
    fake, _ = _run(case, torch.float16, stand_in, monkeypatch)
    assert "workspace" not in fake.calls[0].arguments
