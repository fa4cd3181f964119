"""The W8A8 linears on the NPU: the calls vllm-ascend makes for an msmodelslim checkpoint, per the table.

    w8a8_linear (AscendW8A8LinearMethod.apply)
      quantize_divide      v0.8.4rc2 to v0.8.5rc1 (quantization/w8a8.py@v0.8.5rc1):
                             x_q = npu_quantize(x, input_scale[K], input_offset[K] int8, torch.qint8, -1, True)
                             div_mode=True: round(x / scale + offset)
      quantize_reciprocal  v0.9.0rc1 on (quantization/w8a8.py@v0.11.0; the same npu_quantize call in
                           ops/register_custom_ops.py _quantize_impl from v0.13.0rc1, reached from
                           quantization/methods/w8a8_static.py from v0.14.0rc1):
                             x_q = npu_quantize(x, 1 / input_scale[K], input_offset[K], torch.qint8, -1, False)
                             div_mode=False: round(x * (1 / scale) + offset), reciprocal and offset in the model dtype
                           then, both:  npu_quant_matmul(x_q, weight, deq_scale, bias=quant_bias, output_dtype=x.dtype)
    w8a8_dynamic_linear (AscendW8A8DynamicLinearMethod.apply, quantization/w8a8_dynamic.py@v0.11.0)
      dynamic_quant          x_q, token_scale = npu_dynamic_quant(x)   per-token symmetric int8
                             npu_quant_matmul(x_q, weight, weight_scale, pertoken_scale=token_scale, bias=bias,
                                              output_dtype=x.dtype)

`[K]` is the per-tensor parameter repeated to the input width, as `process_weights_after_loading` does.
`weight` is [K, N] int8 (vllm-ascend transposes the checkpoint's [N, K] once after loading, and so do our
layers; it also casts it to FRACTAL_NZ where NZ is enabled, a layout npu_quant_matmul takes as well as
ND, which is what we pass). A float deq_scale is converted to what a checkpoint stores for the output
dtype (float32 for bfloat16, int64-packed for float16). npu_quant_matmul writes no float32, so float32
activations run the native integer path (`ascend_backend.quantization.ops`, the reference).
"""

from __future__ import annotations

import torch

from ascend_backend.npu.guard import npu_op
from ascend_backend.quantization import ops as _declared  # noqa: F401  (declares the ops adapted here)
from ascend_backend.quantization.arithmetic import pack_deq_scale


def _stored_deq_scale(x: torch.Tensor, deq_scale: torch.Tensor) -> torch.Tensor:
    """The deq_scale the kernel takes: as msmodelslim stores it, float32 for bf16 output, int64-packed for fp16."""
    if not deq_scale.is_floating_point():
        return deq_scale
    return pack_deq_scale(deq_scale) if x.dtype == torch.float16 else deq_scale.float()


def _quantize_divide(npu, x, weight, input_scale, input_offset, deq_scale, quant_bias):
    k = weight.shape[0]
    x_q = npu.npu_quantize(x, input_scale.repeat(k), input_offset.repeat(k), torch.qint8, -1, True)
    return npu.npu_quant_matmul(x_q, weight, _stored_deq_scale(x, deq_scale), bias=quant_bias, output_dtype=x.dtype)


def _quantize_reciprocal(npu, x, weight, input_scale, input_offset, deq_scale, quant_bias):
    k = weight.shape[0]
    reciprocal = 1 / input_scale.repeat(k)  # [K] in the model dtype
    offset = input_offset.repeat(k).to(reciprocal.dtype)  # [K]
    x_q = npu.npu_quantize(x, reciprocal, offset, torch.qint8, -1, False)
    return npu.npu_quant_matmul(x_q, weight, _stored_deq_scale(x, deq_scale), bias=quant_bias, output_dtype=x.dtype)


def _dynamic_quant(npu, x, weight, weight_scale, bias):
    flat = x.reshape(-1, x.shape[-1])  # [T, K]
    x_q, token_scale = npu.npu_dynamic_quant(flat)
    y = npu.npu_quant_matmul(x_q, weight, weight_scale, pertoken_scale=token_scale, bias=bias, output_dtype=x.dtype)
    return y.reshape(*x.shape[:-1], weight.shape[1])


w8a8_linear_npu = npu_op(
    "w8a8_linear", {"quantize_divide": _quantize_divide, "quantize_reciprocal": _quantize_reciprocal}
)
w8a8_dynamic_linear_npu = npu_op("w8a8_dynamic_linear", {"dynamic_quant": _dynamic_quant})
