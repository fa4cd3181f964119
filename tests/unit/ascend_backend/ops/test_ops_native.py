"""Native ops against independent float64 formulas (numpy), over shapes and dtypes.

Inputs are rounded to the test dtype first and the reference is computed from those rounded values in
float64, so the tolerance measures only the op's own arithmetic in that dtype.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ascend_backend import ops

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# (atol, rtol) per dtype: a few units in the last place of the output dtype.
TOL = {torch.float32: (2e-5, 2e-5), torch.float16: (4e-3, 4e-3), torch.bfloat16: (3e-2, 3e-2)}
SHAPES = [(1, 8), (5, 64), (17, 256)]


def as64(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float64).cpu().numpy()


def assert_close(actual: torch.Tensor, expected: np.ndarray, dtype: torch.dtype) -> None:
    assert actual.dtype == dtype
    atol, rtol = TOL[dtype]
    np.testing.assert_allclose(as64(actual), expected, atol=atol, rtol=rtol)


def rand(*shape: int, dtype: torch.dtype, seed: int, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(*shape, generator=g)).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_rms_norm(dtype, shape):
    x, w = rand(*shape, dtype=dtype, seed=1, scale=3), rand(shape[-1], dtype=dtype, seed=2)
    eps = 1e-6
    xx = as64(x)
    expected = xx / np.sqrt((xx**2).mean(axis=-1, keepdims=True) + eps) * as64(w)
    assert_close(ops.rms_norm(x, w, eps), expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_add_rms_norm(dtype, shape):
    x, r = rand(*shape, dtype=dtype, seed=3), rand(*shape, dtype=dtype, seed=4)
    w = rand(shape[-1], dtype=dtype, seed=5)
    eps = 1e-5
    summed = as64(x) + as64(r)
    expected = summed / np.sqrt((summed**2).mean(axis=-1, keepdims=True) + eps) * as64(w)
    out, residual = ops.add_rms_norm(x, r, w, eps)
    assert_close(out, expected, dtype)
    assert_close(residual, summed, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_silu_and_mul(dtype, shape):
    x = rand(shape[0], 2 * shape[1], dtype=dtype, seed=6, scale=2)
    gate, up = as64(x)[:, : shape[1]], as64(x)[:, shape[1] :]
    expected = gate / (1.0 + np.exp(-gate)) * up
    assert_close(ops.silu_and_mul(x), expected, dtype)


def test_silu_and_mul_rejects_odd_width():
    with pytest.raises(ValueError, match="odd"):
        ops.silu_and_mul(torch.ones(2, 7))


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_exact_and_tanh(dtype):
    x = rand(9, 33, dtype=dtype, seed=7, scale=3)
    xx = as64(x)
    erf = np.vectorize(math.erf)
    assert_close(ops.gelu(x), 0.5 * xx * (1.0 + erf(xx / math.sqrt(2.0))), dtype)
    inner = math.sqrt(2.0 / math.pi) * (xx + 0.044715 * xx**3)
    assert_close(ops.gelu_tanh(x), 0.5 * xx * (1.0 + np.tanh(inner)), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear(dtype, with_bias):
    x, w = rand(6, 48, dtype=dtype, seed=8), rand(20, 48, dtype=dtype, seed=9, scale=0.2)
    b = rand(20, dtype=dtype, seed=10) if with_bias else None
    expected = as64(x) @ as64(w).T + (as64(b) if with_bias else 0.0)
    atol, rtol = TOL[dtype]
    out = ops.linear(x, w, b)
    np.testing.assert_allclose(as64(out), expected, atol=atol * 10, rtol=rtol)  # 48-term sums


def rope_reference(x: np.ndarray, positions: np.ndarray, head_size: int, rotary_dim: int, base: float, neox: bool):
    """Rotate each head's leading rotary_dim with explicit pair loops (float64)."""
    tokens = x.shape[0]
    heads = x.reshape(tokens, -1, head_size).copy()
    half = rotary_dim // 2
    for t in range(tokens):
        for i in range(half):
            angle = positions[t] * base ** (-2.0 * i / rotary_dim)
            c, s = math.cos(angle), math.sin(angle)
            a_idx, b_idx = (i, i + half) if neox else (2 * i, 2 * i + 1)
            a, b = heads[t, :, a_idx].copy(), heads[t, :, b_idx].copy()
            heads[t, :, a_idx] = a * c - b * s
            heads[t, :, b_idx] = b * c + a * s
    return heads.reshape(x.shape)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("neox", [True, False])
@pytest.mark.parametrize("head_size,rotary_dim", [(64, 64), (32, 16)])
def test_rotary_embedding(dtype, neox, head_size, rotary_dim):
    tokens, q_heads, k_heads, base = 7, 4, 2, 10000.0
    positions = torch.tensor([0, 1, 5, 17, 100, 511, 2047])
    q = rand(tokens, q_heads * head_size, dtype=dtype, seed=11)
    k = rand(tokens, k_heads, head_size, dtype=dtype, seed=12)  # 3-D layout is accepted too
    cache = ops.build_cos_sin_cache(rotary_dim, 2048, base)
    q_out, k_out = ops.rotary_embedding(positions, q, k, head_size, cache, neox)
    assert q_out.shape == q.shape and k_out.shape == k.shape
    pos = positions.numpy()
    assert_close(q_out, rope_reference(as64(q), pos, head_size, rotary_dim, base, neox), dtype)
    assert_close(k_out, rope_reference(as64(k), pos, head_size, rotary_dim, base, neox), dtype)


def test_rotary_leaves_inputs_untouched_and_accepts_no_key():
    q = rand(3, 64, dtype=torch.float32, seed=13)
    before = q.clone()
    q_out, k_out = ops.rotary_embedding(torch.tensor([1, 2, 3]), q, None, 64, ops.build_cos_sin_cache(64, 8), True)
    assert k_out is None
    assert torch.equal(q, before) and not torch.equal(q_out, before)


def test_cos_sin_cache_formula():
    cache = ops.build_cos_sin_cache(8, 16, base=500.0, dtype=torch.float64)
    for p in (0, 3, 15):
        for i in range(4):
            angle = p * 500.0 ** (-2 * i / 8)
            assert cache[p, i].item() == pytest.approx(math.cos(angle), abs=1e-12)
            assert cache[p, 4 + i].item() == pytest.approx(math.sin(angle), abs=1e-12)
