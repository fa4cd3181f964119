"""Native paged decode against float64 dense attention over the logically contiguous K/V.

Both CPU paths are checked: the eager tiles and the Inductor-fused kernel (`fused_decode`), chosen by
ASCEND_BACKEND_FUSED_DECODE through the `decode_path` fixture.
"""

from __future__ import annotations

import random

import pytest
import torch

from ascend_backend.attention import fused_decode, paged, paged_decode_attention
from ascend_backend.attention.paged import DecodeTile, plan_decode_tiles
from tests.unit.ascend_backend.attention.reference import (
    DTYPES,
    assert_close_to_reference,
    dense_attention_f64,
    make_paged_batch,
)


@pytest.fixture
def eager_only(monkeypatch):
    monkeypatch.setenv("ASCEND_BACKEND_FUSED_DECODE", "off")


def run_decode(seq_lens, block_size, kv_heads, group, head_size, dtype, seed=0, unwritten=0.0):
    batch = make_paged_batch(seq_lens, block_size, kv_heads, head_size, dtype, seed, unwritten=unwritten)
    gen = torch.Generator().manual_seed(seed + 1)
    query = torch.randn(len(seq_lens), kv_heads * group, head_size, generator=gen).to(dtype)
    scale = head_size**-0.5
    out = paged_decode_attention(
        query, batch.kv_cache, batch.block_tables, torch.tensor(seq_lens, dtype=torch.int32), scale
    )
    assert out.shape == query.shape
    expected = torch.stack(
        [dense_attention_f64(query[i : i + 1], batch.keys[i], batch.values[i], scale)[0] for i in range(len(seq_lens))]
    )
    assert_close_to_reference(out, expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("group", [1, 4, 8], ids=lambda g: f"gqa{g}")
def test_edge_lengths_match_dense(dtype, group, decode_path):
    # context 1, one short of / exactly at / one past a block boundary, several blocks, in one batch
    run_decode([1, 15, 16, 17, 48, 50], block_size=16, kv_heads=2, group=group, head_size=32, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_mqa_single_kv_head(dtype, decode_path):
    run_decode([5, 33, 64], block_size=32, kv_heads=1, group=8, head_size=64, dtype=dtype)


@pytest.mark.parametrize("seed", range(6))
def test_random_shapes_match_dense(seed, decode_path):
    rng = random.Random(seed)
    dtype = DTYPES[seed % 3]
    block_size = rng.choice([4, 16, 32, 128])
    seq_lens = [rng.randint(1, 300) for _ in range(rng.randint(1, 6))]
    run_decode(
        seq_lens,
        block_size,
        kv_heads=rng.choice([1, 2, 4]),
        group=rng.choice([1, 2, 4, 8]),
        head_size=rng.choice([16, 64, 128]),
        dtype=dtype,
        seed=seed,
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sequences_longer_than_a_tile_are_merged_exactly(dtype, monkeypatch, eager_only):
    # tiles of 2 blocks: a 70-token sequence (5 blocks of 16) is split in 3 tiles merged by log-sum-exp
    monkeypatch.setattr(paged, "DECODE_TILE_BYTES", 2 * 16 * 2 * 32 * 4)
    run_decode([70, 3, 32, 20], block_size=16, kv_heads=2, group=4, head_size=32, dtype=dtype)


def test_padding_entries_of_the_block_table_are_never_used(decode_path):
    # make_paged_batch pads rows with an id past the cache; a read of it would raise
    run_decode([1, 200], block_size=16, kv_heads=2, group=2, head_size=16, dtype=torch.float32)


def test_slots_never_written_may_hold_nan_without_reaching_the_output(decode_path):
    # block tails and spare blocks hold NaN (a reused block keeps an earlier request's values); a
    # masked slot must get weight 0 without its value being multiplied in (0 * NaN = NaN)
    run_decode(
        [5, 40, 17], block_size=16, kv_heads=2, group=2, head_size=32, dtype=torch.bfloat16, unwritten=float("nan")
    )


def test_tile_plan_groups_by_length_and_splits_long_sequences():
    assert plan_decode_tiles([300, 40, 50], block_size=32, blocks_per_tile=8) == [
        [DecodeTile((1, 2), 0, 2)],
        [DecodeTile((0,), 0, 8), DecodeTile((0,), 8, 2)],
    ]
    assert plan_decode_tiles([16, 16, 16], block_size=16, blocks_per_tile=2) == [
        [DecodeTile((0, 1), 0, 1)],
        [DecodeTile((2,), 0, 1)],
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
        paged_decode_attention(
            torch.randn(1, 3, 16), batch.kv_cache, batch.block_tables, torch.tensor([4], dtype=torch.int32), 0.25
        )


def test_fused_kernel_buckets_mixed_lengths(monkeypatch):
    # lengths 1..400 over blocks of 32: several buckets, each padded only to its own longest member
    monkeypatch.setenv("ASCEND_BACKEND_FUSED_DECODE", "on")
    lens = [400, 3, 33, 390, 64, 1, 250, 129]
    assert len(fused_decode.length_buckets([-(-n // 32) for n in lens])) > 2
    run_decode(lens, block_size=32, kv_heads=2, group=4, head_size=64, dtype=torch.float32, seed=3)
    assert fused_decode.failure() is None


def test_length_buckets_bound_the_padding():
    assert fused_decode.length_buckets([8, 1, 7, 2, 8]) == [[0, 4, 2], [3], [1]]
    rng = random.Random(1)
    blocks = [rng.randint(1, 64) for _ in range(100)]
    buckets = fused_decode.length_buckets(blocks)
    assert sorted(i for b in buckets for i in b) == list(range(100))
    for bucket in buckets:
        assert min(blocks[i] for i in bucket) >= fused_decode.BUCKET_FILL * max(blocks[i] for i in bucket)


def test_decode_index_points_padding_at_the_sequences_own_first_token():
    tables = torch.tensor([[7, 2, 9], [4, 0, 0]], dtype=torch.int32)
    index = fused_decode.build_decode_index(tables, [6, 5], block_size=4)
    (bucket,) = index.buckets  # 2 blocks each: one bucket, in batch order
    assert bucket.rows is None and bucket.lens.tolist() == [6, 5]
    assert bucket.blocks.tolist() == [[7, 7, 7, 7, 2, 2], [4, 4, 4, 4, 0, 4]]
    assert bucket.offsets.tolist() == [[0, 1, 2, 3, 0, 1], [0, 1, 2, 3, 0, 0]]
    split = fused_decode.build_decode_index(tables, [12, 1], block_size=4)  # 3 blocks vs 1: two buckets
    assert [b.rows.tolist() for b in split.buckets] == [[0], [1]]
    assert split.buckets[1].blocks.tolist() == [[4]]


def test_fused_kernel_refuses_a_block_id_outside_the_cache(monkeypatch):
    monkeypatch.setenv("ASCEND_BACKEND_FUSED_DECODE", "on")
    batch = make_paged_batch([40, 20], 16, 2, 16, torch.float32, seed=0)
    tables = batch.block_tables.clone()
    tables[1, 0] = batch.kv_cache.shape[1]  # a block the cache does not have, inside the context
    with pytest.raises(ValueError, match=r"block_tables\[1, 0\]"):
        paged_decode_attention(
            torch.randn(2, 4, 16), batch.kv_cache, tables, torch.tensor([40, 20], dtype=torch.int32), 0.25
        )


def test_a_compile_failure_falls_back_to_eager_once_and_says_why(monkeypatch, caplog):
    def broken():
        raise RuntimeError("no C++ compiler found")

    monkeypatch.setenv("ASCEND_BACKEND_FUSED_DECODE", "on")
    monkeypatch.setattr(fused_decode, "_failed", None)
    monkeypatch.setattr(fused_decode, "_kernel", broken)
    with caplog.at_level("WARNING", logger="ascend_backend.attention.fused_decode"):
        run_decode([20, 40], block_size=16, kv_heads=2, group=2, head_size=16, dtype=torch.float32)
        run_decode([20, 40], block_size=16, kv_heads=2, group=2, head_size=16, dtype=torch.float32)
    warnings = [r for r in caplog.records if "fused paged decode unavailable" in r.getMessage()]
    assert len(warnings) == 1 and "no C++ compiler found" in warnings[0].getMessage()
    assert "ASCEND_BACKEND_FUSED_DECODE=off" in warnings[0].getMessage()
    assert fused_decode.failure() == "RuntimeError: no C++ compiler found"
    assert not fused_decode.use_fused(torch.device("cpu"), 64, 4096, 8, 128)


def test_auto_policy_compiles_only_for_calls_worth_it(monkeypatch):
    monkeypatch.setenv("ASCEND_BACKEND_FUSED_DECODE", "auto")
    cpu = torch.device("cpu")
    assert not fused_decode.use_fused(cpu, 2, 100, 2, 64)  # 200 KiB of K/V: eager
    assert fused_decode.use_fused(cpu, 32, 1024, 4, 128)  # 128 MiB: fused
    assert not fused_decode.use_fused(torch.device("meta"), 32, 1024, 4, 128)  # CPU only
    monkeypatch.setenv("ASCEND_BACKEND_FUSED_DECODE", "off")
    assert not fused_decode.use_fused(cpu, 32, 1024, 4, 128)
    monkeypatch.setenv("ASCEND_BACKEND_FUSED_DECODE", "sometimes")
    with pytest.raises(ValueError, match="ASCEND_BACKEND_FUSED_DECODE='sometimes'.*auto, on or off"):
        fused_decode.use_fused(cpu, 32, 1024, 4, 128)
