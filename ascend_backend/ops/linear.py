"""Linear layer: y = x W^T + b.

There is deliberately no separate NPU adapter: vllm-ascend's unquantized linear method runs
`torch.nn.functional.linear`, which torch_npu lowers to the CANN matmul kernel, so the native function
*is* the NPU path (describe() says so). The quantized linears (`w8a8_linear`, `w8a8_dynamic_linear`:
`npu_quantize` / `npu_dynamic_quant` + `npu_quant_matmul` on an NPU, an exact integer path natively) live
in `ascend_backend.quantization.ops`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ascend_backend.registry import REGISTRY, Backend


@REGISTRY.declare
def linear(
    x: torch.Tensor,  # [..., in]
    weight: torch.Tensor,  # [out, in]
    bias: torch.Tensor | None = None,  # [out]
) -> torch.Tensor:  # [..., out]
    """x @ weight.T + bias (aten matmul; CANN matmul on NPU)."""


@REGISTRY.register("linear", Backend.NATIVE)
def linear_native(x, weight, bias):
    return F.linear(x, weight, bias)
