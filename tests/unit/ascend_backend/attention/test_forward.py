"""paged_attention_forward over several steps of one batch: every state, cache and outputs exact."""

from __future__ import annotations

import random

import pytest
import torch

from ascend_backend.attention import (
    STATE_OPS,
    AttentionState,
    allocate_kv_cache,
    build_attention_metadata,
    paged_attention_forward,
)
from ascend_backend.registry import REGISTRY
from tests.unit.ascend_backend.attention.reference import DTYPES, assert_close_to_reference, dense_attention_f64

BLOCK_SIZE, KV_HEADS, GROUP, HEAD_SIZE = 4, 2, 4, 16
# (new tokens per sequence, chunked prefill on?) for each step, and the state it must classify as
STEPS = [
    ([5, 12, 7], True, AttentionState.PrefillNoCache),
    ([1, 1, 1], True, AttentionState.DecodeOnly),
    ([6, 1, 3], True, AttentionState.ChunkedPrefill),
    ([2, 3, 4], False, AttentionState.PrefillCacheHit),
    ([1, 1, 1], True, AttentionState.DecodeOnly),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_steps_through_every_state(dtype):
    gen = torch.Generator().manual_seed(0)
    blocks = list(range(40))
    random.Random(0).shuffle(blocks)
    tables = [blocks[0:8], blocks[8:16], blocks[16:24]]  # shuffled, non-contiguous
    cache = allocate_kv_cache(40, BLOCK_SIZE, KV_HEADS, HEAD_SIZE, dtype=dtype)
    history_k = [torch.empty(0, KV_HEADS, HEAD_SIZE, dtype=dtype) for _ in tables]
    history_v = [torch.empty(0, KV_HEADS, HEAD_SIZE, dtype=dtype) for _ in tables]
    scale = HEAD_SIZE**-0.5
    REGISTRY.reset_stats()
    for new, chunked, state in STEPS:
        seq_lens = [h.shape[0] + n for h, n in zip(history_k, new)]
        meta = build_attention_metadata(tables, seq_lens, new, BLOCK_SIZE, chunked_prefill=chunked)
        assert meta.state is state
        q = torch.randn(sum(new), KV_HEADS * GROUP, HEAD_SIZE, generator=gen).to(dtype)
        k = torch.randn(sum(new), KV_HEADS, HEAD_SIZE, generator=gen).to(dtype)
        v = torch.randn(sum(new), KV_HEADS, HEAD_SIZE, generator=gen).to(dtype)
        out = paged_attention_forward(q, k, v, cache, meta, scale)

        expected, start = [], 0
        for i, n in enumerate(new):
            history_k[i] = torch.cat([history_k[i], k[start : start + n]])
            history_v[i] = torch.cat([history_v[i], v[start : start + n]])
            expected.append(dense_attention_f64(q[start : start + n], history_k[i], history_v[i], scale))
            start += n
        assert_close_to_reference(out, torch.cat(expected), dtype)
        assert REGISTRY.stats()[STATE_OPS[state]]["native"] >= 1

    # the cache holds every token ever written, at its logical position
    for table, hk, hv in zip(tables, history_k, history_v):
        for pos in range(hk.shape[0]):
            assert torch.equal(cache[0, table[pos // BLOCK_SIZE], pos % BLOCK_SIZE], hk[pos])
            assert torch.equal(cache[1, table[pos // BLOCK_SIZE], pos % BLOCK_SIZE], hv[pos])
    assert REGISTRY.stats()["reshape_and_cache"]["native"] == len(STEPS)


def test_query_rows_must_match_the_metadata():
    meta = build_attention_metadata([[0]], [3], [3], 4)
    cache = allocate_kv_cache(1, 4, 1, 8, dtype=torch.float32)
    with pytest.raises(ValueError, match="describes 3 new tokens"):
        paged_attention_forward(torch.randn(2, 1, 8), torch.randn(2, 1, 8), torch.randn(2, 1, 8), cache, meta, 1.0)
