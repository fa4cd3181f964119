"""The quantized linear as registry ops, and the two steps around it vllm-ascend makes table-driven.

    w8a8_linear           static W8A8: quantize the activation with the layer's scale, int8 matmul, dequantize;
                          an int8 activation (a fused norm-quant ran before) skips the quantize
    w8a8_dynamic_linear   per-token W8A8: a scale per token, int8 matmul, dequantize
    quant_weight_layout   the int8 weight's layout, once at load (vllm-ascend: FRACTAL_NZ from some releases)
    add_rms_norm_quant    the norm before a static W8A8 linear fused with that linear's quantize

On an NPU each op makes the calls vllm-ascend makes (per the kernel-selection table: `npu_quantize` /
`npu_dynamic_quant` + `npu_quant_matmul`, `npu_format_cast`, `npu_add_rms_norm_quant`): the adapters are
in `ascend_backend.npu.adapters.w8a8`.

`weight` is [K, N] int8: vllm-ascend transposes the checkpoint's [N, K] once after loading, and so do
our layers. Natively the ops run the integer path of `arithmetic`: int8 activations, an exact int8 x
int8 -> int32 product (int64-packed deq_scale unpacked bit for bit), then the float dequantization, in
float32, cast to the output dtype at the end.
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
def quant_weight_layout(
    weight: torch.Tensor,  # [K, N] int8, as the linears take it
    scheme: str = "W8A8",  # W8A8 | W8A8_DYNAMIC: the table's rows may differ per scheme
) -> torch.Tensor:  # the same values, in the layout the release's linears hand npu_quant_matmul
    """Once per layer after loading: vllm-ascend casts the int8 weight to FRACTAL_NZ where its release does."""


@REGISTRY.declare
def add_rms_norm_quant(
    x: torch.Tensor,  # [..., K] float
    residual: torch.Tensor,  # [..., K]
    weight: torch.Tensor,  # [K] the norm's weight
    eps: float,
    input_scale: torch.Tensor,  # [1] in the model dtype: the next static W8A8 linear's activation scale
    input_offset: torch.Tensor,  # [1] int8: its zero point
) -> tuple[torch.Tensor, torch.Tensor]:  # (int8 [..., K] for the linear, x + residual in x's dtype)
    """x_q = round(rms_norm(x + residual) * weight / s_x + z_x), clamped to int8; the sum is the new residual."""


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


def output_dtype(x: torch.Tensor, deq_scale: torch.Tensor) -> torch.dtype:
    """The linear's output dtype: x's, or for an int8 (pre-quantized) x what deq_scale's form says
    (int64-packed for float16 models, float32 for bfloat16: get_perchannel_param in vllm-ascend)."""
    if x.dtype != torch.int8:
        return x.dtype
    return torch.float16 if deq_scale.dtype == torch.int64 else torch.bfloat16


@REGISTRY.register("w8a8_linear", Backend.NATIVE)
def w8a8_linear_native(x, weight, input_scale, input_offset, deq_scale, quant_bias):
    # The reference divides in float32; vllm-ascend's NPU path multiplies by a reciprocal rounded to the
    # model dtype, which moves a few activations by one int8 step (the op suite measures it on the NPU).
    if x.dtype == torch.int8:
        x_q = _flat(x)  # quantized by the fused norm before the linear (add_rms_norm_quant)
    else:
        x_q = quantize_static(_flat(x), 1 / input_scale.float(), input_offset.float())  # [T, K] int8
    acc = int8_matmul(x_q, weight) + quant_bias.to(torch.int32)  # [T, N] int32, exact
    scale = unpack_deq_scale(deq_scale) if deq_scale.dtype == torch.int64 else deq_scale.float()
    return (acc.float() * scale).to(output_dtype(x, deq_scale)).reshape(*x.shape[:-1], weight.shape[1])


@REGISTRY.register("quant_weight_layout", Backend.NATIVE)
def quant_weight_layout_native(weight, scheme="W8A8"):
    return weight  # a CPU tensor has one layout; FRACTAL_NZ exists on the NPU only


@REGISTRY.register("add_rms_norm_quant", Backend.NATIVE)
def add_rms_norm_quant_native(x, residual, weight, eps, input_scale, input_offset):
    # npu_add_rms_norm_quant's arithmetic (div_mode=True): the normalised sum divided by the scale, plus the
    # zero point, rounded half to even and clamped to int8, in float32.
    summed = x.float() + residual.float()
    normed = summed * torch.rsqrt(summed.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
    y = torch.round(normed / input_scale.float() + input_offset.float())
    return y.clamp(-128, 127).to(torch.int8), summed.to(x.dtype)


@REGISTRY.register("w8a8_dynamic_linear", Backend.NATIVE)
def w8a8_dynamic_linear_native(x, weight, weight_scale, bias):
    x_q, token_scale = quantize_dynamic(_flat(x))  # [T, K] int8, [T] float32
    y = int8_matmul(x_q, weight).float() * weight_scale.float() * token_scale[:, None]  # [T, N]
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype).reshape(*x.shape[:-1], weight.shape[1])
