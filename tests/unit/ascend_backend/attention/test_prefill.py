"""PrefillNoCache, PrefillCacheHit and ChunkedPrefill (native) against float64 dense attention."""

from __future__ import annotations

import random

import pytest
import torch

from ascend_backend.attention import (
    chunked_prefill_attention,
    paged,
    prefill_attention,
    prefill_cache_hit_attention,
)
from tests.unit.ascend_backend.attention.reference import (
    DTYPES,
    assert_close_to_reference,
    dense_attention_f64,
    make_paged_batch,
)

PAGED_OPS = {"cache_hit": prefill_cache_hit_attention, "chunked": chunked_prefill_attention}


def packed_queries(query_lens, num_heads, head_size, dtype, seed):
    gen = torch.Generator().manual_seed(seed + 1)
    return torch.randn(sum(query_lens), num_heads, head_size, generator=gen).to(dtype)


def expected_rows(batch, query, query_lens, scale):
    rows, start = [], 0
    for i, q in enumerate(query_lens):
        rows.append(dense_attention_f64(query[start : start + q], batch.keys[i], batch.values[i], scale))
        start += q
    return torch.cat(rows)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("group", [1, 4, 8], ids=lambda g: f"gqa{g}")
def test_prefill_no_cache_matches_dense(dtype, group):
    seq_lens = [1, 16, 23]
    batch = make_paged_batch(seq_lens, 8, 2, 32, dtype, seed=3)
    query = packed_queries(seq_lens, 2 * group, 32, dtype, seed=3)
    scale = 32**-0.5
    out = prefill_attention(
        query, torch.cat(batch.keys), torch.cat(batch.values), torch.tensor(seq_lens, dtype=torch.int32), scale
    )
    assert_close_to_reference(out, expected_rows(batch, query, seq_lens, scale), dtype)


@pytest.mark.parametrize("op", PAGED_OPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("group", [1, 4, 8], ids=lambda g: f"gqa{g}")
def test_paged_prefill_matches_dense(op, dtype, group):
    # cached prefixes of 0, 15, 16 (a block boundary) and 40 tokens; new chunks of 1..9 tokens
    seq_lens = [9, 16, 17, 49, 3]
    query_lens = [9, 1, 1, 9, 2]
    batch = make_paged_batch(seq_lens, 16, 2, 32, dtype, seed=5)
    query = packed_queries(query_lens, 2 * group, 32, dtype, seed=5)
    scale = 0.2
    out = PAGED_OPS[op](
        query,
        batch.kv_cache,
        batch.block_tables,
        torch.tensor(query_lens, dtype=torch.int32),
        torch.tensor(seq_lens, dtype=torch.int32),
        scale,
    )
    assert_close_to_reference(out, expected_rows(batch, query, query_lens, scale), dtype)


@pytest.mark.parametrize("seed", range(6))
def test_random_chunked_batches_match_dense(seed):
    rng = random.Random(100 + seed)
    dtype = DTYPES[seed % 3]
    num_seqs = rng.randint(1, 5)
    seq_lens = [rng.randint(1, 150) for _ in range(num_seqs)]
    query_lens = [rng.choice([1, rng.randint(1, s)]) for s in seq_lens]
    kv_heads, group, head_size = rng.choice([1, 2, 4]), rng.choice([1, 4, 8]), rng.choice([16, 64])
    batch = make_paged_batch(seq_lens, rng.choice([4, 16, 32]), kv_heads, head_size, dtype, seed)
    query = packed_queries(query_lens, kv_heads * group, head_size, dtype, seed)
    out = chunked_prefill_attention(
        query,
        batch.kv_cache,
        batch.block_tables,
        torch.tensor(query_lens, dtype=torch.int32),
        torch.tensor(seq_lens, dtype=torch.int32),
        0.125,
    )
    assert_close_to_reference(out, expected_rows(batch, query, query_lens, 0.125), dtype)


def test_long_prompts_are_computed_in_row_chunks_exactly(monkeypatch):
    # score budget of 3 rows per chunk: a 20-token prompt is computed in 7 chunks
    monkeypatch.setattr(paged, "PREFILL_SCORE_BYTES", 4 * 4 * 30 * 3)
    seq_lens, query_lens = [30], [20]
    batch = make_paged_batch(seq_lens, 8, 2, 16, torch.float32, seed=9)
    query = packed_queries(query_lens, 4, 16, torch.float32, seed=9)
    out = chunked_prefill_attention(
        query,
        batch.kv_cache,
        batch.block_tables,
        torch.tensor(query_lens, dtype=torch.int32),
        torch.tensor(seq_lens, dtype=torch.int32),
        0.25,
    )
    assert_close_to_reference(out, expected_rows(batch, query, query_lens, 0.25), torch.float32)


def test_query_rows_must_match_query_lens():
    batch = make_paged_batch([8], 4, 1, 16, torch.float32, seed=0)
    with pytest.raises(ValueError, match="query has 3 rows"):
        chunked_prefill_attention(
            torch.randn(3, 1, 16),
            batch.kv_cache,
            batch.block_tables,
            torch.tensor([2], dtype=torch.int32),
            torch.tensor([8], dtype=torch.int32),
            1.0,
        )


def test_query_len_above_seq_len_is_refused():
    batch = make_paged_batch([4], 4, 1, 16, torch.float32, seed=0)
    with pytest.raises(ValueError, match="query_len 5"):
        prefill_cache_hit_attention(
            torch.randn(5, 1, 16),
            batch.kv_cache,
            batch.block_tables,
            torch.tensor([5], dtype=torch.int32),
            torch.tensor([4], dtype=torch.int32),
            1.0,
        )
