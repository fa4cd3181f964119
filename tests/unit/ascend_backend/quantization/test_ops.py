"""The W8A8 registry ops: native integer path vs an exact int64 reference and an independent float64 formula."""

from __future__ import annotations

import pytest
import torch

from ascend_backend import registry
from ascend_backend.quantization import ActivationRange, QuantType, quantize_linear
from ascend_backend.quantization.arithmetic import pack_deq_scale
from ascend_backend.quantization.ops import w8a8_dynamic_linear, w8a8_linear


def layer_and_input(seed: int, tokens: int = 9, k: int = 320, n: int = 96, bias: bool = True):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=g) / k**0.5
    b = 0.1 * torch.randn(n, generator=g) if bias else None
    x = torch.randn(tokens, k, generator=g)
    return w, b, x


def static_args(layer, dtype=torch.float32):
    return (
        layer.weight.t().contiguous(),
        layer.input_scale.reshape(1).to(dtype),
        torch.tensor([layer.input_offset], dtype=torch.int8),
        layer.static_deq_scale(),
        layer.static_quant_bias(),
    )


def float64_quantize_static(x: torch.Tensor, scale: float, offset: int) -> torch.Tensor:
    return torch.round(x.double() * (1.0 / scale) + offset).clamp(-128, 127)


def test_static_integer_path_matches_int64_reference():
    w, b, x = layer_and_input(0)
    layer = quantize_linear(w, b, QuantType.W8A8, torch.float32, ActivationRange(float(x.min()), float(x.max()), 9))
    weight_t, scale, offset, deq, qbias = static_args(layer)
    out = w8a8_linear(x, weight_t, scale, offset, deq, qbias)
    x_q = float64_quantize_static(x, float(layer.input_scale), layer.input_offset).to(torch.int64)
    acc = x_q @ layer.weight.t().to(torch.int64) + qbias.to(torch.int64)  # exact integers
    expected = acc.double() * deq.double()
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), expected, rtol=2e-7, atol=0)


def test_static_output_matches_the_float64_dequantization_formula():
    w, b, x = layer_and_input(1)
    layer = quantize_linear(w, b, QuantType.W8A8, torch.float32, ActivationRange(float(x.min()), float(x.max()), 9))
    out = w8a8_linear(x, *static_args(layer)).double()
    s_x, z = float(layer.input_scale), layer.input_offset
    x_q = float64_quantize_static(x, s_x, z)
    w_q = layer.weight.double()
    s_w = layer.weight_scale.double()
    expected = s_x * s_w * ((x_q - z) @ w_q.t()) + b.double()  # y = s_x s_w (x_q - z) w_q^T + b
    # The bias is folded into an int32 quant_bias: at most half a deq_scale step per output.
    tolerance = 0.5 * s_x * s_w + 1e-6 * expected.abs()
    assert bool(((out - expected).abs() <= tolerance).all())
    # and the layer still is the float layer, up to int8 resolution
    reference = x.double() @ w.double().t() + b.double()
    assert (out - reference).norm() / reference.norm() < 0.02


def test_dynamic_output_matches_the_float64_formula():
    w, b, x = layer_and_input(2)
    x[3] *= 50.0  # one loud token must not change the others' scales
    layer = quantize_linear(w, b, QuantType.W8A8_DYNAMIC, torch.float32)
    out = w8a8_dynamic_linear(x, layer.weight.t().contiguous(), layer.weight_scale, layer.bias).double()
    x64 = x.double()
    s_t = x64.abs().amax(1) / 127
    x_q = torch.round(x64 / s_t[:, None]).clamp(-127, 127)
    expected = (x_q @ layer.weight.double().t()) * layer.weight_scale.double() * s_t[:, None] + b.double()
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_outputs_round_the_float32_result(dtype):
    w, b, x = layer_and_input(3)
    layer = quantize_linear(w, b, QuantType.W8A8, dtype, ActivationRange(float(x.min()), float(x.max()), 9))
    weight_t, scale, offset, deq, qbias = static_args(layer, dtype)
    x_low = x.to(dtype)
    out = w8a8_linear(x_low, weight_t, scale, offset, deq, qbias)
    assert out.dtype == dtype
    # fp16 models carry deq_scale int64-packed; the op must read it as the same float32 scales.
    packed = w8a8_linear(x_low, weight_t, scale, offset, pack_deq_scale(deq), qbias)
    assert torch.equal(out, packed)
    # Exact int64 integers, then the float32 dequantization and one rounding to the output dtype.
    recip = 1 / scale.float()
    x_q = torch.round(x_low.float() * recip + float(offset)).clamp(-128, 127).to(torch.int64)
    full = ((x_q @ layer.weight.t().to(torch.int64) + qbias).float() * deq).to(dtype)
    torch.testing.assert_close(out, full, rtol=0, atol=0)


def test_ops_keep_leading_dimensions():
    w, b, x = layer_and_input(4, tokens=6)
    x3 = x.reshape(2, 3, -1)
    dyn = quantize_linear(w, b, QuantType.W8A8_DYNAMIC, torch.float32)
    out = w8a8_dynamic_linear(x3, dyn.weight.t().contiguous(), dyn.weight_scale, None)
    assert out.shape == (2, 3, 96)
    flat = w8a8_dynamic_linear(x, dyn.weight.t().contiguous(), dyn.weight_scale, None)
    assert torch.equal(out.reshape(6, 96), flat)


def test_both_ops_are_registry_ops_with_an_npu_kernel():
    table = registry.describe("cpu").set_index("op")
    for op in ("w8a8_linear", "w8a8_dynamic_linear"):
        assert table.loc[op, "registered"] == "native, npu"
        assert table.loc[op, "chosen"] == "native"
    registry.reset_stats()
    w, b, x = layer_and_input(5)
    dyn = quantize_linear(w, b, QuantType.W8A8_DYNAMIC, torch.float32)
    w8a8_dynamic_linear(x, dyn.weight.t().contiguous(), dyn.weight_scale, dyn.bias)
    assert registry.stats()["w8a8_dynamic_linear"] == {"native": 1}


def test_a_prequantized_input_skips_the_quantize_and_stays_exact_in_int64():
    # w8a8_static.py@v0.18.0:133: an int8 x (a fused norm-quant ran before) goes straight to npu_quant_matmul.
    from ascend_backend.quantization.ops import add_rms_norm_quant

    w, b, x = layer_and_input(3)
    layer = quantize_linear(w, b, QuantType.W8A8, torch.float32, ActivationRange(float(x.min()), float(x.max()), 9))
    weight_t, scale, offset, deq, qbias = static_args(layer, torch.bfloat16)
    residual = torch.zeros_like(x)
    x_q, summed = add_rms_norm_quant(x, residual, torch.ones(x.shape[-1]), 1e-6, scale, offset)
    assert x_q.dtype == torch.int8 and torch.equal(summed, x)
    out = w8a8_linear(x_q, weight_t, scale, offset, deq, qbias)
    assert out.dtype == torch.bfloat16  # a float32 deq_scale is the bfloat16 model's form
    acc = x_q.to(torch.int64) @ weight_t.to(torch.int64) + qbias.to(torch.int64)
    torch.testing.assert_close(out.double(), (acc.double() * deq.double()).to(torch.bfloat16).double())
    packed = w8a8_linear(x_q, weight_t, scale, offset, pack_deq_scale(deq), qbias)
    assert packed.dtype == torch.float16  # the int64-packed deq_scale is the float16 model's form


def test_the_fused_norm_quant_matches_an_independent_float64_formula():
    from ascend_backend.quantization.ops import add_rms_norm_quant

    g = torch.Generator().manual_seed(7)
    x, residual = torch.randn(5, 64, generator=g), torch.randn(5, 64, generator=g)
    weight = 1 + 0.1 * torch.randn(64, generator=g)
    scale, offset = torch.tensor([0.02]), torch.tensor([3], dtype=torch.int8)
    x_q, summed = add_rms_norm_quant(x, residual, weight, 1e-6, scale, offset)
    s = x.double() + residual.double()
    normed = s / torch.sqrt((s * s).mean(-1, keepdim=True) + 1e-6) * weight.double()
    expected = torch.round(normed / 0.02 + 3).clamp(-128, 127)  # npu_add_rms_norm_quant, div_mode=True
    assert (x_q.double() - expected).abs().max() <= 1  # a float32 rounding tie may land one step away
    assert (x_q.double() == expected).float().mean() > 0.99
    torch.testing.assert_close(summed, x + residual)


def test_the_weight_layout_is_the_identity_off_the_npu():
    from ascend_backend.quantization.ops import quant_weight_layout

    weight = torch.randint(-128, 127, (64, 32), dtype=torch.int8)
    assert quant_weight_layout(weight, "W8A8") is weight
