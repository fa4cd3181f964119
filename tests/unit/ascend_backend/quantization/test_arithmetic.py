"""The integer arithmetic of W8A8 against exact int64 / float64 references."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ascend_backend.quantization.arithmetic import (
    int8_matmul,
    pack_deq_scale,
    quantize_dynamic,
    quantize_static,
    quantize_weight_per_channel,
    static_activation_params,
    unpack_deq_scale,
)


def int64_reference(x_q: torch.Tensor, w_t: torch.Tensor) -> torch.Tensor:
    return x_q.to(torch.int64) @ w_t.to(torch.int64)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (1, 576, 192), (7, 577, 33), (32, 1536, 64), (5, 3000, 17)])
def test_int8_matmul_is_exact_on_random_operands(m, k, n):
    g = torch.Generator().manual_seed(m * k + n)
    x = torch.randint(-128, 128, (m, k), generator=g, dtype=torch.int8)
    w = torch.randint(-128, 128, (k, n), generator=g, dtype=torch.int8)
    out = int8_matmul(x, w)
    assert out.dtype == torch.int32
    assert torch.equal(out.to(torch.int64), int64_reference(x, w))


@pytest.mark.parametrize("k", [1023, 1024, 1025, 2048, 4097])
def test_int8_matmul_is_exact_at_the_extremes(k):
    # (-128) * (-128) everywhere: each 1024-chunk sums to exactly 2**24, the edge of float32's exact integers;
    # mixed signs make partial sums swing across zero.
    x = torch.full((2, k), -128, dtype=torch.int8)
    w = torch.full((k, 3), -128, dtype=torch.int8)
    w[:, 1] = 127
    w[::2, 2] = 127
    out = int8_matmul(x, w)
    assert torch.equal(out.to(torch.int64), int64_reference(x, w))
    assert int(out[0, 0]) == k * 128 * 128


def test_int8_matmul_refuses_other_dtypes_and_shapes():
    with pytest.raises(TypeError, match="int8"):
        int8_matmul(torch.zeros(2, 3), torch.zeros(3, 2, dtype=torch.int8))
    with pytest.raises(ValueError, match="inner sizes"):
        int8_matmul(torch.zeros(2, 3, dtype=torch.int8), torch.zeros(4, 2, dtype=torch.int8))


def test_deq_scale_packing_matches_the_float32_bit_pattern():
    scales = torch.tensor([1.0, 3.0517578125e-05, 0.0123456789, 7.5e-3, 1e-9], dtype=torch.float32)
    packed = pack_deq_scale(scales)
    # Independent route: numpy's view of the float32 bytes as int32, widened to int64.
    expected = np.frombuffer(scales.numpy().astype(np.float32).tobytes(), dtype=np.int32).astype(np.int64)
    assert packed.dtype == torch.int64
    assert packed.tolist() == expected.tolist()
    assert torch.equal(unpack_deq_scale(packed), scales)
    assert int(packed[0]) == 0x3F800000  # 1.0f


def test_unpack_refuses_a_float_tensor():
    with pytest.raises(TypeError, match="int64"):
        unpack_deq_scale(torch.ones(3))


def test_static_activation_params_are_symmetric_by_default_worked_example():
    scale, offset = static_activation_params(-1.0, 3.0, torch.float32)
    assert float(scale) == pytest.approx(3.0 / 127, rel=1e-7) and offset == 0
    x_q = quantize_static(torch.tensor([-3.0, -1.0, 0.0, 3.0]), 1 / scale, offset)
    assert x_q.tolist() == [-127, -42, 0, 127]  # round(-1 / (3/127)) = round(-42.33)
    scale, offset = static_activation_params(0.0, 0.0, torch.bfloat16)  # degenerate: a constant zero input
    assert (float(scale), offset) == (1.0, 0)


def test_asymmetric_static_activation_params_worked_example():
    scale, offset = static_activation_params(-1.0, 3.0, torch.float32, symmetric=False)
    assert float(scale) == pytest.approx(4.0 / 255, rel=1e-7)
    assert offset == -64  # round(-128 + 1 / (4/255)) = round(-64.25)
    x_q = quantize_static(torch.tensor([-1.0, 0.0, 3.0]), 1 / scale, offset)
    assert x_q.tolist() == [-128, -64, 127]


@pytest.mark.parametrize("symmetric", [True, False])
def test_static_activation_params_include_zero_and_are_representable(symmetric):
    scale, offset = static_activation_params(0.5, 2.0, torch.bfloat16, symmetric=symmetric)  # widened to [0, 2]
    assert float(scale) == float(scale.to(torch.bfloat16).float())
    assert offset == (0 if symmetric else -128)
    scale, offset = static_activation_params(0.0, 0.0, torch.bfloat16, symmetric=symmetric)
    assert float(scale) == 1.0 and -128 <= offset <= 127


def test_weight_quantization_error_is_within_half_a_step():
    g = torch.Generator().manual_seed(1)
    w = torch.randn(48, 80, generator=g, dtype=torch.float64) * torch.logspace(-3, 1, 48, dtype=torch.float64)[:, None]
    w[5] = 0.0  # an all-zero row
    q, scale = quantize_weight_per_channel(w, torch.bfloat16)
    assert q.dtype == torch.int8 and q.abs().max() <= 127
    assert torch.equal(scale, scale.to(torch.bfloat16).float())  # exact in the checkpoint dtype
    assert float(scale[5]) == 1.0 and bool((q[5] == 0).all())
    err = (q.double() * scale.double()[:, None] - w).abs()
    # Half a step, plus the clamp when the bf16-rounded scale came out below max|w|/127.
    bound = 0.5 * scale.double()[:, None] + (w.abs().amax(1, keepdim=True) - 127 * scale.double()[:, None]).clamp(min=0)
    assert bool((err <= bound + 1e-12).all())


def test_dynamic_quantization_per_token_against_float64():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(6, 40, generator=g) * torch.tensor([1e-3, 0.1, 1.0, 10.0, 100.0, 0.0])[:, None]
    q, scale = quantize_dynamic(x)
    x64 = x.double()
    amax = x64.abs().amax(1)
    assert torch.allclose(scale.double(), amax / 127, rtol=1e-6)
    assert scale[5] == 0 and bool((q[5] == 0).all())
    live = amax > 0
    expected = torch.round(x64[live] / (amax[live] / 127)[:, None]).clamp(-127, 127)
    assert (q[live].double() - expected).abs().max() <= 1  # one step only where float32 rounds across a .5
    assert (q[live].double() == expected).float().mean() > 0.99
