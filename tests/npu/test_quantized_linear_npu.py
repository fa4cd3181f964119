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
from ascend_backend.npu import kernels
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
