"""Rotary position embedding (RoPE), neox style (halves) and GPT-J style (interleaved pairs).

`cos_sin_cache` is vLLM's layout: [max_position, rotary_dim] holding [cos | sin], each rotary_dim/2
wide; rotary_dim may be smaller than head_size (partial rotary: the tail of each head passes through).

Worked example, head_size 4, neox, one head x = [a, b, c, d] at position p, cos/sin of p = [c0, c1], [s0, s1]:
    neox pairs (a, c) and (b, d):   [a c0 - c s0, b c1 - d s1, c c0 + a s0, d c1 + b s1]
    gpt-j pairs (a, b) and (c, d):  [a c0 - b s0, b c0 + a s0, c c1 - d s1, d c1 + c s1]

The NPU adapter makes vllm-ascend's call, `torch_npu._npu_rotary_embedding(positions, q2d, k2d,
head_size, cos_sin_cache, is_neox)`, which rotates in place; we hand it copies so callers' tensors are
never modified.
"""

from __future__ import annotations

import torch

from ascend_backend.device import torch_npu
from ascend_backend.registry import REGISTRY, Backend


def build_cos_sin_cache(
    rotary_dim: int, max_position: int, base: float = 10000.0, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """[max_position, rotary_dim] = [cos | sin] of position * base^(-2i/rotary_dim), i < rotary_dim/2."""
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim))
    angles = torch.outer(torch.arange(max_position, dtype=torch.float64), inv_freq)  # [P, rd/2]
    return torch.cat([angles.cos(), angles.sin()], dim=-1).to(dtype)


def rotary_embedding(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor | None,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """positions: [T] int; query: [T, Hq*D] or [T, Hq, D]; key: [T, Hk*D] or [T, Hk, D] or None.

    Returns rotated (query, key) with the input shapes and dtypes.
    """
    return REGISTRY.dispatch(
        "rotary_embedding", query.device, positions, query, key, head_size, cos_sin_cache, is_neox
    )


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
    c, s = cos[:, None, :], sin[:, None, :]     # [T, 1, rd/2]
    if is_neox:   # pairs (i, i + rd/2)
        first, second = slice(0, half), slice(half, rotary_dim)
    else:         # pairs (2i, 2i + 1)
        first, second = slice(0, rotary_dim, 2), slice(1, rotary_dim, 2)
    x1, x2 = heads[..., first].float(), heads[..., second].float()
    torch.mul(x1, c, out=out[..., first]).addcmul_(x2, s, value=-1)  # x1 c - x2 s
    torch.mul(x2, c, out=out[..., second]).addcmul_(x1, s)           # x2 c + x1 s
    return out.to(dtype).reshape(shape)


@REGISTRY.register("rotary_embedding", Backend.NATIVE, doc="RoPE, neox (halves) or gpt-j (interleaved)")
def rotary_embedding_native(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor | None,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    cos, sin = cos_sin_cache.index_select(0, positions.flatten().long()).float().chunk(2, dim=-1)
    q = _rotate(query, cos, sin, head_size, is_neox)
    k = None if key is None else _rotate(key, cos, sin, head_size, is_neox)
    return q, k


def _npu_rotary_unsupported(positions, query, key, head_size, cos_sin_cache, is_neox=True) -> str | None:
    return "key is None (the NPU kernel rotates query and key together)" if key is None else None


@REGISTRY.register("rotary_embedding", Backend.NPU, supports=_npu_rotary_unsupported)
def rotary_embedding_npu(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    npu = torch_npu()
    cache = cos_sin_cache.to(device=query.device, dtype=query.dtype)
    rotary_dim = cache.shape[-1]
    tokens = query.shape[0]
    if rotary_dim < head_size:
        # Partial rotary, as vllm-ascend does it: rotate the leading rotary_dim of each head, keep the rest.
        q = query.reshape(tokens, -1, head_size)
        k = key.reshape(tokens, -1, head_size)
        q_rot = q[..., :rotary_dim].contiguous().view(tokens, -1)
        k_rot = k[..., :rotary_dim].contiguous().view(tokens, -1)
        npu._npu_rotary_embedding(positions, q_rot, k_rot, rotary_dim, cache, is_neox)
        q_out = torch.cat([q_rot.view(tokens, -1, rotary_dim), q[..., rotary_dim:]], dim=-1)
        k_out = torch.cat([k_rot.view(tokens, -1, rotary_dim), k[..., rotary_dim:]], dim=-1)
        return q_out.reshape(query.shape), k_out.reshape(key.shape)
    q2d = query.reshape(tokens, -1).clone()  # clone: the kernel writes in place
    k2d = key.reshape(tokens, -1).clone()
    npu._npu_rotary_embedding(positions, q2d, k2d, head_size, cache, is_neox)
    return q2d.view(query.shape), k2d.view(key.shape)
