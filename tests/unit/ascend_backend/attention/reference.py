"""Independent float64 attention and paged-cache builders for the attention tests.

Nothing here calls ascend_backend's kernels: sequences are generated as logically contiguous K/V,
scattered into a paged cache by an explicit per-token loop over a shuffled block table, and the
expected output is dense attention computed head by head in float64.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

# (atol, rtol) against float64 for outputs in each dtype: a few output ulps at |x| ~ 1-4.
TOLERANCE = {
    torch.float32: (2e-5, 1e-4),
    torch.float16: (2e-3, 4e-3),
    torch.bfloat16: (1.6e-2, 3e-2),
}
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def dense_attention_f64(
    query: torch.Tensor,  # [q_len, num_heads, head_size], queries at the last q_len positions
    keys: torch.Tensor,  # [kv_len, num_kv_heads, head_size], positions 0..kv_len-1
    values: torch.Tensor,  # [kv_len, num_kv_heads, head_size]
    scale: float,
) -> torch.Tensor:  # [q_len, num_heads, head_size] float64
    """Causal attention, one query head at a time: head h reads KV head h // (num_heads / kv_heads)."""
    q, k, v = query.double(), keys.double(), values.double()
    q_len, num_heads, _ = q.shape
    kv_len, kv_heads, _ = k.shape
    group = num_heads // kv_heads
    out = torch.empty(q.shape, dtype=torch.float64)
    for h in range(num_heads):
        kh, vh = k[:, h // group], v[:, h // group]
        logits = torch.einsum("qd,kd->qk", q[:, h], kh) * scale
        for i in range(q_len):
            position = kv_len - q_len + i
            logits[i, position + 1 :] = float("-inf")
        out[:, h] = torch.softmax(logits, dim=-1) @ vh
    return out


@dataclass
class PagedBatch:
    """Sequences both as contiguous tensors (for the reference) and as a paged cache (for kernels)."""

    keys: list[torch.Tensor]  # per sequence [seq_len, kv_heads, head_size]
    values: list[torch.Tensor]
    tables: list[list[int]]  # block ids per sequence, shuffled across the cache
    kv_cache: torch.Tensor  # [2, num_blocks, block_size, kv_heads, head_size]
    block_tables: torch.Tensor  # [num_seqs, max_blocks] int32, padding = an invalid block id
    block_size: int

    @property
    def seq_lens(self) -> list[int]:
        return [k.shape[0] for k in self.keys]


def make_paged_batch(
    seq_lens: list[int],
    block_size: int,
    kv_heads: int,
    head_size: int,
    dtype: torch.dtype,
    seed: int,
    spare_blocks: int = 3,
    padding: int | None = None,
    unwritten: float = 0.0,
) -> PagedBatch:
    """Random K/V per sequence, placed in a cache whose blocks are handed out in shuffled order.

    Table rows are padded with `padding` (default: an id past the end of the cache), so a kernel
    that reads padding entries fails loudly instead of silently reading block 0. Slots no sequence
    writes hold `unwritten` (NaN shows a kernel that lets them reach its output).
    """
    gen = torch.Generator().manual_seed(seed)
    keys = [torch.randn(n, kv_heads, head_size, generator=gen).to(dtype) for n in seq_lens]
    values = [torch.randn(n, kv_heads, head_size, generator=gen).to(dtype) for n in seq_lens]
    needed = [-(-n // block_size) for n in seq_lens]
    num_blocks = sum(needed) + spare_blocks
    ids = list(range(num_blocks))
    random.Random(seed).shuffle(ids)
    tables, start = [], 0
    for count in needed:
        tables.append(ids[start : start + count])
        start += count
    kv_cache = torch.full((2, num_blocks, block_size, kv_heads, head_size), unwritten, dtype=dtype)
    for table, k, v in zip(tables, keys, values):
        for pos in range(k.shape[0]):
            kv_cache[0, table[pos // block_size], pos % block_size] = k[pos]
            kv_cache[1, table[pos // block_size], pos % block_size] = v[pos]
    pad = num_blocks + 1000 if padding is None else padding
    width = max(needed) + 1
    block_tables = torch.tensor([t + [pad] * (width - len(t)) for t in tables], dtype=torch.int32)
    return PagedBatch(keys, values, tables, kv_cache, block_tables, block_size)


def assert_close_to_reference(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    atol, rtol = TOLERANCE[dtype]
    assert actual.dtype == dtype
    torch.testing.assert_close(actual.double(), expected, atol=atol, rtol=rtol)
