"""Native paged decode against float64 dense attention over the logically contiguous K/V."""

from __future__ import annotations

import random

import pytest
import torch

from ascend_backend.attention import paged, paged_decode_attention
from ascend_backend.attention.paged import DecodeTile, plan_decode_tiles
from tests.unit.attention.reference import DTYPES, assert_close_to_reference, dense_attention_f64, make_paged_batch


def run_decode(seq_lens, block_size, kv_heads, group, head_size, dtype, seed=0):
    batch = make_paged_batch(seq_lens, block_size, kv_heads, head_size, dtype, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    query = torch.randn(len(seq_lens), kv_heads * group, head_size, generator=gen).to(dtype)
    scale = head_size ** -0.5
    out = paged_decode_attention(query, batch.kv_cache, batch.block_tables,
                                 torch.tensor(seq_lens, dtype=torch.int32), scale)
    assert out.shape == query.shape
    expected = torch.stack([
        dense_attention_f64(query[i:i + 1], batch.keys[i], batch.values[i], scale)[0]
        for i in range(len(seq_lens))
    ])
    assert_close_to_reference(out, expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("group", [1, 4, 8], ids=lambda g: f"gqa{g}")
def test_edge_lengths_match_dense(dtype, group):
    # context 1, one short of / exactly at / one past a block boundary, several blocks, in one batch
    run_decode([1, 15, 16, 17, 48, 50], block_size=16, kv_heads=2, group=group, head_size=32, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_mqa_single_kv_head(dtype):
    run_decode([5, 33, 64], block_size=32, kv_heads=1, group=8, head_size=64, dtype=dtype)


@pytest.mark.parametrize("seed", range(6))
def test_random_shapes_match_dense(seed):
    rng = random.Random(seed)
    dtype = DTYPES[seed % 3]
    block_size = rng.choice([4, 16, 32, 128])
    seq_lens = [rng.randint(1, 300) for _ in range(rng.randint(1, 6))]
    run_decode(seq_lens, block_size, kv_heads=rng.choice([1, 2, 4]), group=rng.choice([1, 2, 4, 8]),
               head_size=rng.choice([16, 64, 128]), dtype=dtype, seed=seed)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sequences_longer_than_a_tile_are_merged_exactly(dtype, monkeypatch):
    # tiles of 2 blocks: a 70-token sequence (5 blocks of 16) is split in 3 tiles merged by log-sum-exp
    monkeypatch.setattr(paged, "DECODE_TILE_BYTES", 2 * 16 * 2 * 32 * 4)
    run_decode([70, 3, 32, 20], block_size=16, kv_heads=2, group=4, head_size=32, dtype=dtype)


def test_padding_entries_of_the_block_table_are_never_used():
    # make_paged_batch pads rows with an id past the cache; a read of it would raise
    run_decode([1, 200], block_size=16, kv_heads=2, group=2, head_size=16, dtype=torch.float32)


def test_tile_plan_groups_by_length_and_splits_long_sequences():
    assert plan_decode_tiles([300, 40, 50], block_size=32, blocks_per_tile=8) == [
        [DecodeTile((1, 2), 0, 2)],
        [DecodeTile((0,), 0, 8), DecodeTile((0,), 8, 2)],
    ]
    assert plan_decode_tiles([16, 16, 16], block_size=16, blocks_per_tile=2) == [
        [DecodeTile((0, 1), 0, 1)], [DecodeTile((2,), 0, 1)],
    ]


def test_every_sequence_is_covered_once_by_the_plan():
    rng = random.Random(7)
    lens = [rng.randint(1, 500) for _ in range(40)]
    groups = plan_decode_tiles(lens, block_size=16, blocks_per_tile=6)
    covered = sorted(s for group in groups for s in group[0].seqs)
    assert covered == list(range(40))
    for group in groups:
        seqs = group[0].seqs
        need = max(-(-lens[s] // 16) for s in seqs)
        assert all(t.seqs == seqs for t in group)
        assert sum(t.num_blocks for t in group) == need  # the tiles cover exactly the blocks needed
        assert all(len(t.seqs) * t.num_blocks <= 6 for t in group)


def test_context_longer_than_the_block_table_is_refused():
    batch = make_paged_batch([20], 16, 1, 16, torch.float32, seed=0)
    query = torch.randn(1, 1, 16)
    too_long = torch.tensor([16 * batch.block_tables.shape[1] + 1], dtype=torch.int32)
    with pytest.raises(ValueError, match="context_lens\\[0\\]"):
        paged_decode_attention(query, batch.kv_cache, batch.block_tables, too_long, 0.25)


def test_heads_that_do_not_group_are_refused():
    batch = make_paged_batch([4], 4, 2, 16, torch.float32, seed=0)
    with pytest.raises(ValueError, match="not a multiple"):
        paged_decode_attention(torch.randn(1, 3, 16), batch.kv_cache, batch.block_tables,
                               torch.tensor([4], dtype=torch.int32), 0.25)
