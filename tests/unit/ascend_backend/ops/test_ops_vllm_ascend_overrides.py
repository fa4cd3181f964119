"""QuickGELU, Gemma RMSNorm (plain and with the residual) and M-RoPE: native paths against float64 formulas.

The references here are written from the definitions, independently of the implementations:
QuickGELU(x) = x / (1 + exp(-1.702 x)); Gemma RMSNorm(x) = x / sqrt(mean(x^2) + eps) * (1 + w) (vLLM
GemmaRMSNorm's docstring); M-RoPE rotates each frequency f_j of a head with the angle position_s(j) * f_j,
where s(j) is the section (t, h, w) that frequency j falls in (Qwen2-VL; vLLM MRotaryEmbedding), by the
neox pairing (x_j, x_{j + d/2}).
"""

from __future__ import annotations

import math

import pytest
import torch

from ascend_backend import ops

TOL = {torch.float32: (2e-5, 2e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (2e-2, 2e-2)}


def close(actual: torch.Tensor, expected64: torch.Tensor, dtype: torch.dtype) -> None:
    atol, rtol = TOL[dtype]
    torch.testing.assert_close(actual.double(), expected64, atol=atol, rtol=rtol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_quick_gelu_matches_the_logistic_formula(dtype):
    x = (4 * torch.randn(7, 33, generator=torch.Generator().manual_seed(0))).to(dtype)
    expected = torch.tensor(
        [[v / (1.0 + math.exp(-1.702 * v)) for v in row] for row in x.double().tolist()], dtype=torch.float64
    )
    out = ops.quick_gelu(x)
    assert out.dtype == dtype and out.shape == x.shape
    close(out, expected, dtype)


def gemma_reference(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    rows = []
    for row in x.double().tolist():
        rms = math.sqrt(sum(v * v for v in row) / len(row) + eps)
        rows.append([v / rms * (1.0 + wj) for v, wj in zip(row, w.double().tolist())])
    return torch.tensor(rows, dtype=torch.float64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_gemma_rms_norm_scales_by_one_plus_weight(dtype):
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(5, 64, generator=g).to(dtype), (0.1 * torch.randn(64, generator=g)).to(dtype)
    out = ops.gemma_rms_norm(x, w, 1e-6)
    assert out.dtype == dtype
    close(out, gemma_reference(x, w, 1e-6), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gemma_add_rms_norm_returns_the_normalised_sum_and_the_sum(dtype):
    g = torch.Generator().manual_seed(2)
    x, r = torch.randn(4, 48, generator=g).to(dtype), torch.randn(4, 48, generator=g).to(dtype)
    w = (0.1 * torch.randn(48, generator=g)).to(dtype)
    y, summed = ops.gemma_add_rms_norm(x, r, w, 1e-5)
    total = x.double() + r.double()
    close(summed, total, dtype)
    close(y, gemma_reference(total, w, 1e-5), dtype)


def test_gemma_weight_zero_is_plain_rms_normalisation():
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(3), dtype=torch.float64).float()
    torch.testing.assert_close(ops.gemma_rms_norm(x, torch.zeros(16)), ops.rms_norm(x, torch.ones(16)))


def mrope_reference(positions, x, head, rotary_dim, base, section):
    """positions: [3][T] ints; x: [T, H*head] -> float64 rotated copy, frequencies by section."""
    half = rotary_dim // 2
    freqs = [base ** (-2.0 * j / rotary_dim) for j in range(half)]
    owner = [s for s, size in enumerate(section) for _ in range(size)]  # frequency j -> t/h/w row
    out = x.double().clone()
    tokens, heads = x.shape[0], x.shape[1] // head
    for t in range(tokens):
        for h in range(heads):
            base_col = h * head
            for j in range(half):
                angle = positions[owner[j]][t] * freqs[j]
                a, b = x[t, base_col + j].item(), x[t, base_col + j + half].item()
                out[t, base_col + j] = a * math.cos(angle) - b * math.sin(angle)
                out[t, base_col + j + half] = b * math.cos(angle) + a * math.sin(angle)
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_mrope_rotates_each_frequency_section_by_its_own_position(dtype):
    g = torch.Generator().manual_seed(4)
    head, section, tokens = 16, (2, 3, 3), 5
    positions = torch.stack([torch.randint(0, 60, (tokens,), generator=g) for _ in range(3)])  # t, h, w differ
    q, k = torch.randn(tokens, 2 * head, generator=g).to(dtype), torch.randn(tokens, head, generator=g).to(dtype)
    cache = ops.build_cos_sin_cache(head, 64, base=10000.0)
    q_out, k_out = ops.mrope(positions, q, k, head, cache, section)
    rows = positions.tolist()
    close(q_out, mrope_reference(rows, q, head, head, 10000.0, section), dtype)
    close(k_out, mrope_reference(rows, k, head, head, 10000.0, section), dtype)
    assert q_out.dtype == dtype and q_out.shape == q.shape


def test_mrope_with_text_positions_is_plain_rope():
    g = torch.Generator().manual_seed(5)
    positions = torch.randint(0, 60, (4,), generator=g)
    q, k = torch.randn(4, 32, generator=g), torch.randn(4, 16, generator=g)
    cache = ops.build_cos_sin_cache(16, 64)
    mq, mk = ops.mrope(positions, q, k, 16, cache, (2, 3, 3))
    rq, rk = ops.rotary_embedding(positions, q, k, 16, cache, True)
    torch.testing.assert_close(mq, rq)
    torch.testing.assert_close(mk, rk)
    same_three = torch.stack([positions] * 3)  # t = h = w: also plain RoPE
    torch.testing.assert_close(ops.mrope(same_three, q, k, 16, cache, (2, 3, 3))[0], rq)


def test_mrope_refuses_sections_that_do_not_cover_the_rotary_dim():
    cache = ops.build_cos_sin_cache(16, 64)
    with pytest.raises(ValueError, match="sum to rotary_dim/2"):
        ops.mrope(torch.zeros(3, 2, dtype=torch.long), torch.randn(2, 16), torch.randn(2, 16), 16, cache, (2, 2, 2))
    with pytest.raises(ValueError, match=r"\[T\] or \[3, T\]"):
        ops.mrope(torch.zeros(2, 2, dtype=torch.long), torch.randn(2, 16), torch.randn(2, 16), 16, cache, (2, 3, 3))


def test_caller_tensors_are_unchanged():
    g = torch.Generator().manual_seed(6)
    x, r, w = torch.randn(2, 8, generator=g), torch.randn(2, 8, generator=g), torch.randn(8, generator=g)
    saved = [t.clone() for t in (x, r, w)]
    ops.quick_gelu(x), ops.gemma_rms_norm(x, w), ops.gemma_add_rms_norm(x, r, w)
    assert all(torch.equal(a, b) for a, b in zip((x, r, w), saved))
