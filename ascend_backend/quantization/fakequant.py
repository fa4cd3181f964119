"""Fake quantization: the rounding of a scheme applied to float tensors, for schemes no kernel here runs.

A scheme's accuracy is measured three ways, and every result says which (`Measured`):

    served      a real vLLM server runs the scheme's kernels (this machine: W8A8 dynamic, W4A16 through
                vLLM's CPU WNA16 kernel)
    executor    the backend's executor runs the integer path of `arithmetic` (W8A8 static and dynamic)
    fake-quant  values are rounded to the scheme's grid and computed in float (W8A16: vLLM's CPU build has
                no int8 weight-only kernel; W4A8; the int8 KV cache "C8")

Fake quantization is exact about what a scheme loses to rounding, and silent about what its kernel does
beyond that (accumulation order, fused dequantization): on Ascend, the served number is the one to trust.

Conventions (symmetric, like the W8A8 weights in `arithmetic`):

    int8 per channel   s[n]    = max_k |W[n, k]| / 127,        q = clamp(round(W / s), -127, 127)
    int4 per group     s[n, g] = max_{k in g} |W[n, k]| / 7,   q = clamp(round(W / s), -8, 7)
                       (group g = input columns [g * group_size, (g + 1) * group_size))
    int8 per token     (W4A8's activations) `arithmetic.quantize_dynamic`
    KV int8 "C8"       per channel (kv head x head dim), static: s[c] = max |x[:, c]| / 127 over calibration

An all-zero channel or group gets scale 1 (its values stay exactly 0).
"""

from __future__ import annotations

import enum

import torch
from torch import nn

from ascend_backend.quantization.arithmetic import INT8_MAX, quantize_dynamic, representable

INT4_MIN, INT4_MAX = -8, 7


class Measured(str, enum.Enum):
    """How a scheme's accuracy number was obtained (see the module docstring)."""

    SERVED = "served"
    EXECUTOR = "executor"
    FAKE_QUANT = "fake-quant"


def _scale(amax: torch.Tensor, qmax: int, dtype: torch.dtype) -> torch.Tensor:
    return representable(torch.where(amax > 0, amax / qmax, torch.ones_like(amax)), dtype)


def quantize_weight_groups(
    weight: torch.Tensor, bits: int, group_size: int | None, scale_dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """weight [out, in] -> (q int8 [out, in] holding values of `bits` bits, scale [out, groups]).

    `group_size` None = one group per output channel (per-channel). int8: [-127, 127]; int4: [-8, 7].
    Example: bits 4, group_size 2, row [0.7, -1.4, 0.0, 0.0] -> scales [0.2, 1.0], q [4, -7, 0, 0]
    (-1.4 / 0.2 = -7).
    """
    if bits not in (4, 8):
        raise ValueError(f"weight bits {bits}: 4 or 8")
    out_features, in_features = weight.shape
    size = in_features if group_size is None else group_size
    if size < 1 or in_features % size:
        raise ValueError(f"group_size {group_size} must divide the input size {in_features}")
    qmin, qmax = (-INT8_MAX, INT8_MAX) if bits == 8 else (INT4_MIN, INT4_MAX)
    grouped = weight.float().reshape(out_features, in_features // size, size)  # [out, groups, size]
    scale = _scale(grouped.abs().amax(dim=-1), qmax, scale_dtype)  # [out, groups]
    q = torch.round(grouped / scale[..., None]).clamp(qmin, qmax).to(torch.int8)
    return q.reshape(out_features, in_features), scale


def dequantize_weight_groups(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The inverse of quantize_weight_groups: q [out, in] int8, scale [out, groups] -> float32 [out, in]."""
    out_features, in_features = q.shape
    groups = scale.shape[1]
    return (q.float().reshape(out_features, groups, in_features // groups) * scale.float()[..., None]).reshape(
        out_features, in_features
    )


def fake_quant_weight(
    weight: torch.Tensor, bits: int, group_size: int | None, scale_dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """[out, in] float32: the weight as the scheme stores it (rounded to its grid, dequantized); scales rounded
    through `scale_dtype`, the dtype the checkpoint stores them in."""
    return dequantize_weight_groups(*quantize_weight_groups(weight, bits, group_size, scale_dtype))


def fake_quant_per_token(x: torch.Tensor) -> torch.Tensor:
    """x [..., K]: per-token symmetric int8, dequantized (what W4A8's / W8A8_DYNAMIC's inputs keep)."""
    flat = x.reshape(-1, x.shape[-1])
    q, scale = quantize_dynamic(flat)
    return (q.float() * scale[:, None]).to(x.dtype).reshape(x.shape)


def kv_channel_scale(amax: torch.Tensor) -> torch.Tensor:
    """Per-channel C8 scale from the calibrated max |x| of each channel ([kv_heads, head_size])."""
    return torch.where(amax > 0, amax / INT8_MAX, torch.ones_like(amax)).float()


def fake_quant_kv(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x [T, kv_heads, head_size] -> int8 per channel with `scale` [kv_heads, head_size], dequantized."""
    q = torch.round(x.float() / scale).clamp(-INT8_MAX, INT8_MAX)
    return (q * scale).to(x.dtype)


class FakeQuantLinear(nn.Module):
    """A linear whose weight is rounded to a weight grid (W8A16, W4A16) and, for W4A8, whose input is
    rounded per token to int8; computed in float through the registry's `linear` op."""

    def __init__(
        self,
        weight: torch.Tensor,  # [out, in] float
        bias: torch.Tensor | None,  # [out]
        bits: int,
        group_size: int | None,
        *,
        int8_inputs: bool = False,
        scale_dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        rounded = fake_quant_weight(weight, bits, group_size, scale_dtype)
        self.register_buffer("weight", rounded.to(weight.dtype))  # [out, in]
        self.register_buffer("bias", None if bias is None else bias.detach().clone())
        self.int8_inputs = int8_inputs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from ascend_backend import ops

        return ops.linear(fake_quant_per_token(x) if self.int8_inputs else x, self.weight, self.bias)
