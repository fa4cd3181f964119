"""Chained block hashing: a pure function of (parent hash, block tokens, extra keys)."""

from __future__ import annotations

from ascend_backend.kv_cache.hashing import chain_hashes, full_block_chunks, hash_block_tokens


def test_same_inputs_same_hash_and_pure():
    assert hash_block_tokens(None, (1, 2, 3)) == hash_block_tokens(None, (1, 2, 3))
    h = hash_block_tokens(None, (1, 2, 3))
    assert hash_block_tokens(h, (4, 5, 6)) == hash_block_tokens(h, (4, 5, 6))


def test_hash_depends_on_parent_tokens_and_extra_keys():
    root_a = hash_block_tokens(None, (1, 2))
    root_b = hash_block_tokens(None, (1, 3))
    assert root_a != root_b
    # Same block tokens after different prefixes: different hashes (the chain carries the prefix).
    assert hash_block_tokens(root_a, (7, 8)) != hash_block_tokens(root_b, (7, 8))
    # A LoRA adapter / cache salt changes the first block, hence the whole chain.
    salted = hash_block_tokens(None, (1, 2), ("lora-a",))
    assert salted != root_a
    assert hash_block_tokens(salted, (7, 8)) != hash_block_tokens(root_a, (7, 8))
    # Order inside a block matters.
    assert hash_block_tokens(None, (2, 1)) != root_a


def test_full_block_chunks_drops_partial_tail_and_can_start_later():
    assert full_block_chunks([5, 6, 7, 8, 9], 2) == [(5, 6), (7, 8)]
    assert full_block_chunks([5, 6, 7, 8, 9], 2, start_block=1) == [(7, 8)]
    assert full_block_chunks([5], 2) == []
    assert full_block_chunks(list(range(8)), 4) == [(0, 1, 2, 3), (4, 5, 6, 7)]


def test_chain_hashes_matches_step_by_step_chaining():
    chunks = [(5, 6), (7, 8), (9, 10)]
    h0 = hash_block_tokens(None, (5, 6), ("salt",))
    h1 = hash_block_tokens(h0, (7, 8))
    h2 = hash_block_tokens(h1, (9, 10))
    assert chain_hashes(chunks, extra_keys=("salt",)) == [h0, h1, h2]
    # Continuing a chain from a known parent gives the same tail.
    assert chain_hashes(chunks[1:], parent=h0) == [h1, h2]
    assert len(set(chain_hashes(chunks))) == 3
