"""Multimodal rotary embedding (M-RoPE, Qwen2-VL / Qwen2.5-VL): t/h/w positions share one head's rotary dims.

positions: [3, T] (temporal, height, width per token) or [T] (text only: plain RoPE). The cache is
vLLM's [max_position, rotary_dim] = [cos | sin]. `mrope_section` splits the rotary_dim/2 frequencies into
three chunks; chunk i takes its cos/sin from positions[i]. Worked example, mrope_section [1, 1, 2]
(rotary_dim 8, so 4 frequencies f0..f3), a token at (t, h, w):

    cos used = [cos(t f0), cos(h f1), cos(w f2), cos(w f3)]   (and the same for sin)

then the usual neox rotation of [x_first_half, x_second_half] with those angles. This follows vLLM's
MRotaryEmbedding.forward_native (non-interleaved sections).

The NPU adapter (`npu_mrope`, as vllm-ascend's AscendMRotaryEmbedding calls it) is in
`ascend_backend.npu.adapters.rotary`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ascend_backend.ops.rotary import _rotate
from ascend_backend.registry import REGISTRY, Backend


@REGISTRY.declare(device="query")
def mrope(
    positions: torch.Tensor,  # [3, T] (t, h, w rows) or [T] (text only: plain RoPE)
    query: torch.Tensor,  # [T, Hq*D]
    key: torch.Tensor | None,  # [T, Hk*D] or None
    head_size: int,
    cos_sin_cache: torch.Tensor,  # [max_position, rotary_dim] = [cos | sin]
    mrope_section: Sequence[int],  # three chunks of the rotary_dim/2 frequencies, summing to it
    is_neox: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:  # rotated (query, key), input shapes and dtypes
    """M-RoPE: t/h/w position rows per frequency section, neox rotation."""


def _section_cos_sin(
    positions: torch.Tensor, cos_sin_cache: torch.Tensor, mrope_section: Sequence[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin: [T, rotary_dim/2] float32, each frequency chunk from its own position row."""
    cos, sin = cos_sin_cache[positions.long()].float().chunk(2, dim=-1)  # [3, T, rd/2] or [T, rd/2]
    if positions.dim() == 1:
        return cos, sin
    if sum(mrope_section) != cos.shape[-1]:
        raise ValueError(f"mrope_section {list(mrope_section)} must sum to rotary_dim/2 = {cos.shape[-1]}")
    sections = list(mrope_section)
    # chunk i of the frequencies comes from position row i (t, h, w)
    cos = torch.cat([chunk[i] for i, chunk in enumerate(cos.split(sections, dim=-1))], dim=-1)  # [T, rd/2]
    sin = torch.cat([chunk[i] for i, chunk in enumerate(sin.split(sections, dim=-1))], dim=-1)
    return cos, sin


@REGISTRY.register("mrope", Backend.NATIVE)
def mrope_native(positions, query, key, head_size, cos_sin_cache, mrope_section, is_neox):
    if positions.dim() not in (1, 2) or (positions.dim() == 2 and positions.shape[0] != 3):
        raise ValueError(f"mrope positions must be [T] or [3, T], got {list(positions.shape)}")
    cos, sin = _section_cos_sin(positions, cos_sin_cache, mrope_section)
    q = _rotate(query, cos, sin, head_size, is_neox)
    k = None if key is None else _rotate(key, cos, sin, head_size, is_neox)
    return q, k
