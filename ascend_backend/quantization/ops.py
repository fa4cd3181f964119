"""The quantized linear as registry ops: `w8a8_linear` (static) and `w8a8_dynamic_linear` (per token).

On an NPU each op makes the calls vllm-ascend makes for an msmodelslim checkpoint (`npu_quantize` /
`npu_dynamic_quant` + `npu_quant_matmul`, per the kernel-selection table): the adapters are in
`ascend_backend.npu.adapters.w8a8`.

`weight` is [K, N] int8: vllm-ascend transposes the checkpoint's [N, K] once after loading, and so do
our layers. Natively the ops run the integer path of `arithmetic`: int8 activations, an exact int8 x
int8 -> int32 product, then the float dequantization, in float32, cast to x's dtype at the end.
"""

from __future__ import annotations

import torch

from ascend_backend.quantization.arithmetic import (
    int8_matmul,
    quantize_dynamic,
    quantize_static,
    unpack_deq_scale,
)
from ascend_backend.registry import REGISTRY, Backend


@REGISTRY.declare
def w8a8_linear(
    x: torch.Tensor,  # [..., K] float
    weight: torch.Tensor,  # [K, N] int8
    input_scale: torch.Tensor,  # [1] in the model dtype
    input_offset: torch.Tensor,  # [1] int8
    deq_scale: torch.Tensor,  # [N] float32 (bf16 models) or int64-packed (fp16)
    quant_bias: torch.Tensor,  # [N] int32
) -> torch.Tensor:  # [..., N] in x's dtype
    """Static W8A8: y = (int8(x*(1/s_x)+z_x) @ w_q + quant_bias) * deq_scale; int32 accumulation."""


@REGISTRY.declare
def w8a8_dynamic_linear(
    x: torch.Tensor,  # [..., K] float
    weight: torch.Tensor,  # [K, N] int8
    weight_scale: torch.Tensor,  # [N]
    bias: torch.Tensor | None = None,  # [N]
) -> torch.Tensor:  # [..., N] in x's dtype
    """Per-token W8A8: y = (int8(x/s_t) @ w_q) * s_w * s_t + b, s_t = max|x_t|/127 per token."""


def _flat(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1, x.shape[-1])  # [T, K]


@REGISTRY.register("w8a8_linear", Backend.NATIVE)
def w8a8_linear_native(x, weight, input_scale, input_offset, deq_scale, quant_bias):
    # The reference divides in float32; vllm-ascend's NPU path multiplies by a reciprocal rounded to the
    # model dtype, which moves a few activations by one int8 step (the op suite measures it on the NPU).
    x_q = quantize_static(_flat(x), 1 / input_scale.float(), input_offset.float())  # [T, K] int8
    acc = int8_matmul(x_q, weight) + quant_bias.to(torch.int32)  # [T, N] int32, exact
    scale = unpack_deq_scale(deq_scale) if deq_scale.dtype == torch.int64 else deq_scale.float()
    return (acc.float() * scale).to(x.dtype).reshape(*x.shape[:-1], weight.shape[1])


@REGISTRY.register("w8a8_dynamic_linear", Backend.NATIVE)
def w8a8_dynamic_linear_native(x, weight, weight_scale, bias):
    x_q, token_scale = quantize_dynamic(_flat(x))  # [T, K] int8, [T] float32
    y = int8_matmul(x_q, weight).float() * weight_scale.float() * token_scale[:, None]  # [T, N]
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype).reshape(*x.shape[:-1], weight.shape[1])
