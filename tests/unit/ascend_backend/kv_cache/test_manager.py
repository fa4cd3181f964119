"""KVCacheManager scenarios with exact block ids, ref counts, free-queue order, slots and stats.

In the style of vLLM's tests/v1/core/test_prefix_caching.py: every expectation is worked out by hand
from the documented rules (free queue starts in id order; freed uncached blocks go to the front,
freed cached blocks to the back; a request is freed tail first; hits are capped at num_tokens - 1).
"""

from __future__ import annotations

import pytest

from ascend_backend.kv_cache.hashing import BlockHash, chain_hashes, full_block_chunks
from ascend_backend.kv_cache.manager import Allocation, CacheStats, KVCacheManager, KVCacheRequestError


def refs(manager, *block_ids):
    return [manager.pool.blocks[i].ref_count for i in block_ids]


def cached_prefix_blocks(manager, tokens):
    """How many leading blocks of `tokens` the pool would serve (a lookup that allocates nothing)."""
    chunks = full_block_chunks(tokens, manager.block_size)
    return len(manager.pool.find_prefix(chain_hashes(chunks), chunks, len(chunks)))


def cached_ids(manager):
    return sorted(manager.pool.cached_block_ids().values())


COMMON = list(range(12))  # three full blocks of 4 tokens


def test_prefill_then_prefix_hit_then_free_order():
    m = KVCacheManager(num_blocks=11, block_size=4)

    a = m.allocate("a", COMMON + [100, 101, 102])  # 15 tokens -> 4 blocks, 3 of them full
    assert a == Allocation(num_cached_tokens=0, num_tokens=15, block_size=4, block_table=(1, 2, 3, 4))
    assert a.slot_mapping == list(range(4, 19))  # block 1 holds slots 4..7, ..., block 4 slots 16..18
    assert m.pool.free_block_ids() == [5, 6, 7, 8, 9, 10]
    assert cached_ids(m) == [1, 2, 3]  # full blocks are cached at once; the partial block 4 is not

    b = m.allocate("b", COMMON + [200, 201])
    assert b.num_cached_tokens == 12 and b.num_new_tokens == 2
    assert b.block_table == (1, 2, 3, 5)
    assert b.slot_mapping == [20, 21]
    assert refs(m, 1, 2, 3, 4, 5) == [2, 2, 2, 1, 1]
    assert m.pool.free_block_ids() == [6, 7, 8, 9, 10]
    assert m.stats == CacheStats(requests=2, queried_tokens=29, hit_tokens=12)
    assert m.stats.hit_rate == pytest.approx(12 / 29)

    m.free("a")  # 4 -> front; 3, 2, 1 still used by b
    assert refs(m, 1, 2, 3, 4) == [1, 1, 1, 0]
    assert m.pool.free_block_ids() == [4, 6, 7, 8, 9, 10]
    m.free("b")  # tail first: 5 (uncached) -> front; 3, 2, 1 (cached) -> back, in that order
    assert m.pool.free_block_ids() == [5, 4, 6, 7, 8, 9, 10, 3, 2, 1]
    assert cached_ids(m) == [1, 2, 3]  # lazy eviction: freed blocks keep their content

    c = m.allocate("c", COMMON + [300])  # hits the free cached blocks, taking them out of the queue
    assert c.block_table == (1, 2, 3, 5)
    assert refs(m, 1, 2, 3, 5) == [1, 1, 1, 1]
    assert m.pool.free_block_ids() == [4, 6, 7, 8, 9, 10]


def test_hit_is_capped_so_the_last_token_is_recomputed():
    m = KVCacheManager(num_blocks=11, block_size=4)
    m.allocate("a", COMMON)
    again = m.allocate("b", COMMON)  # all 3 blocks cached, but the last token needs its logits
    assert again.num_cached_tokens == 8
    assert again.block_table == (1, 2, 4)
    assert again.slot_mapping == [16, 17, 18, 19]
    # Block 4 holds the same content as block 3: it stays uncached (block tables are append-only).
    assert cached_ids(m) == [1, 2, 3]
    one_more = m.allocate("c", COMMON + [1])
    assert one_more.num_cached_tokens == 12 and one_more.block_table == (1, 2, 3, 5)


def test_decoded_blocks_are_cached_for_the_next_turn_even_after_a_recomputed_block():
    m = KVCacheManager(num_blocks=11, block_size=4)
    m.allocate("turn1", COMMON)
    m.free("turn1")
    assert m.pool.free_block_ids() == [4, 5, 6, 7, 8, 9, 10, 3, 2, 1]
    # Same prompt again: blocks 1, 2 hit, block 3's content is recomputed into block 4.
    second = m.allocate("turn2", COMMON)
    assert second.block_table == (1, 2, 4)
    assert second.num_cached_tokens == 8
    assert m.pool.free_block_ids() == [5, 6, 7, 8, 9, 10, 3]
    assert m.append_slots("turn2", [50]) == [5 * 4 + 0]  # position 12 opens block 5
    assert m.append_slots("turn2", [51, 52, 53]) == [21, 22, 23]  # block 5 is now full -> cached
    assert cached_ids(m) == [1, 2, 3, 5]
    # Block 5 was computed after the twin block 4; it is chained to the cached block 3 (same
    # content), so the next turn hits the whole conversation so far.
    third = m.allocate("turn3", COMMON + [50, 51, 52, 53, 60])
    assert third.num_cached_tokens == 16
    assert third.block_table == (1, 2, 3, 5, 6)


def test_append_slots_allocates_only_at_block_boundaries():
    m = KVCacheManager(num_blocks=4, block_size=4)  # usable blocks 1, 2, 3
    m.allocate("a", [1, 2, 3])
    assert m.append_slots("a", [4]) == [7]  # fills block 1
    assert m.pool.free_block_ids() == [2, 3]
    assert m.append_slots("a", [5, 6, 7, 8, 9]) == [8, 9, 10, 11, 12]  # blocks 2 and 3
    assert m.block_table("a") == [1, 2, 3]
    assert m.num_tokens("a") == 9
    assert m.append_slots("a", [10, 11, 12]) == [13, 14, 15]
    # Out of blocks: None, and the request is unchanged.
    assert m.append_slots("a", [13]) is None
    assert m.num_tokens("a") == 12 and m.block_table("a") == [1, 2, 3]
    assert m.append_slots("a", []) == []


def test_allocate_returns_none_and_changes_nothing_when_blocks_run_out():
    m = KVCacheManager(num_blocks=5, block_size=4)  # usable blocks 1..4
    m.allocate("a", list(range(8)))
    m.free("a")
    assert m.pool.free_block_ids() == [3, 4, 2, 1]
    before = (m.pool.free_block_ids(), m.pool.cached_block_ids(), m.stats)
    # 2 free cached hits + 3 new blocks = 5 > 4 free: refused (reviving a free hit costs a free block).
    assert m.allocate("b", list(range(8)) + list(range(100, 109))) is None
    assert (m.pool.free_block_ids(), m.pool.cached_block_ids(), m.stats) == before
    assert not m.has_request("b")
    # 2 hits + 2 new blocks = 4: fits exactly; the new blocks are taken from the front.
    fits = m.allocate("b", list(range(8)) + list(range(100, 108)))
    assert fits.block_table == (1, 2, 3, 4)
    assert m.num_free_blocks == 0 and m.usage == 1.0


def test_lru_eviction_takes_the_least_recently_freed_chain_tail_first():
    m = KVCacheManager(num_blocks=9, block_size=2)  # usable blocks 1..8
    old = [1, 1, 2, 2, 3, 3]
    new = [7, 7, 8, 8, 9, 9]
    m.allocate("old", old)
    m.allocate("new", new)
    m.free("old")
    m.free("new")
    assert m.pool.free_block_ids() == [7, 8, 3, 2, 1, 6, 5, 4]
    m.allocate("filler", list(range(100, 108)))  # 4 blocks: 7, 8, then evicts old's tail 3 and 2
    assert m.block_table("filler") == [7, 8, 3, 2]
    # Blocks 3 and 2 now hold the filler's tokens; only the head of the old chain is left.
    assert [m.pool.blocks[i].token_ids for i in (1, 2, 3)] == [(1, 1), (106, 107), (104, 105)]
    assert [m.pool.blocks[i].token_ids for i in (4, 5, 6)] == [(7, 7), (8, 8), (9, 9)]
    assert cached_prefix_blocks(m, old) == 1  # only the head block of the old chain survived
    assert cached_prefix_blocks(m, new) == 3  # the recently used chain is intact


def test_colliding_hash_never_serves_other_tokens():
    def constant_hash(parent, tokens, extra_keys):  # every block collides with every other
        return BlockHash(42)

    m = KVCacheManager(num_blocks=11, block_size=2, hash_fn=constant_hash)
    m.allocate("a", [1, 2, 3, 4, 5])
    # Block 2 collides with block 1 (same hash, other tokens): it is not cached, nor anything after it.
    assert cached_ids(m) == [1]
    other_first = m.allocate("b", [9, 9, 3, 4, 5])
    assert other_first.num_cached_tokens == 0
    same_first = m.allocate("c", [1, 2, 7, 7, 5])
    assert same_first.num_cached_tokens == 2
    assert same_first.block_table[0] == 1 and m.pool.blocks[1].token_ids == (1, 2)


def test_same_tokens_after_another_prefix_are_never_served():
    def parent_blind_hash(parent, tokens, extra_keys):  # collides whenever the block tokens match
        return BlockHash(hash(tokens))

    m = KVCacheManager(num_blocks=11, block_size=2, hash_fn=parent_blind_hash)
    m.allocate("a", [1, 2, 3, 4, 0])  # caches block 1 = (1, 2) and block 2 = (3, 4) after it
    m.allocate("b", [5, 6, 3, 4, 0])  # block 4 = (5, 6) cached; its (3, 4) collides with block 2
    assert m.block_table("b") == [4, 5, 6]
    assert cached_ids(m) == [1, 2, 4]
    # (5, 6) hits block 4; the entry for (3, 4) is block 2, whose KV was computed after (1, 2).
    probe = m.allocate("c", [5, 6, 3, 4, 0])
    assert probe.num_cached_tokens == 2 and probe.block_table[0] == 4


def test_extra_keys_isolate_adapters():
    m = KVCacheManager(num_blocks=11, block_size=4)
    m.allocate("base", COMMON + [1])
    assert m.allocate("lora", COMMON + [1], extra_keys=("adapter-a",)).num_cached_tokens == 0
    assert m.allocate("lora-2", COMMON + [1], extra_keys=("adapter-a",)).num_cached_tokens == 12
    assert m.allocate("base-2", COMMON + [1]).num_cached_tokens == 12


def test_prefix_caching_off_never_hits_and_frees_to_the_front():
    m = KVCacheManager(num_blocks=6, block_size=2, enable_prefix_caching=False)
    m.allocate("a", [1, 2, 3, 4])
    m.free("a")
    assert m.pool.free_block_ids() == [2, 1, 3, 4, 5]
    assert m.allocate("b", [1, 2, 3, 4, 5]).num_cached_tokens == 0
    assert m.pool.cached_block_ids() == {}
    assert m.stats == CacheStats(requests=2, queried_tokens=9, hit_tokens=0)


def test_slot_mapping_worked_example_from_the_docstring():
    allocation = Allocation(num_cached_tokens=4, num_tokens=10, block_size=4, block_table=(7, 3, 9))
    assert allocation.slot_mapping == [12, 13, 14, 15, 36, 37]
    expected = [allocation.block_table[p // 4] * 4 + p % 4 for p in range(4, 10)]  # the formula itself
    assert allocation.slot_mapping == expected


def test_request_errors_name_the_request():
    m = KVCacheManager(num_blocks=6, block_size=2)
    m.allocate("a", [1, 2, 3])
    with pytest.raises(KVCacheRequestError, match="'a' already holds KV blocks"):
        m.allocate("a", [1])
    with pytest.raises(KVCacheRequestError, match="'e' has an empty prompt"):
        m.allocate("e", [])
    for call in (m.free, m.block_table, lambda rid: m.append_slots(rid, [1])):
        with pytest.raises(KVCacheRequestError, match="'ghost' holds no KV blocks"):
            call("ghost")
    m.free("a")
    with pytest.raises(KVCacheRequestError, match="already freed"):
        m.free("a")


def test_stats_reset_and_prefix_cache_reset():
    m = KVCacheManager(num_blocks=6, block_size=2)
    m.allocate("a", [1, 2, 3])
    assert m.reset_prefix_cache() is False  # a request still runs
    m.free("a")
    assert m.allocate("b", [1, 2, 3]).num_cached_tokens == 2
    m.free("b")
    assert m.reset_prefix_cache() is True
    assert m.allocate("c", [1, 2, 3]).num_cached_tokens == 0
    assert m.stats.requests == 3
    m.reset_stats()
    assert m.stats == CacheStats(0, 0, 0) and m.stats.hit_rate == 0.0
