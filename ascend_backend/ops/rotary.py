"""Rotary position embedding (RoPE), neox style (halves) and GPT-J style (interleaved pairs).

`cos_sin_cache` is vLLM's layout: [max_position, rotary_dim] holding [cos | sin], each rotary_dim/2
wide; rotary_dim may be smaller than head_size (partial rotary: the tail of each head passes through).

Worked example, head_size 4, neox, one head x = [a, b, c, d] at position p, cos/sin of p = [c0, c1], [s0, s1]:
    neox pairs (a, c) and (b, d):   [a c0 - c s0, b c1 - d s1, c c0 + a s0, d c1 + b s1]
    gpt-j pairs (a, b) and (c, d):  [a c0 - b s0, b c0 + a s0, c c1 - d s1, d c1 + c s1]

The NPU adapter (`_npu_rotary_embedding`, `npu_apply_rotary_pos_emb` or `npu_mrope`, per the
kernel-selection table) is in `ascend_backend.npu.adapters.rotary`. Callers' tensors are never modified.
"""

from __future__ import annotations

import torch

from ascend_backend.registry import REGISTRY, Backend


def build_cos_sin_cache(
    rotary_dim: int, max_position: int, base: float = 10000.0, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """[max_position, rotary_dim] = [cos | sin] of position * base^(-2i/rotary_dim), i < rotary_dim/2."""
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim))
    angles = torch.outer(torch.arange(max_position, dtype=torch.float64), inv_freq)  # [P, rd/2]
    return torch.cat([angles.cos(), angles.sin()], dim=-1).to(dtype)


@REGISTRY.declare(device="query")
def rotary_embedding(
    positions: torch.Tensor,  # [T] int
    query: torch.Tensor,  # [T, Hq*D] or [T, Hq, D]
    key: torch.Tensor | None,  # [T, Hk*D] or [T, Hk, D], or None
    head_size: int,
    cos_sin_cache: torch.Tensor,  # [max_position, rotary_dim] = [cos | sin]
    is_neox: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:  # rotated (query, key), input shapes and dtypes
    """RoPE, neox (halves) or gpt-j (interleaved pairs); the tail past rotary_dim passes through."""


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, head_size: int, is_neox: bool) -> torch.Tensor:
    # x: [T, H*D] or [T, H, D]; cos/sin: [T, rd/2] float32. The maths is float32 for every dtype.
    # Few, in-place steps on purpose: inside a serving engine this runs once per layer and step, and
    # each extra PyTorch call costs microseconds on small batches.
    shape, dtype = x.shape, x.dtype
    half = cos.shape[-1]
    rotary_dim = 2 * half
    heads = x.reshape(shape[0], -1, head_size)  # [T, H, D]
    if rotary_dim < head_size:  # partial rotary: the tail of each head passes through unchanged
        out = heads.to(torch.float32, copy=True)
    else:
        out = torch.empty(heads.shape, dtype=torch.float32, device=x.device)
    c, s = cos[:, None, :], sin[:, None, :]  # [T, 1, rd/2]
    if is_neox:  # pairs (i, i + rd/2)
        first, second = slice(0, half), slice(half, rotary_dim)
    else:  # pairs (2i, 2i + 1)
        first, second = slice(0, rotary_dim, 2), slice(1, rotary_dim, 2)
    x1, x2 = heads[..., first].float(), heads[..., second].float()
    torch.mul(x1, c, out=out[..., first]).addcmul_(x2, s, value=-1)  # x1 c - x2 s
    torch.mul(x2, c, out=out[..., second]).addcmul_(x1, s)  # x2 c + x1 s
    return out.to(dtype).reshape(shape)


@REGISTRY.register("rotary_embedding", Backend.NATIVE)
def rotary_embedding_native(positions, query, key, head_size, cos_sin_cache, is_neox):
    cos, sin = cos_sin_cache.index_select(0, positions.flatten().long()).float().chunk(2, dim=-1)
    q = _rotate(query, cos, sin, head_size, is_neox)
    k = None if key is None else _rotate(key, cos, sin, head_size, is_neox)
    return q, k
