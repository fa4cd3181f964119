"""BlockPool scenarios with exact block ids, ref counts and free-queue order."""

from __future__ import annotations

import pytest

from ascend_backend.kv_cache.block_pool import NULL_BLOCK_ID, BlockPool
from ascend_backend.kv_cache.hashing import hash_block_tokens


def ids(blocks):
    return [b.block_id for b in blocks]


def cache_chain(pool, blocks, chunks, extra_keys=()):
    """Cache `blocks` as one prefix chain holding `chunks`; return the hashes used."""
    parent, epoch, h, hashes = None, 0, None, []
    for block, chunk in zip(blocks, chunks, strict=True):
        h = hash_block_tokens(h, chunk, extra_keys if h is None else ())
        assert pool.cache(block, h, chunk, parent, epoch, extra_keys) is block
        parent, epoch = block, block.epoch
        hashes.append(h)
    return hashes


def test_initial_state_reserves_null_block():
    pool = BlockPool(6)
    assert pool.free_block_ids() == [1, 2, 3, 4, 5]
    assert pool.num_free_blocks == 5
    assert pool.num_usable_blocks == 5
    assert pool.null_block.block_id == NULL_BLOCK_ID == 0
    assert pool.usage == 0.0


def test_too_small_pool_names_the_fix():
    with pytest.raises(ValueError, match="at least 2 blocks.*null block"):
        BlockPool(1)


def test_allocate_pops_front_and_sets_ref_count():
    pool = BlockPool(6)
    blocks = pool.allocate(3)
    assert ids(blocks) == [1, 2, 3]
    assert [b.ref_count for b in blocks] == [1, 1, 1]
    assert pool.free_block_ids() == [4, 5]
    assert pool.usage == pytest.approx(3 / 5)
    with pytest.raises(ValueError, match="cannot allocate 3 blocks: only 2 free"):
        pool.allocate(3)
    assert pool.free_block_ids() == [4, 5]  # a refused allocation takes nothing


def test_free_puts_uncached_first_and_cached_last_in_given_order():
    pool = BlockPool(8)
    blocks = pool.allocate(5)  # ids 1..5
    cache_chain(pool, blocks[:2], [(1, 2), (3, 4)])  # 1 and 2 cached
    # Free tail first, as the manager does: 5, 4, 3 uncached -> front (in that order); 2, 1 cached -> back.
    pool.free(reversed(blocks))
    assert pool.free_block_ids() == [5, 4, 3, 6, 7, 2, 1]
    assert [b.ref_count for b in pool.blocks] == [0] * 8


def test_touch_removes_free_cached_block_from_middle_of_queue():
    pool = BlockPool(6)
    blocks = pool.allocate(2)
    cache_chain(pool, blocks, [(1, 2), (3, 4)])
    pool.free(reversed(blocks))
    assert pool.free_block_ids() == [3, 4, 5, 2, 1]
    pool.touch([pool.blocks[2]])
    assert pool.free_block_ids() == [3, 4, 5, 1]
    assert pool.blocks[2].ref_count == 1
    pool.touch([pool.blocks[2]])  # already owned: just one more reference
    assert pool.blocks[2].ref_count == 2
    assert pool.free_block_ids() == [3, 4, 5, 1]


def test_allocating_a_free_cached_block_evicts_it():
    pool = BlockPool(4)
    blocks = pool.allocate(3)
    hashes = cache_chain(pool, blocks, [(1,), (2,), (3,)])
    pool.free(reversed(blocks))
    assert pool.free_block_ids() == [3, 2, 1]  # tail of the chain is evicted first
    epoch_before = pool.blocks[3].epoch
    (taken,) = pool.allocate(1)
    assert taken.block_id == 3
    assert not taken.is_cached and taken.token_ids is None and taken.parent is None
    assert taken.epoch == epoch_before + 1
    assert pool.cached_block_ids() == {hashes[0]: 1, hashes[1]: 2}


def test_find_prefix_compares_tokens_parent_and_epoch():
    pool = BlockPool(6)
    blocks = pool.allocate(2)
    hashes = cache_chain(pool, blocks, [(1, 2), (3, 4)])
    assert ids(pool.find_prefix(hashes, [(1, 2), (3, 4)], max_blocks=2)) == [1, 2]
    assert ids(pool.find_prefix(hashes, [(1, 2), (3, 4)], max_blocks=1)) == [1]
    # Right hash, wrong tokens (what a collision looks like): no hit from there on.
    assert ids(pool.find_prefix(hashes, [(1, 2), (3, 5)], max_blocks=2)) == [1]
    assert ids(pool.find_prefix(hashes, [(9, 9), (3, 4)], max_blocks=2)) == []
    # Extra keys of the first block must match too.
    assert pool.find_prefix(hashes, [(1, 2), (3, 4)], max_blocks=2, extra_keys=("lora",)) == []


def test_child_of_an_evicted_parent_is_never_hit():
    pool = BlockPool(5)
    parent, child = pool.allocate(2)  # blocks 1, 2
    hashes = cache_chain(pool, [parent, child], [(1,), (2,)])
    pool.free([parent, child])  # head first, so the parent is evicted before its child
    assert pool.free_block_ids() == [3, 4, 1, 2]
    taken = pool.allocate(3)
    assert ids(taken) == [3, 4, 1]  # the parent (block 1) is evicted; the child stays cached
    assert child.is_cached and child.parent is parent
    # Block 1 is re-cached with the very same content and hash, but in a new epoch: the child was
    # computed against the old content, so it must not be served after it.
    assert pool.cache(parent, hashes[0], (1,), None, 0) is parent
    assert parent.epoch == 1 and child.parent_epoch == 0
    assert ids(pool.find_prefix(hashes, [(1,), (2,)], max_blocks=2)) == [1]


def test_cache_returns_twin_for_duplicate_content_and_none_for_collision():
    pool = BlockPool(6)
    a, b, c = pool.allocate(3)
    h = hash_block_tokens(None, (1, 2))
    assert pool.cache(a, h, (1, 2), None, 0) is a
    assert pool.cache(b, h, (1, 2), None, 0) is a  # same content: the cached twin stands for it
    assert not b.is_cached
    assert pool.cache(c, h, (7, 7), None, 0) is None  # same hash, other tokens: refused
    assert not c.is_cached
    assert pool.cached_block_ids() == {h: 1}


def test_cache_refuses_parent_seen_at_an_older_epoch():
    pool = BlockPool(4)
    parent, child = pool.allocate(2)
    h0 = hash_block_tokens(None, (1,))
    pool.cache(parent, h0, (1,), None, 0)
    assert pool.cache(child, hash_block_tokens(h0, (2,)), (2,), parent, parent.epoch + 1) is None


def test_over_free_and_null_block_are_rejected():
    pool = BlockPool(4)
    (block,) = pool.allocate(1)
    pool.free([block])
    with pytest.raises(ValueError, match="freed more often"):
        pool.free([block])
    with pytest.raises(ValueError, match="freed more often"):
        pool.free([pool.null_block])
    with pytest.raises(ValueError, match="owned, non-null"):
        pool.cache(pool.null_block, hash_block_tokens(None, (1,)), (1,), None, 0)


def test_reset_prefix_cache_only_when_nothing_is_owned():
    pool = BlockPool(4)
    blocks = pool.allocate(2)
    cache_chain(pool, blocks, [(1,), (2,)])
    assert pool.reset_prefix_cache() is False
    assert len(pool.cached_block_ids()) == 2
    pool.free(reversed(blocks))
    assert pool.reset_prefix_cache() is True
    assert pool.cached_block_ids() == {}
    assert not any(b.is_cached for b in pool.blocks)
    assert pool.free_block_ids() == [3, 2, 1]  # order kept; the blocks are now plain free blocks
