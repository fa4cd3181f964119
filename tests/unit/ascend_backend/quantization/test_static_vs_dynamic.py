"""Static (one scale per tensor) against dynamic (one per token) W8A8 on outlier-heavy activations.

LLM activations carry a few tokens with huge values in a few channels. A static scale calibrated to
cover them leaves ordinary tokens a handful of int8 levels; per-token scales are not affected. Errors
are measured against the float64 linear, on the ordinary tokens.
"""

from __future__ import annotations

import torch

from ascend_backend.quantization import ActivationRange, QuantType, quantize_linear
from ascend_backend.quantization.ops import w8a8_dynamic_linear, w8a8_linear

K, N = 256, 64


def activations(outliers: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """x [64, K] with normal rows; with outliers, rows 0..3 carry +-80 in channels 7 and 100. -> (x, normal-row mask)."""
    g = torch.Generator().manual_seed(11)
    x = torch.randn(64, K, generator=g)
    normal = torch.ones(64, dtype=torch.bool)
    if outliers:
        x[:4, 7] = 80.0
        x[:4, 100] = -80.0
        normal[:4] = False
    return x, normal


def relative_errors(x: torch.Tensor, normal: torch.Tensor) -> tuple[float, float]:
    g = torch.Generator().manual_seed(12)
    w = torch.randn(N, K, generator=g) / K**0.5
    reference = x.double() @ w.double().t()
    static = quantize_linear(
        w, None, QuantType.W8A8, torch.float32, ActivationRange(float(x.min()), float(x.max()), 64)
    )
    y_static = w8a8_linear(
        x,
        static.weight.t().contiguous(),
        static.input_scale.reshape(1),
        torch.tensor([static.input_offset], dtype=torch.int8),
        static.static_deq_scale(),
        static.static_quant_bias(),
    )
    dynamic = quantize_linear(w, None, QuantType.W8A8_DYNAMIC, torch.float32)
    y_dynamic = w8a8_dynamic_linear(x, dynamic.weight.t().contiguous(), dynamic.weight_scale)

    def err(y: torch.Tensor) -> float:
        return float((y.double()[normal] - reference[normal]).norm() / reference[normal].norm())

    return err(y_static), err(y_dynamic)


def test_outliers_wreck_static_scales_but_not_per_token_ones():
    static_err, dynamic_err = relative_errors(*activations(outliers=True))
    print(f"outliers: static {static_err:.4f}, dynamic {dynamic_err:.4f}")
    assert dynamic_err < 0.02
    assert static_err > 5 * dynamic_err


def test_without_outliers_static_is_as_good_as_dynamic():
    static_err, dynamic_err = relative_errors(*activations(outliers=False))
    print(f"no outliers: static {static_err:.4f}, dynamic {dynamic_err:.4f}")
    assert static_err < 0.02 and dynamic_err < 0.02
    assert static_err < 2 * dynamic_err
