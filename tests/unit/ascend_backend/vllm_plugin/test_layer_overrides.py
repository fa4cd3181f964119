"""The plugin's layer overrides against vLLM's own layers, without an engine.

Each override must (a) give vLLM's result on random inputs through every forward vLLM can pick
(native, cpu, oot), (b) send the work through the registry (counted calls), and (c) under
torch.compile dispatch on every real call, not once at trace time.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("vllm")

from vllm.config import VllmConfig, set_current_vllm_config  # noqa: E402
from vllm.model_executor.custom_op import CustomOp, op_registry_oot  # noqa: E402
from vllm.model_executor.layers.activation import GELU, GELUTanh, SiluAndMul  # noqa: E402
from vllm.model_executor.layers.layernorm import RMSNorm  # noqa: E402
from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding  # noqa: E402

from ascend_backend.registry import REGISTRY  # noqa: E402
from ascend_backend.vllm_plugin import custom_ops  # noqa: E402
from ascend_backend.vllm_plugin.custom_ops import (  # noqa: E402
    AscendBackendGELU,
    AscendBackendGELUTanh,
    AscendBackendRMSNorm,
    AscendBackendRotaryEmbedding,
    AscendBackendSiluAndMul,
    InstallStatus,
)

FORWARDS = ("forward_native", "forward_cpu", "forward_oot")


@pytest.fixture(autouse=True)
def vllm_config():
    with set_current_vllm_config(VllmConfig()):
        REGISTRY.reset_stats()
        yield
    REGISTRY.reset_stats()


@pytest.fixture
def overrides_removed():
    """Start and end without our overrides in vLLM's registry, whatever this process did before."""
    saved = {o.layer: op_registry_oot.pop(o.layer) for o in custom_ops.LAYER_OVERRIDES if o.layer in op_registry_oot}
    yield
    custom_ops.uninstall_layer_overrides()
    op_registry_oot.update(saved)


def calls(op: str) -> int:
    return sum(n for kind, n in REGISTRY.stats().get(op, {}).items() if kind != "faulted")


@pytest.mark.parametrize("forward", FORWARDS)
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-6), (torch.bfloat16, 2e-2)])
def test_rms_norm_with_and_without_residual_matches_vllm(forward, dtype, tol):
    torch.manual_seed(0)
    ours, theirs = AscendBackendRMSNorm(64, eps=1e-5, dtype=dtype), RMSNorm(64, eps=1e-5, dtype=dtype)
    weight = torch.randn(64, dtype=dtype)
    ours.weight.data.copy_(weight)
    theirs.weight.data.copy_(weight)
    x, residual = torch.randn(7, 64, dtype=dtype), torch.randn(7, 64, dtype=dtype)
    torch.testing.assert_close(getattr(ours, forward)(x), theirs.forward_native(x), atol=tol, rtol=tol)
    out, summed = getattr(ours, forward)(x, residual.clone())
    want_out, want_summed = theirs.forward_native(x.clone(), residual.clone())
    torch.testing.assert_close(out, want_out, atol=tol, rtol=tol)
    torch.testing.assert_close(summed, want_summed, atol=tol, rtol=tol)
    assert calls("rms_norm") == 1 and calls("add_rms_norm") == 1


def test_rms_norm_variant_the_registry_does_not_cover_keeps_vllm_math():
    layer = AscendBackendRMSNorm(64, var_hidden_size=32)
    x = torch.randn(3, 64)
    torch.testing.assert_close(layer.forward_cpu(x), RMSNorm(64, var_hidden_size=32).forward_native(x))
    assert calls("rms_norm") == 0


@pytest.mark.parametrize("forward", FORWARDS)
@pytest.mark.parametrize(
    "ours,theirs,op",
    [
        (AscendBackendSiluAndMul, SiluAndMul, "silu_and_mul"),
        (AscendBackendGELU, GELU, "gelu"),
        (AscendBackendGELUTanh, GELUTanh, "gelu_tanh"),
    ],
)
def test_activations_match_vllm(forward, ours, theirs, op):
    x = torch.randn(5, 3, 48)
    torch.testing.assert_close(getattr(ours(), forward)(x), theirs().forward_native(x), atol=1e-6, rtol=1e-6)
    assert calls(op) == 1


@pytest.mark.parametrize("forward", FORWARDS)
@pytest.mark.parametrize("is_neox,rotary_dim", [(True, 32), (False, 32), (True, 16)])
def test_rotary_matches_vllm_cpu_kernel_and_native(forward, is_neox, rotary_dim):
    torch.manual_seed(1)
    args = dict(
        head_size=32,
        rotary_dim=rotary_dim,
        max_position_embeddings=256,
        base=10000.0,
        is_neox_style=is_neox,
        dtype=torch.float32,
    )
    ours, theirs = AscendBackendRotaryEmbedding(**args), RotaryEmbedding(**args)
    positions = torch.randint(0, 256, (9,))
    query, key = torch.randn(9, 4 * 32), torch.randn(9, 2 * 32)
    q, k = getattr(ours, forward)(positions, query.clone(), key.clone())
    want_q, want_k = theirs.forward_native(positions, query.clone(), key.clone())
    torch.testing.assert_close(q, want_q, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(k, want_k, atol=1e-5, rtol=1e-5)
    cpu_q, cpu_k = theirs.forward_cpu(positions, query.clone(), key.clone())  # vLLM's C++ kernel, in place
    torch.testing.assert_close(q, cpu_q, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(k, cpu_k, atol=1e-5, rtol=1e-5)
    assert calls("rotary_embedding") == 1


def test_rotary_without_key_rotates_the_query_alone():
    ours = AscendBackendRotaryEmbedding(32, 32, 64, 10000.0, True, torch.float32)
    positions, query = torch.arange(4), torch.randn(4, 64)
    q, k = ours.forward_native(positions, query)
    want, _ = RotaryEmbedding(32, 32, 64, 10000.0, True, torch.float32).forward_native(positions, query)
    assert k is None
    torch.testing.assert_close(q, want)


def test_under_torch_compile_every_call_dispatches_and_faults_fire_per_call():
    norm = AscendBackendRMSNorm(16)
    act = AscendBackendSiluAndMul()

    def block(x, residual):
        h, residual = norm.forward_native(x, residual)
        return act.forward_native(torch.cat([h, h], dim=-1)), residual

    compiled = torch.compile(block, backend="aot_eager", fullgraph=True)
    x, residual = torch.randn(4, 16), torch.randn(4, 16)
    want = block(x, residual)
    REGISTRY.reset_stats()
    for _ in range(3):
        got = compiled(x, residual)
    torch.testing.assert_close(got, want)
    assert calls("add_rms_norm") == 3 and calls("silu_and_mul") == 3  # not 1: dispatch ran per call
    with REGISTRY.inject("add_rms_norm", "nan", call=2) as fault:
        outs = [compiled(x, residual)[0] for _ in range(3)]
    assert [bool(o.isnan().all()) for o in outs] == [False, True, False] and fault.fired == 1


def test_install_swaps_vllm_layers_by_class_name_and_keeps_the_custom_op_switch(overrides_removed):
    results = custom_ops.install_layer_overrides(frozenset())
    assert {r.layer: r.status for r in results} == {
        o.layer: InstallStatus.INSTALLED for o in custom_ops.LAYER_OVERRIDES
    }
    assert type(RMSNorm(8)) is AscendBackendRMSNorm and type(SiluAndMul()) is AscendBackendSiluAndMul
    assert AscendBackendRMSNorm.name == "rms_norm"  # so custom_ops=['-rms_norm'] still addresses it
    again = custom_ops.install_layer_overrides(frozenset())
    assert {r.status for r in again} == {InstallStatus.ALREADY_INSTALLED}


def test_disabled_ops_keep_vllm_layers(overrides_removed):
    results = {r.layer: r.status for r in custom_ops.install_layer_overrides(frozenset({"add_rms_norm", "GELU"}))}
    assert results["RMSNorm"] is InstallStatus.DISABLED and results["GELU"] is InstallStatus.DISABLED
    assert results["SiluAndMul"] is InstallStatus.INSTALLED
    assert type(RMSNorm(8)) is RMSNorm
    custom_ops.uninstall_layer_overrides()
    assert {r.status for r in custom_ops.install_layer_overrides(frozenset({"*"}))} == {InstallStatus.DISABLED}


def test_a_layer_another_plugin_owns_is_left_alone(overrides_removed):
    class VendorRMSNorm(RMSNorm):  # stands in for e.g. vllm-ascend's AscendRMSNorm, registered first
        pass

    CustomOp.register_oot(_decorated_op_cls=VendorRMSNorm, name="RMSNorm")
    try:
        results = {r.layer: r for r in custom_ops.install_layer_overrides(frozenset())}
        assert results["RMSNorm"].status is InstallStatus.TAKEN and "VendorRMSNorm" in results["RMSNorm"].detail
        assert op_registry_oot["RMSNorm"] is VendorRMSNorm
    finally:
        op_registry_oot.pop("RMSNorm", None)
