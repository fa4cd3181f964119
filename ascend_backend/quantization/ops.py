"""The quantized linear as registry ops: `w8a8_linear` (static) and `w8a8_dynamic_linear` (per token).

On an NPU each op makes exactly the calls vllm-ascend makes for an msmodelslim checkpoint:

- static, `AscendW8A8LinearMethod` (vllm_ascend/quantization/methods/w8a8_static.py, v0.23.0; the same
  calls in vllm_ascend/quantization/w8a8.py, v0.9.1):
      x_q = torch_npu.npu_quantize(x, 1 / input_scale (repeated to K), input_offset (repeated, float),
                                   torch.qint8, -1, False)      # div_mode=False: x * scale + offset
      y   = torch_npu.npu_quant_matmul(x_q, weight, deq_scale, bias=quant_bias, output_dtype=x.dtype)
  (`_quantize_impl` in vllm_ascend/ops/register_custom_ops.py, v0.23.0, is that npu_quantize call; the
  reciprocal and the float offset are made in the model's dtype in `process_weights_after_loading`.)
- dynamic, `AscendW8A8DynamicLinearMethod` (vllm_ascend/quantization/methods/w8a8_dynamic.py, v0.23.0):
      x_q, pertoken_scale = torch_npu.npu_dynamic_quant(x)
      y = torch_npu.npu_quant_matmul(x_q, weight, weight_scale, pertoken_scale=pertoken_scale,
                                     bias=bias, output_dtype=x.dtype)

On an NPU, float32 activations fall back to the native path (the kernel has no float32 output), and a
float deq_scale is converted to the form a checkpoint stores for the output dtype.

`weight` is [K, N] int8: vllm-ascend transposes the checkpoint's [N, K] once after loading, and so do
our layers. Natively the ops run the integer path of `arithmetic`: int8 activations, an exact int8 x
int8 -> int32 product, then the float dequantization, in float32, cast to x's dtype at the end.
"""

from __future__ import annotations

import torch

from ascend_backend.npu.device import torch_npu
from ascend_backend.quantization.arithmetic import (
    int8_matmul,
    pack_deq_scale,
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


def _npu_output_dtype(x: torch.Tensor, *_args: object) -> str | None:
    """Per-call guard: npu_quant_matmul writes float16 or bfloat16 (or int8), never float32."""
    if x.dtype in (torch.float16, torch.bfloat16):
        return None
    return f"npu_quant_matmul has no {x.dtype} output; float32 activations run the native integer path"


@REGISTRY.register("w8a8_linear", Backend.NPU, supports=_npu_output_dtype)
def w8a8_linear_npu(
    x: torch.Tensor,
    weight: torch.Tensor,
    input_scale: torch.Tensor,
    input_offset: torch.Tensor,
    deq_scale: torch.Tensor,
    quant_bias: torch.Tensor,
) -> torch.Tensor:
    npu = torch_npu()
    k = weight.shape[0]
    reciprocal = 1 / input_scale.repeat(k)  # [K] in the model dtype
    offset = input_offset.repeat(k).to(reciprocal.dtype)  # [K]
    if deq_scale.is_floating_point():
        # The kernel takes what a checkpoint stores: float32 for bf16 output, int64-packed for fp16.
        deq_scale = pack_deq_scale(deq_scale) if x.dtype == torch.float16 else deq_scale.float()
    x_q = npu.npu_quantize(x, reciprocal, offset, torch.qint8, -1, False)
    return npu.npu_quant_matmul(x_q, weight, deq_scale, bias=quant_bias, output_dtype=x.dtype)


@REGISTRY.register("w8a8_dynamic_linear", Backend.NPU, supports=_npu_output_dtype)
def w8a8_dynamic_linear_npu(
    x: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    npu = torch_npu()
    flat = _flat(x)
    x_q, token_scale = npu.npu_dynamic_quant(flat)
    y = npu.npu_quant_matmul(x_q, weight, weight_scale, pertoken_scale=token_scale, bias=bias, output_dtype=x.dtype)
    return y.reshape(*x.shape[:-1], weight.shape[1])
