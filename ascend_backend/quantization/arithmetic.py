"""The integer arithmetic of W8A8, as plain tensor functions (the native kernels and the writers share them).

Conventions (the ones CANN's kernels use, as vllm-ascend calls them):

    weight   w_q = clamp(round(W / s_w[n]), -127, 127)         per output channel n, symmetric
    static   x_q = clamp(round(x * (1 / s_x) + z_x), -128, 127)   one (s_x, z_x) per tensor,
                                                              z_x = 0 unless calibrated asymmetrically
    dynamic  x_q = clamp(round(x / s_t), -127, 127), s_t = max|x_t| / 127   per token t
    matmul   acc[t, n] = sum_k x_q[t, k] * w_q[n, k]          int8 x int8 -> int32, exact

and the float result is recovered as

    static   y = (acc + quant_bias[n]) * deq_scale[n],  deq_scale = s_x * s_w,
             quant_bias = round(b / deq_scale) - z_x * sum_k w_q[n, k]
    dynamic  y = acc * s_w[n] * s_t + b

`round` is round-half-to-even (torch.round); exact .5 ties are the only inputs where a kernel that
rounds half away from zero can land one step apart.
"""

from __future__ import annotations

import torch

INT8_MIN, INT8_MAX = -128, 127
# int8 x int8 products are at most 2**14 in magnitude, so float32 sums of up to 1024 of them stay within
# 2**24, where every integer is exact: a float32 GEMM over K-chunks of 1024 is exact integer arithmetic.
_EXACT_FP32_CHUNK = 1024


def representable(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float32 values rounded through `dtype`: scales stored in a bf16/fp16 checkpoint read back unchanged."""
    return values.float().to(dtype).float()


def quantize_weight_per_channel(weight: torch.Tensor, scale_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """weight [out, in] float -> (int8 [out, in], scale float32 [out]), symmetric per output channel.

    The scale is rounded through `scale_dtype` before the weight is divided by it, so the int8 values
    are the right ones for the scale the checkpoint will actually hold. An all-zero row gets scale 1.
    """
    w = weight.float()
    amax = w.abs().amax(dim=1)  # [out]
    scale = representable(torch.where(amax > 0, amax / INT8_MAX, torch.ones_like(amax)), scale_dtype)
    q = torch.round(w / scale[:, None]).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
    return q, scale


def static_activation_params(
    minimum: float, maximum: float, scale_dtype: torch.dtype, *, symmetric: bool = True
) -> tuple[torch.Tensor, int]:
    """Observed range -> (scale [] float32, zero point) for per-tensor int8.

    Symmetric (the default): z = 0 and s = max(|minimum|, |maximum|) / 127, the weights' convention, so
    `round(x / s)` stays within [-127, 127]. It is the default because vllm-ascend's compressed-tensors
    path takes static activations only when symmetric (`_is_static_tensor_w8a8`,
    vllm_ascend/quantization/compressed_tensors_config.py, v0.23.0:380-389, the same since
    compressed-tensors support began in v0.12.0rc1), while vLLM's CPU backend and msmodelslim's layout
    take z = 0 like any other offset: one calibration then serves every path.
    Example: range [-1.0, 3.0] -> s = 3/127, z = 0; -1.0 -> round(-42.33) = -42.

    Asymmetric (`symmetric=False`): all 256 levels cover the range, widened to include 0 so that 0.0 is
    exactly representable (padding, ReLU zeros); `round(x / s) + z` maps `minimum` to about -128 and
    `maximum` to about 127. Finer for one-sided ranges, but only msmodelslim's layout (input_offset)
    and vLLM's CPU backend (input_zero_point) can carry z.
    Example: range [-1.0, 3.0] -> s = 4/255, z = round(-128 + 1.0 / s) = -64.
    """
    lo, hi = min(float(minimum), 0.0), max(float(maximum), 0.0)
    if symmetric:
        amax = max(-lo, hi)
        return representable(torch.tensor(amax / INT8_MAX if amax > 0 else 1.0), scale_dtype), 0
    span = hi - lo
    scale = representable(torch.tensor(span / (INT8_MAX - INT8_MIN) if span > 0 else 1.0), scale_dtype)
    offset = int(torch.round(torch.tensor(INT8_MIN - lo / float(scale), dtype=torch.float64)).clamp(INT8_MIN, INT8_MAX))
    return scale, offset


def quantize_static(x: torch.Tensor, scale_reciprocal: torch.Tensor, offset: torch.Tensor | float) -> torch.Tensor:
    """x [..., K] -> int8, `round(x * scale_reciprocal + offset)` in float32 (npu_quantize, div_mode=False).

    `scale_reciprocal` and `offset` broadcast over the last dim ([K] or a scalar). The native op passes
    `1 / s_x` in float32; vllm-ascend hands the kernel `1 / input_scale` rounded to the model's dtype.
    """
    y = x.float() * scale_reciprocal.float() + (offset.float() if isinstance(offset, torch.Tensor) else offset)
    return torch.round(y).clamp(INT8_MIN, INT8_MAX).to(torch.int8)


def quantize_dynamic(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [T, K] -> (int8 [T, K], scale float32 [T]), symmetric per token: s_t = max|x_t| / 127.

    A row of zeros gets scale 0 and int8 zeros (its dequantized value is exactly 0 either way).
    """
    x32 = x.float()
    scale = x32.abs().amax(dim=-1) / INT8_MAX  # [T]
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.round(x32 / safe.unsqueeze(-1)).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
    return q, scale


def int8_matmul(x_q: torch.Tensor, w_t: torch.Tensor) -> torch.Tensor:
    """x_q [M, K] int8 @ w_t [K, N] int8 -> [M, N] int32, exactly the integer sum of products.

    Computed as float32 GEMMs over K-chunks of 1024 (exact, see _EXACT_FP32_CHUNK) whose partial sums
    are added in int32 — the accumulation an int8 GEMM unit does, at the speed of the float32 BLAS
    (torch 2.13's CPU `_int_mm` measured 12-18x slower at 32 and 512 tokens of SmolLM2's shapes on an
    AVX2 machine). Overflow cannot occur below K = 2**17.
    """
    if x_q.dtype != torch.int8 or w_t.dtype != torch.int8:
        raise TypeError(f"int8_matmul takes int8 operands, got {x_q.dtype} and {w_t.dtype}")
    if x_q.shape[-1] != w_t.shape[0]:
        raise ValueError(f"inner sizes differ: x_q {tuple(x_q.shape)} @ w_t {tuple(w_t.shape)}")
    acc = torch.zeros(x_q.shape[0], w_t.shape[1], dtype=torch.int32, device=x_q.device)
    for start in range(0, x_q.shape[1], _EXACT_FP32_CHUNK):
        stop = start + _EXACT_FP32_CHUNK
        acc += (x_q[:, start:stop].float() @ w_t[start:stop].float()).to(torch.int32)
    return acc


def static_deq_scale(input_scale: torch.Tensor, weight_scale: torch.Tensor) -> torch.Tensor:
    """[out] float32 `s_x * s_w`: what multiplies the int32 accumulator of a static W8A8 layer."""
    return (input_scale.float() * weight_scale.float()).float()


def static_quant_bias(
    weight: torch.Tensor, input_offset: int, deq_scale: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """[out] int32 added to the accumulator before `* deq_scale`: the zero-point term and the float bias.

    (x_q - z) @ w_q^T = acc - z * rowsum(w_q), and b = round(b / deq_scale) * deq_scale up to half a step.
    """
    correction = -input_offset * weight.to(torch.int64).sum(dim=1)  # [out]
    if bias is not None:
        correction = correction + torch.round(bias.double() / deq_scale.double()).to(torch.int64)
    if correction.abs().max() > torch.iinfo(torch.int32).max:
        raise ValueError("quant_bias overflows int32: the bias is too large for this deq_scale")
    return correction.to(torch.int32)


def pack_deq_scale(deq_scale: torch.Tensor) -> torch.Tensor:
    """[out] float32 -> [out] int64 holding the float32 bit pattern (the fp16-model form of deq_scale).

    CANN's quant matmul takes a float16-output scale as int64 whose low 32 bits are the float32 bits:
    vllm-ascend's `scale_from_float_to_int64` (vllm_ascend/quantization/methods/w8a8_dynamic.py, v0.23.0)
    reinterprets the float32 bytes as int32 and widens to int64; msmodelslim ships fp16 checkpoints'
    deq_scale that way (read as int64 by w8a8_static.py `get_perchannel_param`).
    """
    return deq_scale.float().contiguous().view(torch.int32).to(torch.int64)


def unpack_deq_scale(packed: torch.Tensor) -> torch.Tensor:
    """The inverse of pack_deq_scale: [out] int64 -> [out] float32 (exact)."""
    if packed.dtype != torch.int64:
        raise TypeError(f"a packed deq_scale is int64, got {packed.dtype}")
    return packed.to(torch.int32).contiguous().view(torch.float32)
