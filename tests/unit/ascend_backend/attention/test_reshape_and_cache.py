"""reshape_and_cache writes each token's K/V to exactly its slot and nowhere else."""

from __future__ import annotations

import pytest
import torch

from ascend_backend.attention import allocate_kv_cache, reshape_and_cache
from tests.unit.ascend_backend.attention.reference import DTYPES


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_tokens_land_in_their_slots(dtype):
    block_size, kv_heads, head_size = 4, 2, 8
    cache = allocate_kv_cache(6, block_size, kv_heads, head_size, dtype=dtype)
    slots = [22, 3, 4, 17, 0]  # unordered, across blocks 5, 0, 1, 4, 0
    key = torch.randn(len(slots), kv_heads, head_size).to(dtype)
    value = torch.randn(len(slots), kv_heads, head_size).to(dtype)
    reshape_and_cache(key, value, cache, torch.tensor(slots, dtype=torch.int32))
    for i, slot in enumerate(slots):
        assert torch.equal(cache[0, slot // block_size, slot % block_size], key[i])
        assert torch.equal(cache[1, slot // block_size, slot % block_size], value[i])
    written = torch.zeros(6 * block_size, dtype=torch.bool)
    written[slots] = True
    untouched = cache.view(2, 6 * block_size, -1)[:, ~written]
    assert not untouched.any()


def test_dtype_mismatch_names_the_fix():
    cache = allocate_kv_cache(2, 4, 1, 8, dtype=torch.float16)
    with pytest.raises(ValueError, match="cast it first"):
        reshape_and_cache(torch.randn(1, 1, 8), torch.randn(1, 1, 8), cache, torch.tensor([0], dtype=torch.int32))


def test_shape_mismatch_is_refused():
    cache = allocate_kv_cache(2, 4, 1, 8, dtype=torch.float32)
    with pytest.raises(ValueError, match="one row per slot"):
        reshape_and_cache(torch.randn(2, 1, 8), torch.randn(2, 1, 8), cache, torch.tensor([0], dtype=torch.int32))
