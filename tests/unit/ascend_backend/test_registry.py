"""Registry: selection, overrides, fallback reasons, counters, per-call guards and fault injection."""

from __future__ import annotations

import inspect
import logging

import pytest
import torch

import ascend_backend
from ascend_backend import ops, registry
from ascend_backend.faults import FaultKind, FaultSpec, parse_fault_specs
from ascend_backend.platform.kinds import DeviceKind
from ascend_backend.registry import REGISTRY, Backend, OpRegistry, UnknownOpError

CORE_OPS = {"rms_norm", "add_rms_norm", "silu_and_mul", "gelu", "gelu_tanh", "rotary_embedding", "linear"}


@pytest.fixture(autouse=True)
def clean_registry(monkeypatch):
    monkeypatch.delenv("ASCEND_BACKEND_FORCE_NATIVE", raising=False)
    REGISTRY.reset_stats()
    yield
    REGISTRY.override("*", None)
    REGISTRY.reset_stats()


def toy_registry() -> OpRegistry:
    """A private registry with one op that has native and cuda implementations (cuda is selectable by
    kind without a GPU because selection only looks at the device kind)."""
    reg = OpRegistry()
    reg.register("double", Backend.NATIVE, doc="2x")(lambda x: x * 2)
    reg.register("double", Backend.CUDA, supports=lambda x: "int input" if not x.is_floating_point() else None)(
        lambda x: x + x
    )
    return reg


def test_describe_lists_every_op_with_native_and_reason_on_cpu():
    table = registry.describe("cpu")
    assert CORE_OPS <= set(table["op"])
    assert set(table["chosen"]) == {"native"}
    assert list(table.columns) == [
        "op",
        "chosen",
        "available",
        "registered",
        "reason",
        "calls",
        "faulted",
        "npu_kernel",
        "kernel_row",
    ]
    rms = table.set_index("op").loc["rms_norm"]
    assert "npu" in rms["registered"] and "cpu tensors" in rms["reason"]
    assert ascend_backend.device.npu_status().kind.value in rms["reason"]


def test_calls_are_counted_per_implementation():
    x, w = torch.randn(2, 8), torch.ones(8)
    for _ in range(3):
        ops.rms_norm(x, w)
    ops.silu_and_mul(torch.randn(2, 8))
    assert registry.stats()["rms_norm"] == {"native": 3}
    assert registry.describe("cpu").set_index("op").loc["rms_norm", "calls"] == 3


def test_unknown_op_lists_known_ones():
    with pytest.raises(UnknownOpError) as info:
        REGISTRY.select("rms_normm", "cpu")
    assert "rms_norm" in str(info.value) and "silu_and_mul" in str(info.value)
    with pytest.raises(UnknownOpError):
        with registry.inject("no_such_op"):
            pass


def test_accelerated_kernel_chosen_for_its_device_kind_and_native_elsewhere():
    reg = toy_registry()
    assert reg.select("double", DeviceKind.CUDA).backend is Backend.CUDA
    cpu = reg.select("double", DeviceKind.CPU)
    assert cpu.backend is Backend.NATIVE and "only implementation" in cpu.reason
    npu = reg.select("double", DeviceKind.NPU)
    assert npu.backend is Backend.NATIVE and "no npu kernel registered" in npu.reason


def test_npu_kernel_unusable_falls_back_with_the_import_reason():
    sel = REGISTRY.select("rms_norm", DeviceKind.NPU)
    if ascend_backend.device.npu_status().available:
        pytest.skip("an NPU is usable here")
    assert sel.backend is Backend.NATIVE
    assert "npu kernel unusable" in sel.reason


def test_env_var_forces_native_for_listed_ops(monkeypatch):
    reg = toy_registry()
    monkeypatch.setenv("ASCEND_BACKEND_FORCE_NATIVE", "double, other")
    sel = reg.select("double", DeviceKind.CUDA)
    assert sel.backend is Backend.NATIVE and "ASCEND_BACKEND_FORCE_NATIVE" in sel.reason
    monkeypatch.setenv("ASCEND_BACKEND_FORCE_NATIVE", "all")
    reg.override("double", None)  # clears the cached choice
    assert reg.select("double", DeviceKind.CUDA).backend is Backend.NATIVE


def test_api_override_and_forced_native_scope():
    reg = toy_registry()
    reg.override("double", Backend.NATIVE)
    assert reg.select("double", DeviceKind.CUDA).reason == "forced native by registry.override()"
    reg.override("double", None)
    with reg.forced_native():
        assert reg.select("double", DeviceKind.CUDA).backend is Backend.NATIVE
    assert reg.select("double", DeviceKind.CUDA).backend is Backend.CUDA
    with pytest.raises(ValueError, match="cannot run on cpu"):
        reg.override("double", Backend.CUDA)
        reg.select("double", DeviceKind.CPU)


def test_choice_is_made_once_per_op_and_device(monkeypatch):
    reg = toy_registry()
    calls = []
    original = reg._choose
    monkeypatch.setattr(reg, "_choose", lambda op, kind: calls.append((op, kind)) or original(op, kind))
    for _ in range(5):
        reg.select("double", DeviceKind.CPU)
        reg.select("double", DeviceKind.CUDA)
    assert calls == [("double", DeviceKind.CPU), ("double", DeviceKind.CUDA)]


def test_per_call_guard_falls_back_and_logs_once(caplog):
    reg = toy_registry()
    reg.select("double", DeviceKind.CUDA)
    # Dispatch keyed on a cuda *kind* without a GPU: call the selection path directly with a fake device.
    fn_native = reg.impl("double", Backend.NATIVE)
    assert fn_native(torch.tensor([3])).item() == 6
    with caplog.at_level(logging.WARNING, logger="ascend_backend.registry"):
        for _ in range(3):
            out = reg.dispatch("double", torch.device("cuda"), torch.tensor([2]))
            assert out.item() == 4
    assert reg.stats()["double"] == {"native": 3}
    assert sum("does not support this call" in r.message for r in caplog.records) == 1


def test_duplicate_registration_is_refused():
    reg = toy_registry()
    with pytest.raises(ValueError, match="already has a native"):
        reg.register("double", Backend.NATIVE)(lambda x: x)


# ----------------------------------------------------------------- declarations
def declared_registry() -> tuple[OpRegistry, object, list[tuple]]:
    """A private registry with one declared op `scale_by` (default factor 2.0) whose native implementation
    records the arguments it receives."""
    reg = OpRegistry()
    received: list[tuple] = []

    @reg.declare(device="x")
    def scale_by(factor: float, x: torch.Tensor, offset: float = 2.0) -> torch.Tensor:
        """y = factor * x + offset."""

    @reg.register("scale_by", Backend.NATIVE)
    def scale_by_native(factor, x, offset):
        received.append((factor, offset))
        return factor * x + offset

    return reg, scale_by, received


def test_the_declaration_becomes_the_op_function_which_completes_defaults():
    reg, scale_by, received = declared_registry()
    x = torch.ones(2)
    assert scale_by(3.0, x).tolist() == [5.0, 5.0]
    assert scale_by(3.0, x=x, offset=0.5).tolist() == [3.5, 3.5]
    assert received == [(3.0, 2.0), (3.0, 0.5)]  # every argument reached the implementation positionally
    assert reg.stats()["scale_by"] == {"native": 2}
    assert reg.entry("scale_by").doc == "y = factor * x + offset."
    assert list(inspect.signature(scale_by).parameters) == ["factor", "x", "offset"]
    assert reg.signature("scale_by").device_param == "x"


def test_an_implementation_must_take_the_declared_parameters_whichever_comes_first():
    reg, _scale_by, _ = declared_registry()
    with pytest.raises(TypeError, match=r"takes \(x, factor\); the op is declared at .*with \(factor, x, offset\)"):
        reg.register("scale_by", Backend.CUDA)(lambda x, factor: x)
    early = OpRegistry()
    early.register("shift", Backend.NATIVE)(lambda x, by: x + by)
    with pytest.raises(TypeError, match=r"native implementation of op 'shift' takes \(x, by\)"):

        @early.declare
        def shift(x: torch.Tensor) -> torch.Tensor:
            """x + 1."""


def test_an_op_is_declared_once():
    reg, _scale_by, _ = declared_registry()
    with pytest.raises(ValueError, match="declared twice"):

        @reg.declare(name="scale_by")
        def another(factor: float, x: torch.Tensor, offset: float = 2.0) -> torch.Tensor:
            """Again."""


def test_every_built_in_op_is_declared_and_its_implementations_take_its_parameters():
    for op in REGISTRY.ops():
        signature = REGISTRY.signature(op)
        assert signature.doc, op
        for backend, impl in REGISTRY.entry(op).impls.items():
            signature.check(impl, f"{backend.value} {op}")  # raises on any drift


# ----------------------------------------------------------------- faults
def test_inject_nan_into_rms_norm_and_counters_show_it():
    x, w = torch.randn(3, 16), torch.ones(16)
    with registry.inject("rms_norm", fault="nan") as handle:
        out = ops.rms_norm(x, w)
    assert torch.isnan(out).all()
    assert handle.fired == 1
    assert registry.stats()["rms_norm"] == {"native": 1, "faulted": 1}
    assert registry.describe("cpu").set_index("op").loc["rms_norm", "faulted"] == 1
    assert not torch.isnan(ops.rms_norm(x, w)).any()  # disarmed after the block


@pytest.mark.parametrize(
    "kind,check",
    [
        ("inf", lambda out, clean: torch.isinf(out).all()),
        ("zero", lambda out, clean: (out == 0).all()),
        ("scale", lambda out, clean: torch.allclose(out, clean * 1.01)),
        ("noise", lambda out, clean: not torch.equal(out, clean) and torch.allclose(out, clean, atol=0.2)),
    ],
)
def test_fault_kinds(kind, check):
    x = torch.randn(4, 32)
    clean = ops.gelu(x)
    with registry.inject("gelu", fault=kind):
        out = ops.gelu(x)
    assert check(out, clean)


def test_fault_limited_to_kth_call():
    x = torch.randn(2, 8)
    with registry.inject("silu_and_mul", fault="zero", call=2) as handle:
        outs = [ops.silu_and_mul(x) for _ in range(4)]
    zeroed = [bool((o == 0).all()) for o in outs]
    assert zeroed == [False, True, False, False]
    assert (handle.seen, handle.fired) == (4, 1)


def test_fault_limited_to_a_module_of_a_real_model():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm_weight = torch.nn.Parameter(torch.ones(8))

        def forward(self, x):
            return ops.rms_norm(x, self.norm_weight)

    model = torch.nn.Sequential(Block(), Block(), Block())
    handles = registry.attach_module_names(model, prefix="model")
    seen = []
    for i, block in enumerate(model):
        block.register_forward_hook(lambda m, a, out, i=i: seen.append((i, bool(torch.isnan(out).any()))))
    with registry.inject("rms_norm", fault="nan", module="model.1") as fault:
        model(torch.randn(2, 8))
    assert seen == [(0, False), (1, True), (2, True)]  # NaN starts at block 1 and propagates
    assert fault.fired == 1
    for h in handles:
        h.remove()
    assert registry.current_module() is None


def test_add_rms_norm_fault_hits_the_normalised_output_only():
    x, r, w = torch.randn(2, 8), torch.randn(2, 8), torch.ones(8)
    with registry.inject("add_rms_norm", fault="nan"):
        out, residual = ops.add_rms_norm(x, r, w)
    assert torch.isnan(out).all() and not torch.isnan(residual).any()


def test_parse_fault_specs():
    specs = parse_fault_specs("rms_norm:scale:factor=1.02:call=3; silu_and_mul:nan:module=model.layers.1.*")
    assert specs == (
        FaultSpec("rms_norm", FaultKind.SCALE, call=3, factor=1.02),
        FaultSpec("silu_and_mul", FaultKind.NAN, module="model.layers.1.*"),
    )
    for bad, message in [
        ("rms_norm", "expected 'op:kind"),
        ("rms_norm:melt", "unknown kind"),
        ("rms_norm:nan:when=3", "bad option"),
        ("rms_norm:nan:call=0", ">= 1"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_fault_specs(bad)


def test_arm_from_env(monkeypatch):
    monkeypatch.setenv("ASCEND_BACKEND_FAULT", "gelu:zero:call=1")
    handles = REGISTRY.arm_from_env()
    try:
        assert (ops.gelu(torch.ones(3)) == 0).all()
        assert (ops.gelu(torch.ones(3)) != 0).all()
    finally:
        for h in handles:
            REGISTRY.disarm(h)


def test_write_stats(tmp_path):
    ops.gelu(torch.ones(2))
    path = tmp_path / "stats.json"
    REGISTRY.write_stats(path)
    import json

    data = json.loads(path.read_text())
    assert data["stats"]["gelu"] == {"native": 1}


def test_raise_fault_makes_the_op_fail():
    from ascend_backend.faults import InjectedFault

    with registry.inject("gelu", fault="raise", call=2):
        ops.gelu(torch.ones(2))
        with pytest.raises(InjectedFault, match="gelu"):
            ops.gelu(torch.ones(2))


def test_faults_on_an_in_place_op_only_raise():
    from ascend_backend.attention import allocate_kv_cache, reshape_and_cache
    from ascend_backend.faults import InjectedFault

    cache = allocate_kv_cache(4, 32, 2, 8, dtype=torch.float32)
    k = v = torch.ones(3, 2, 8)
    slots = torch.tensor([32, 33, 34], dtype=torch.int32)
    with registry.inject("reshape_and_cache", fault="nan") as handle:
        reshape_and_cache(k, v, cache, slots)
    assert handle.fired == 0 and torch.isfinite(cache).all()
    with registry.inject("reshape_and_cache", fault="raise"), pytest.raises(InjectedFault):
        reshape_and_cache(k, v, cache, slots)


def test_linked_ops_share_one_backend():
    reg = toy_registry()
    reg.register("write", Backend.NATIVE)(lambda x: x)
    reg.register("write", Backend.CUDA)(lambda x: x)
    reg.link("write", "double")
    assert reg.select("write", DeviceKind.CUDA).backend is Backend.CUDA
    reg.override("double", Backend.NATIVE)
    partner = reg.select("write", DeviceKind.CUDA)
    assert partner.backend is Backend.NATIVE
    assert "linked to double, which runs native (forced native by registry.override())" in partner.reason
    reg.override("double", None)
    assert reg.select("write", DeviceKind.CUDA).backend is Backend.CUDA


def test_unregister_removes_a_kernel_but_never_the_native_reference():
    reg = toy_registry()
    reg.unregister("double", Backend.CUDA)
    sel = reg.select("double", DeviceKind.CUDA)
    assert sel.backend is Backend.NATIVE and "no cuda kernel registered" in sel.reason
    reg.unregister("double", Backend.CUDA)  # absent: nothing to do
    with pytest.raises(ValueError, match="reference and cannot be removed"):
        reg.unregister("double", Backend.NATIVE)


def test_cpu_kernel_from_vllm_is_chosen_on_cpu_only_when_registered():
    reg = toy_registry()
    assert reg.select("double", DeviceKind.CPU).backend is Backend.NATIVE
    reg.register("double", Backend.VLLM_CPU)(lambda x: x * 2.0)
    sel = reg.select("double", DeviceKind.CPU)
    assert sel.backend is Backend.VLLM_CPU and "vLLM's CPU kernel" in sel.reason
    with reg.forced_native("double"):
        assert reg.select("double", DeviceKind.CPU).backend is Backend.NATIVE
    assert reg.select("double", DeviceKind.CUDA).backend is Backend.CUDA  # other devices unaffected
