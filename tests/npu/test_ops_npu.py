"""NPU adapters against the native reference on a real Ascend NPU (skipped elsewhere)."""

from __future__ import annotations

import pytest
import torch

from ascend_backend.registry import REGISTRY, Backend
from workbench.accuracy.op_inputs import make_inputs

pytestmark = pytest.mark.npu

TOL = {torch.float16: (5e-3, 5e-3), torch.bfloat16: (4e-2, 4e-2), torch.float32: (1e-4, 1e-4)}
OPS_WITH_NPU_KERNEL = ["rms_norm", "add_rms_norm", "silu_and_mul", "gelu", "gelu_tanh", "rotary_embedding"]


@pytest.mark.parametrize("op", OPS_WITH_NPU_KERNEL)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_npu_kernel_matches_native(op, dtype):
    assert REGISTRY.select(op, "npu:0").backend is Backend.NPU
    inputs = make_inputs(op, (16, 512), seed=0)
    expected = REGISTRY.impl(op, Backend.NATIVE)(*inputs.args)
    actual = REGISTRY.dispatch(op, torch.device("npu:0"), *inputs.to("npu:0", dtype).args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = actual if isinstance(actual, tuple) else (actual,)
    atol, rtol = TOL[dtype]
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a.float().cpu(), e.float(), atol=atol, rtol=rtol)
