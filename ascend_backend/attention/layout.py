"""The paged KV cache tensor: one layout for every kernel, native and NPU.

One tensor per attention layer holds keys and values for every block:

    kv_cache: [2, num_blocks, block_size, num_kv_heads, head_size]
              kv_cache[0] = key cache, kv_cache[1] = value cache

This is the layout vllm-ascend hands to the CANN kernels (`_npu_paged_attention`,
`_npu_reshape_and_cache`, ...), so the native path reads exactly the bytes the NPU path reads and a
cache written by one can be checked by the other. A token at `slot` lives at
`kv_cache[:, slot // block_size, slot % block_size]`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

KV_CACHE_LAYOUT = "(2, num_blocks, block_size, num_kv_heads, head_size)"


@dataclass(frozen=True)
class KVCacheDims:
    """The four sizes of a paged KV cache (the leading 2 is keys/values)."""

    num_blocks: int
    block_size: int
    num_kv_heads: int
    head_size: int

    @property
    def shape(self) -> tuple[int, int, int, int, int]:
        return (2, self.num_blocks, self.block_size, self.num_kv_heads, self.head_size)

    @property
    def num_slots(self) -> int:
        return self.num_blocks * self.block_size

    @classmethod
    def of(cls, kv_cache: torch.Tensor) -> KVCacheDims:
        """Read the sizes of `kv_cache`, refusing any other layout with the expected one in the message."""
        if kv_cache.dim() != 5 or kv_cache.shape[0] != 2:
            raise ValueError(
                f"kv_cache has shape {tuple(kv_cache.shape)}; expected {KV_CACHE_LAYOUT} "
                "(allocate it with ascend_backend.attention.allocate_kv_cache)"
            )
        _, num_blocks, block_size, num_kv_heads, head_size = kv_cache.shape
        return cls(num_blocks, block_size, num_kv_heads, head_size)


def kv_cache_shape(num_blocks: int, block_size: int, num_kv_heads: int, head_size: int) -> tuple[int, ...]:
    """Shape of one layer's cache: (2, num_blocks, block_size, num_kv_heads, head_size)."""
    for name, value in (
        ("num_blocks", num_blocks),
        ("block_size", block_size),
        ("num_kv_heads", num_kv_heads),
        ("head_size", head_size),
    ):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    return KVCacheDims(num_blocks, block_size, num_kv_heads, head_size).shape


def allocate_kv_cache(
    num_blocks: int,
    block_size: int,
    num_kv_heads: int,
    head_size: int,
    *,
    dtype: torch.dtype = torch.float16,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """A zeroed cache in the shared layout. Zeroed, not empty: a bug that reads an unwritten slot
    then shows up as a wrong number, not as whatever the allocator left there."""
    return torch.zeros(kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size), dtype=dtype, device=device)
