"""The W8A8 linears on a real Ascend NPU: npu_quantize / npu_dynamic_quant + npu_quant_matmul against native.

Each recipe of the kernel-selection table runs under a release that selects it (ASCEND_BACKEND_KERNELS):
the static linear's division (v0.8.5rc1) and reciprocal (v0.18.0) quantizations, the dynamic one.
The native integer path is exact; the NPU may differ where it rounds an activation one int8 step away
(vllm-ascend hands npu_quantize a reciprocal in the model's dtype) and in the final rounding to the
output dtype. Tolerance: cosine and relative error of the whole output.
"""

from __future__ import annotations

import pytest
import torch

from ascend_backend import registry
from ascend_backend.platform import kernels
from ascend_backend.registry import REGISTRY, Backend
from workbench.accuracy.op_inputs import make_inputs

pytestmark = pytest.mark.npu


RECIPES = [
    ("w8a8_linear", "quantize_divide", "release=0.8.5rc1,chip=A2"),
    ("w8a8_linear", "quantize_reciprocal", "release=0.18.0,chip=A2"),
    ("w8a8_dynamic_linear", "dynamic_quant", "release=0.18.0,chip=A2"),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("op,recipe,override", RECIPES, ids=[r for _, r, _ in RECIPES])
@pytest.mark.parametrize("tokens,hidden", [(8, 576), (32, 1536)])
def test_npu_kernel_matches_the_native_integer_path(op, recipe, override, dtype, tokens, hidden, monkeypatch):
    monkeypatch.setenv("ASCEND_BACKEND_KERNELS", override)
    assert kernels.choose(op).recipe == recipe
    inputs = make_inputs(op, {"tokens": tokens, "hidden": hidden})
    reference = REGISTRY.impl(op, Backend.NATIVE)(*inputs.to("cpu", dtype).to("cpu", torch.float32).args)
    registry.reset_stats()
    out = REGISTRY.dispatch(op, torch.device("npu:0"), *inputs.to("npu:0", dtype).args)
    assert registry.stats()[op] == {"npu": 1}, "the NPU kernel did not run"
    assert out.dtype == dtype and out.shape == reference.shape
    got = out.float().cpu()
    cosine = torch.nn.functional.cosine_similarity(got.flatten(), reference.flatten(), dim=0)
    relative = (got - reference).norm() / reference.norm()
    assert cosine > 0.9999 and relative < 1e-2, f"{op} {dtype}: cosine {cosine:.6f}, relative error {relative:.3g}"


MORE_RECIPES = [
    ("w8a8_linear", "quantize_reciprocal_float_bias", "release=0.18.0,chip=A2,checkpoint=compressed-tensors"),
    ("w8a8_dynamic_linear", "dynamic_quant_int8", "release=0.22.1rc1,chip=A2"),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("op,recipe,override", MORE_RECIPES, ids=[r for _, r, _ in MORE_RECIPES])
def test_more_linear_forms_match_the_native_integer_path(op, recipe, override, dtype, monkeypatch):
    # compressed-tensors argument form (w8a8_static.py@v0.18.0:130) and dst_type (w8a8_dynamic.py@v0.22.1rc1:82)
    test_npu_kernel_matches_the_native_integer_path(op, recipe, override, dtype, 8, 576, monkeypatch)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_nz_weight_and_fused_norm_quant_feed_the_linear_like_the_native_path(dtype, monkeypatch):
    # layout.nz (w8a8.py@v0.9.2rc1:129) once at load, norm_quant.compiled (npu_add_rms_norm_quant), then the
    # linear on the int8 activation alone (w8a8.prequantized): the chain vllm-ascend runs in a compiled graph.
    monkeypatch.setenv("ASCEND_BACKEND_KERNELS", "release=0.18.0,chip=A2,graph=PIECEWISE")
    assert kernels.choose("quant_weight_layout").recipe == "nz_cast"
    assert kernels.choose("add_rms_norm_quant").recipe == "npu_add_rms_norm_quant"
    inputs = make_inputs("w8a8_linear", {"tokens": 8, "hidden": 576})
    x, weight, scale, offset, deq, qbias = inputs.to("cpu", dtype).args
    residual = torch.zeros_like(x)
    norm_weight = torch.ones(x.shape[-1], dtype=dtype)
    native = REGISTRY.impl("add_rms_norm_quant", Backend.NATIVE)
    x_q_ref, _ = native(x.float(), residual.float(), norm_weight.float(), 1e-6, scale.float(), offset)
    out_ref = REGISTRY.impl("w8a8_linear", Backend.NATIVE)(x_q_ref, weight, scale, offset, deq, qbias)
    dev = torch.device("npu:0")
    nz = REGISTRY.dispatch("quant_weight_layout", dev, weight.to(dev), "W8A8")
    x_q, _ = REGISTRY.dispatch(
        "add_rms_norm_quant", dev, x.to(dev), residual.to(dev), norm_weight.to(dev), 1e-6, scale.to(dev), offset.to(dev)
    )
    assert (x_q.cpu().int() - x_q_ref.int()).abs().max() <= 1
    out = REGISTRY.dispatch("w8a8_linear", dev, x_q, nz, scale.to(dev), offset.to(dev), deq.to(dev), qbias.to(dev))
    cosine = torch.nn.functional.cosine_similarity(out.float().cpu().flatten(), out_ref.float().flatten(), dim=0)
    assert cosine > 0.999
