"""AttentionMetadata from plain lists: slot mapping, state, padding, and clear refusals."""

from __future__ import annotations

import pytest
import torch

from ascend_backend.attention import (
    AttentionState,
    KVCacheDims,
    allocate_kv_cache,
    build_attention_metadata,
    classify_state,
    compute_slot_mapping,
    kv_cache_shape,
)


def test_worked_example_of_the_docstring():
    meta = build_attention_metadata([[7, 2], [5]], seq_lens=[6, 3], query_lens=[6, 1], block_size=4)
    assert meta.slot_mapping.tolist() == [28, 29, 30, 31, 8, 9, 22]
    assert meta.query_start_loc.tolist() == [0, 6, 7]
    assert meta.block_tables.tolist() == [[7, 2], [5, 0]]
    assert meta.state is AttentionState.ChunkedPrefill
    assert (meta.num_seqs, meta.num_tokens, meta.context_lens) == (2, 7, (0, 2))
    for tensor in (meta.slot_mapping, meta.block_tables, meta.query_start_loc, meta.seq_lens_tensor):
        assert tensor.dtype == torch.int32


def test_slot_mapping_follows_a_shuffled_table_across_block_boundaries():
    # positions 14..17 of a sequence with blocks [3, 9, 1] of 8 slots: offsets 6, 7 of block 9, 0, 1 of block 1
    assert compute_slot_mapping([[3, 9, 1]], [18], [4], block_size=8) == [78, 79, 8, 9]


@pytest.mark.parametrize(
    ("query_lens", "seq_lens", "chunked", "state"),
    [
        ([5, 3], [5, 3], True, AttentionState.PrefillNoCache),
        ([1, 1], [1, 1], True, AttentionState.PrefillNoCache),  # one-token prompts are prefills
        ([1, 1], [9, 4], True, AttentionState.DecodeOnly),
        ([1, 4], [9, 4], True, AttentionState.ChunkedPrefill),
        ([3, 4], [9, 4], False, AttentionState.PrefillCacheHit),
    ],
)
def test_state_classification_follows_vllm_ascend(query_lens, seq_lens, chunked, state):
    assert classify_state(query_lens, seq_lens, chunked_prefill=chunked) is state


def test_lengths_stay_on_the_host_and_the_state_is_carried():
    meta = build_attention_metadata([[0], [1]], [3, 2], [1, 1], 4, state=AttentionState.DecodeOnly)
    assert meta.state is AttentionState.DecodeOnly
    assert meta.seq_lens_tensor.device.type == "cpu" and meta.query_lens_tensor.tolist() == [1, 1]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(block_tables=[[0]], seq_lens=[5], query_lens=[1], block_size=4), "allocate at least 2 blocks"),
        (dict(block_tables=[[0]], seq_lens=[3], query_lens=[4], block_size=4), "query_len 4 must be between"),
        (dict(block_tables=[[0], [1]], seq_lens=[3], query_lens=[1], block_size=4), "one entry per sequence"),
        (dict(block_tables=[[-1]], seq_lens=[3], query_lens=[1], block_size=4), "block ids must be >= 0"),
        (dict(block_tables=[[0]], seq_lens=[3], query_lens=[1], block_size=0), "block_size must be >= 1"),
        (
            dict(block_tables=[[0]], seq_lens=[3], query_lens=[2], block_size=4, state=AttentionState.DecodeOnly),
            "DecodeOnly needs query_len 1",
        ),
        (
            dict(block_tables=[[0]], seq_lens=[3], query_lens=[1], block_size=4, state=AttentionState.PrefillNoCache),
            "PrefillNoCache needs query_len == seq_len",
        ),
    ],
)
def test_inconsistent_inputs_are_refused_with_the_fix(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_attention_metadata(**kwargs)


def test_kv_cache_layout():
    cache = allocate_kv_cache(5, 16, 2, 64, dtype=torch.bfloat16)
    assert cache.shape == kv_cache_shape(5, 16, 2, 64) == (2, 5, 16, 2, 64)
    assert KVCacheDims.of(cache) == KVCacheDims(5, 16, 2, 64) and not cache.any()
    with pytest.raises(ValueError, match="expected \\(2, num_blocks"):
        KVCacheDims.of(torch.zeros(5, 16, 2, 64))
