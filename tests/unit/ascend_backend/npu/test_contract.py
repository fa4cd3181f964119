"""Every NPU adapter call, for every kernel-table row and release, against the torch_npu wheel that release pins.

For each row, every release it covers and every op-plugin commit the release's pinned torch_npu wheel may
have been built from (`schema.wheel_commits`: the release tag's submodule, every pointer of a dev wheel's
branch on its day), the adapter runs with torch_npu replaced by a recording stand-in built from that
commit's schemas, on `meta` tensors (the NPU's stand-in device: real shapes and dtypes, no data), with the
inputs the real modules pass (a float16 model's float16 scales). The test checks what we pass: the
functions the row names, in order, and nothing else; names, arity and keyword-only arguments (binding fails
otherwise); that the commit implements the function for the release's torch; and the rules in `rules.py`
(the kernels' dtype tables, devices, int32 host lengths, layouts, the cache layout a write really gets).
Rows that say native must be refused by the adapter's guard with the row's reason, and make no call.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import ascend_backend.npu.adapters.rotary as rotary_mod
import ascend_backend.platform.device as device_mod
from ascend_backend.npu.adapters import w8a8
from ascend_backend.platform.kernels import OVERRIDE_VAR, calls, kernel_table
from ascend_backend.platform.kinds import NpuStatus, NpuUnavailable
from ascend_backend.platform.limits import violation
from ascend_backend.registry import REGISTRY, Backend
from tests.unit.ascend_backend.npu.cases import DEVICE, Case, all_cases_by_dtype, cases, inputs, torch_minor
from tests.unit.ascend_backend.npu.rules import problems
from tests.unit.ascend_backend.npu.schema import available, signatures, wheel_commits
from tests.unit.ascend_backend.npu.stand_in import StandIn

AVAILABLE = NpuStatus(NpuUnavailable.AVAILABLE, "stand-in", "")
CASES = all_cases_by_dtype()


@pytest.fixture
def stand_in(monkeypatch):
    """Install a stand-in for an op-plugin commit; the guard hands it to the adapters from device.torch_npu()."""

    def install(commit: str) -> StandIn:
        fake = StandIn(signatures(commit))
        module = fake.module
        monkeypatch.setattr(device_mod, "_load_torch_npu", lambda: (module, AVAILABLE))
        monkeypatch.setattr(device_mod, "atb_status", lambda: AVAILABLE)
        # The machine facts (CANN, device name) come from the override here, never from the stand-in.
        monkeypatch.setattr(device_mod, "cann_version", lambda: None)
        monkeypatch.setattr(device_mod, "npu_device_name", lambda: None)
        monkeypatch.setattr(rotary_mod, "ATB_ROPE_CACHE", rotary_mod.AtbRopeCache())
        return fake

    return install


def _run(case: Case, dtype: torch.dtype, stand_in, monkeypatch, adapter=None) -> tuple[StandIn, str | None]:
    fake = stand_in(case.commit)
    monkeypatch.setenv(OVERRIDE_VAR, case.override)
    entry = REGISTRY.entry(case.row.op)
    args = inputs(case.row.op, case.call, dtype)
    reason = entry.supports[Backend.NPU](*args)
    if reason is None:
        (adapter or entry.impls[Backend.NPU])(*args)
    return fake, reason


def _violations(case: Case, fake: StandIn) -> list[str]:
    found = [f"{c.function} not implemented for {case.torch_npu}" for c in fake.calls if not _available(case, c)]
    for call in fake.calls:
        found += problems(call, DEVICE, case.context.chip, case.commit)
    return found


def _available(case: Case, call) -> bool:
    return available(case.commit, call.function, torch_minor(case.torch_npu))


def test_every_row_is_reachable_and_has_cases():
    assert {c.row.id for c in cases()} == {r.id for r in kernel_table()}


def test_every_release_a_row_covers_is_checked_against_every_candidate_wheel():
    # The old contract read one case per op-plugin branch head; now every (release, commit) a row is the
    # first match at appears in some case: rows at v0.10.0rc1-v0.11.0rc0 meet 2.7.1.dev20250724's commits.
    seen = {(c.row.id, str(r), commit) for c in cases() for r in c.releases for commit in c.commits}
    fused = {(r, commit) for row, r, commit in seen if row == "norm_quant.qwen3_v010"}
    assert {r for r, _ in fused} == {"0.10.0rc1", "0.10.1rc1", "0.10.2rc1"}
    assert {commit for _, commit in fused} == set(wheel_commits("2.7.1.dev20250724"))


@pytest.mark.parametrize(("case", "dtype"), CASES, ids=[f"{c.id}-{str(d).split('.')[-1]}" for c, d in CASES])
def test_adapter_call_fits_the_pinned_wheel(case, dtype, stand_in, monkeypatch):
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
    if reason is not None:
        # A documented kernel limit this call breaks on the row's chip (kernel_limits.json; vllm-ascend makes the
        # call anyway, a departure the file records): the guard's reason is exactly that limit, and no call is made.
        assert reason == _limit_reason(case, dtype) and fake.calls == [], reason
        return
    assert [c.function for c in fake.calls] == list(calls(case.row.kernel))
    assert _violations(case, fake) == []


def _limit_reason(case: Case, dtype: torch.dtype) -> str | None:
    adapter = REGISTRY.entry(case.row.op).impls[Backend.NPU]
    shape = adapter.shape(*inputs(case.row.op, case.call, dtype)) if adapter.shape else None
    return None if shape is None else violation(calls(case.row.kernel), shape, case.context.chip)


def _case(row_id: str, torch_npu: str | None = None) -> Case:
    return next(c for c in cases() if c.row.id == row_id and (torch_npu is None or c.torch_npu == torch_npu))


def test_a_reintroduced_beta_fails_on_the_v010_wheel(stand_in, monkeypatch):
    """The check has teeth: the fused norm-quant with beta=None, as it was, cannot bind to 2.7.1.dev20250724."""
    case = _case("norm_quant.qwen3_v010")
    original = w8a8._npu_add_rms_norm_quant

    def with_beta(npu, x, residual, weight, eps, input_scale, input_offset):
        planted = type("Npu", (), {})()
        planted.npu_add_rms_norm_quant = lambda *a, **k: npu.npu_add_rms_norm_quant(*a, beta=None, **k)
        return original(planted, x, residual, weight, eps, input_scale, input_offset)

    adapter = replace(w8a8.add_rms_norm_quant_npu, recipes={"npu_add_rms_norm_quant": with_beta})
    with pytest.raises(TypeError, match="unexpected keyword argument 'beta'"):
        _run(case, torch.float16, stand_in, monkeypatch, adapter)
    later = _case("norm_quant.model_v011", "2.7.1")  # v0.11.0rc1's wheel declares beta: the same call binds
    _run(later, torch.float16, stand_in, monkeypatch, adapter)


@pytest.mark.parametrize("row_id", ["w8a8_dynamic.dynamic_quant", "w8a8.compressed_tensors"])
def test_a_float16_scale_is_no_row_of_the_dtype_table(row_id, stand_in, monkeypatch):
    """The check has teeth: vllm-ascend's float16 scale for a float16 model (vllm-ascend #7443) is caught."""
    case = _case(row_id)
    adapter = REGISTRY.entry(case.row.op).impls[Backend.NPU]
    kept = dict(adapter.recipes)

    def float16_scale(npu, x, weight, *rest):
        def matmul(x1, x2, scale, **kwargs):
            return npu.npu_quant_matmul(x1, x2, scale.to(torch.float16), **kwargs)

        planted = type("Npu", (), {"npu_quant_matmul": staticmethod(matmul)})()
        for name in ("npu_quantize", "npu_dynamic_quant"):
            if hasattr(npu, name):
                setattr(planted, name, getattr(npu, name))
        return kept[case.row.recipe](planted, x, weight, *rest)

    planted = replace(adapter, recipes={**kept, case.row.recipe: float16_scale})
    fake, reason = _run(case, torch.float16, stand_in, monkeypatch, planted)
    assert reason is None
    assert any("scale=float16" in p and "dtype table" in p for p in _violations(case, fake))


def test_the_a5_cache_write_without_cache_mode_is_caught_on_its_wheel(stand_in, monkeypatch):
    """op-plugin 7.2.0/7.3.0 write PA_NZ when no cache_mode is passed: the call vllm-ascend made on A5 at
    v0.12.0rc1-v0.19.1rc1 lands in the wrong layout, which the rule sees (it used to treat absent as Norm)."""
    case = _case("cache_write.a5_scatter")
    fake = stand_in(case.commit)
    key = torch.empty(6, 2, 128, dtype=torch.float16, device=DEVICE)
    cache = torch.empty(2, 4, 128, 2, 128, dtype=torch.float16, device=DEVICE)
    slots = torch.empty(6, dtype=torch.int32, device=DEVICE)
    fake.module.npu_scatter_pa_kv_cache(key, key, cache[0], cache[1], slots)
    assert any("'PA_NZ'" in p for p in problems(fake.calls[0], DEVICE, case.context.chip, case.commit))


def test_float32_is_refused_before_any_kernel(stand_in, monkeypatch):
    decode = _case("decode.pa")
    fake = stand_in(decode.commit)
    monkeypatch.setenv(OVERRIDE_VAR, decode.override)
    args = inputs("paged_decode_attention", decode.call, torch.float32)
    reason = REGISTRY.entry("paged_decode_attention").supports[Backend.NPU](*args)
    assert "float32" in reason and fake.calls == []


@pytest.mark.parametrize("op", ["w8a8_linear", "w8a8_dynamic_linear"])
def test_float32_w8a8_activations_are_refused_before_any_kernel(op, stand_in, monkeypatch):
    # npu_quant_matmul writes float16/bfloat16 (or int8), never float32: the native integer path serves.
    case = next(c for c in cases() if c.row.op == op and c.row.recipe in ("quantize_reciprocal", "dynamic_quant"))
    fake = stand_in(case.commit)
    monkeypatch.setenv(OVERRIDE_VAR, case.override)
    reason = REGISTRY.entry(op).supports[Backend.NPU](*inputs(op, case.call, torch.float32))
    assert "torch.float32 x" in reason and fake.calls == []


def test_a_kwarg_the_wheel_does_not_declare_fails_binding(stand_in, monkeypatch):
    # cache_mode exists from op-plugin 26.0.0 on; against torch_npu 2.9.0's commit the Norm recipe must fail,
    # which is why the table keeps A5 native until v0.20.2rc1.
    case = _case("cache_write.a5_scatter_norm")
    stand_in(wheel_commits("2.9.0")[0])
    monkeypatch.setenv(OVERRIDE_VAR, case.override)
    with pytest.raises(TypeError, match="cache_mode"):
        REGISTRY.entry("reshape_and_cache").impls[Backend.NPU](*inputs("reshape_and_cache", case.call, torch.float16))


def test_atb_workspace_kwarg_is_not_passed_to_old_wheels(stand_in, monkeypatch):
    # _npu_paged_attention's `workspace` appears in op-plugin 7.2.0; the eager decode never passes it.
    case = _case("decode.pa", "2.5.1")
    fake, _ = _run(case, torch.float16, stand_in, monkeypatch)
    assert "workspace" not in fake.calls[0].arguments
