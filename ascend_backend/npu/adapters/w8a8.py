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

    w8a8_linear, more forms
      quantize_reciprocal_float_bias  compressed-tensors checkpoints (w8a8.py@v0.12.0rc1 on): deq_scale
                           (input_scale * weight_scale) and a float bias, in the model's dtype, instead of quant_bias;
                           a float16 model gets the float16 row's form instead (see below)
      quant_matmul_prequantized       x arrives int8 (the norm before ran npu_add_rms_norm_quant): the
                           quantize is skipped, npu_quant_matmul alone (`x.dtype != torch.int8` in apply)
    w8a8_dynamic_linear, v0.22.1rc1 on
      dynamic_quant_int8     npu_dynamic_quant(x, dst_type=torch.int8) (act_quant_type), then the same matmul
    quant_weight_layout (process_weights_after_loading, once per layer)
      nz_cast                npu_format_cast(weight, 29): FRACTAL_NZ (maybe_trans_nz / is_enable_nz per release)
      nz_cast_transposed     310P (_310p/quantization/methods/w8a8_static.py@v0.15.0rc1):
                             npu_format_cast(weight [N, K], 29).transpose(0, 1): an NZ [N, K] handed over as [K, N]
    add_rms_norm_quant (the norm before a static W8A8 linear, layernorm.py@v0.11.0 / the fusion pass from v0.12.0rc1)
      npu_add_rms_norm_quant       npu_add_rms_norm_quant(x, residual, weight, scale[K], offset[K], epsilon=eps)
                                   -> (int8, _, x + residual); div_mode default True: y / scale + offset
      add_rms_norm_then_quantize   unfused (an eager run): npu_add_rms_norm, then npu_quantize as the linear would

`[K]` is the per-tensor parameter repeated to the input width, as `process_weights_after_loading` does.
`weight` is [K, N] int8 (vllm-ascend transposes the checkpoint's [N, K] once after loading, and so do our
layers; it also casts it to FRACTAL_NZ where NZ is enabled, a layout npu_quant_matmul takes as well as
ND, which is what we pass). A float deq_scale is converted to what a checkpoint stores for the output
dtype (float32 for bfloat16, int64-packed for float16). npu_quant_matmul writes no float32, so float32
activations run the native integer path (`ascend_backend.quantization.ops`, the reference).

Every npu_quant_matmul call keeps to the kernel's dtype table (data/kernel_limits.json, from op-plugin's
torch_npu-npu_quant_matmul.md): a float16 output takes its scale as float32 or int64 only, never float16.
Two of vllm-ascend's calls break that for float16 models, and there we follow the table, not vllm-ascend:
W8A8_DYNAMIC passes the float16 weight_scale (w8a8_dynamic.py@v0.13.0:87; the kernel refuses it with
161002 "Tensor scale not implemented for DT_FLOAT16", vllm-ascend #7443), so a float16 model gets a
float32 scale and bias; the compressed-tensors form passes a float16 deq_scale and bias
(w8a8_static.py@v0.18.0:130, 159), so a float16 model gets the int64-packed deq_scale and the int32
quant_bias of the table's float16 row, which compute the same values.
"""

from __future__ import annotations

import torch

from ascend_backend.npu.guard import HALF_DTYPES, dtype_name, npu_op
from ascend_backend.platform.kernels import CallFacts, kernels_typical
from ascend_backend.platform.limits import CallShape
from ascend_backend.quantization import ops as _declared  # noqa: F401  (declares the ops adapted here)
from ascend_backend.quantization.arithmetic import pack_deq_scale, unpack_deq_scale
from ascend_backend.quantization.ops import output_dtype

# torch_npu's format code of FRACTAL_NZ (ACL_FORMAT_FRACTAL_NZ in vllm_ascend/utils.py).
ACL_FORMAT_FRACTAL_NZ = 29


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


def _quantize_reciprocal_float_bias(npu, x, weight, input_scale, input_offset, deq_scale, quant_bias):
    # compressed-tensors form (w8a8_static.py@v0.18.0:159): deq_scale = input_scale * weight_scale in the model's
    # dtype, and the layer's float bias (quant_bias * deq_scale is that bias for a checkpoint folded to ours).
    if x.dtype == torch.float16:
        # The kernel's float16-output row takes an int64/float32 scale and an int32 bias only: vllm-ascend's
        # float16 deq_scale would fail (161002), so this is quantize_reciprocal's call, the same values.
        return _quantize_reciprocal(npu, x, weight, input_scale, input_offset, deq_scale, quant_bias)
    k = weight.shape[0]
    reciprocal = 1 / input_scale.repeat(k)
    offset = input_offset.repeat(k).to(reciprocal.dtype)
    x_q = npu.npu_quantize(x, reciprocal, offset, torch.qint8, -1, False)
    scale = unpack_deq_scale(deq_scale) if deq_scale.dtype == torch.int64 else deq_scale.float()
    bias = (quant_bias.float() * scale).to(x.dtype)  # w8a8_static.py@v0.18.0:130: the layer's bias, model dtype
    return npu.npu_quant_matmul(x_q, weight, scale.to(x.dtype), bias=bias, output_dtype=x.dtype)


def _quant_matmul_prequantized(npu, x, weight, input_scale, input_offset, deq_scale, quant_bias):
    dtype = output_dtype(x, deq_scale)
    stored = (
        deq_scale
        if not deq_scale.is_floating_point()
        else (pack_deq_scale(deq_scale) if dtype == torch.float16 else deq_scale.float())
    )
    return npu.npu_quant_matmul(x, weight, stored, bias=quant_bias, output_dtype=dtype)


def _pertoken_scale_and_bias(x, weight_scale, bias):
    """weight_scale and bias as the per-token row of the kernel's dtype table takes them for x's output dtype.

    bfloat16: as vllm-ascend passes them, in the model dtype (w8a8_dynamic.py@v0.13.0:87). float16: float32;
    vllm-ascend's float16 weight_scale is refused by the kernel (161002, vllm-ascend #7443), and the table's
    float16 row lists a float32 bias where its versions disagree on float16 (torch_npu-npu_quant_matmul.md).
    """
    if x.dtype != torch.float16:
        return weight_scale, bias
    return weight_scale.float(), None if bias is None else bias.float()


def _dynamic_quant(npu, x, weight, weight_scale, bias):
    flat = x.reshape(-1, x.shape[-1])  # [T, K]
    x_q, token_scale = npu.npu_dynamic_quant(flat)
    scale, bias = _pertoken_scale_and_bias(x, weight_scale, bias)
    y = npu.npu_quant_matmul(x_q, weight, scale, pertoken_scale=token_scale, bias=bias, output_dtype=x.dtype)
    return y.reshape(*x.shape[:-1], weight.shape[1])


def _dynamic_quant_int8(npu, x, weight, weight_scale, bias):
    flat = x.reshape(-1, x.shape[-1])  # [T, K]
    x_q, token_scale = npu.npu_dynamic_quant(flat, dst_type=torch.int8)
    scale, bias = _pertoken_scale_and_bias(x, weight_scale, bias)
    y = npu.npu_quant_matmul(x_q, weight, scale, pertoken_scale=token_scale, bias=bias, output_dtype=x.dtype)
    return y.reshape(*x.shape[:-1], weight.shape[1])


def _nz_cast(npu, weight, scheme):
    return npu.npu_format_cast(weight, ACL_FORMAT_FRACTAL_NZ)


def _nz_cast_transposed(npu, weight, scheme):
    # 310P keeps the checkpoint's [N, K] in NZ and hands npu_quant_matmul its transpose.
    return npu.npu_format_cast(weight.transpose(0, 1).contiguous(), ACL_FORMAT_FRACTAL_NZ).transpose(0, 1)


def _npu_add_rms_norm_quant(npu, x, residual, weight, eps, input_scale, input_offset):
    k = x.shape[-1]
    scale = input_scale.repeat(k)  # [K] in the model dtype (aclnn_input_scale)
    offset = input_offset.repeat(k).to(scale.dtype)  # [K] (aclnn_input_offset)
    # No beta: vllm-ascend passes none at v0.10.0rc1-v0.11.0rc0 (layernorm.py@v0.10.0rc1:49-55), whose pinned
    # torch_npu 2.7.1.dev20250724 declares none (op-plugin 19eeddb7); from v0.11.0rc1 it passes beta=bias, the
    # norm's bias that only anti-outlier checkpoints carry (layernorm.py@v0.11.0:53), None here, the default.
    x_q, _, summed = npu.npu_add_rms_norm_quant(x, residual, weight, scale, offset, epsilon=eps)
    return x_q, summed


def _add_rms_norm_then_quantize(npu, x, residual, weight, eps, input_scale, input_offset):
    y, _rstd, summed = npu.npu_add_rms_norm(x, residual, weight, eps)
    k = x.shape[-1]
    reciprocal = 1 / input_scale.repeat(k)
    offset = input_offset.repeat(k).to(reciprocal.dtype)
    return npu.npu_quantize(y, reciprocal, offset, torch.qint8, -1, False), summed


def _linear_facts(x, *_args) -> CallFacts:
    return kernels_typical(prequantized=x.dtype == torch.int8)


def _static_shape(x, *_args) -> CallShape:
    return CallShape(dtype=dtype_name(x), pertoken=False)


def _dynamic_shape(x, weight, weight_scale, bias) -> CallShape:
    return CallShape(dtype=dtype_name(x), pertoken=True)


def _layout_facts(weight, scheme="W8A8") -> CallFacts:
    return kernels_typical(scheme=scheme)


w8a8_linear_npu = npu_op(
    "w8a8_linear",
    {
        "quantize_divide": _quantize_divide,
        "quantize_reciprocal": _quantize_reciprocal,
        "quantize_reciprocal_float_bias": _quantize_reciprocal_float_bias,
        "quant_matmul_prequantized": _quant_matmul_prequantized,
    },
    dtypes=(*HALF_DTYPES, torch.int8),
    facts=_linear_facts,
    shape=_static_shape,
)
w8a8_dynamic_linear_npu = npu_op(
    "w8a8_dynamic_linear",
    {"dynamic_quant": _dynamic_quant, "dynamic_quant_int8": _dynamic_quant_int8},
    shape=_dynamic_shape,
)
quant_weight_layout_npu = npu_op(
    "quant_weight_layout",
    {"nz_cast": _nz_cast, "nz_cast_transposed": _nz_cast_transposed},
    dtypes=(torch.int8,),
    facts=_layout_facts,
)
add_rms_norm_quant_npu = npu_op(
    "add_rms_norm_quant",
    {"npu_add_rms_norm_quant": _npu_add_rms_norm_quant, "add_rms_norm_then_quantize": _add_rms_norm_then_quantize},
)
