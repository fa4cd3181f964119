"""Property-based test: random allocate / append / free sequences keep the pool's invariants.

An independent model tracks what each block *holds*: when a request writes a block full, the model
records the token prefix whose KV the block now contains; when a block is handed out as a new block,
the model forgets its old content. Every prefix hit is then checked against the model, so a hit on
stale or colliding content fails the test regardless of how the pool reasons internally. Two hashers
run: the real one, and a deliberately weak one (ignores the parent, two buckets) that makes
collisions the norm.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from ascend_backend.kv_cache.block_pool import NULL_BLOCK_ID
from ascend_backend.kv_cache.hashing import BlockHash, hash_block_tokens
from ascend_backend.kv_cache.manager import KVCacheManager


def weak_hash(parent, tokens, extra_keys):
    return BlockHash(hash(tokens) % 2)


BASES = ([0, 1, 2, 0, 1, 2, 0, 1, 2, 0], [0, 1, 2, 2, 2, 1, 0, 0, 1, 2], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1])
TOKENS = st.lists(st.integers(0, 2), max_size=6)


def cdiv(a, b):
    return -(-a // b)


class ManagerMachine(RuleBasedStateMachine):
    @initialize(
        num_blocks=st.integers(4, 14),
        block_size=st.sampled_from([1, 2, 3]),
        hasher=st.sampled_from([hash_block_tokens, weak_hash]),
    )
    def setup(self, num_blocks, block_size, hasher):
        self.m = KVCacheManager(num_blocks, block_size, hash_fn=hasher)
        self.bs = block_size
        self.tokens: dict[str, list[int]] = {}  # the model's own copy of each running request's tokens
        self.holds: dict[int, tuple[int, ...]] = {}  # block id -> token prefix whose KV it holds
        self.next_id = 0
        self.queried = self.hit = 0

    # ------------------------------------------------------------------------------------ rules
    @rule(base=st.sampled_from(BASES), cut=st.integers(0, 10), tail=TOKENS)
    def allocate(self, base, cut, tail):
        prompt = base[:cut] + tail
        if not prompt:
            return
        rid = f"r{self.next_id}"
        self.next_id += 1
        before = self.m.pool.free_block_ids()
        result = self.m.allocate(rid, prompt)
        if result is None:
            assert self.m.pool.free_block_ids() == before
            assert len(before) < cdiv(len(prompt), self.bs)  # refused only when truly short
            return
        c, n, table = result.num_cached_tokens, len(prompt), result.block_table
        assert c % self.bs == 0 and c <= n - 1
        assert len(table) == cdiv(n, self.bs)
        for i in range(c // self.bs):  # every hit holds exactly this prompt's prefix
            assert self.holds.get(table[i]) == tuple(prompt[: (i + 1) * self.bs])
        for block_id in table[c // self.bs :]:
            self.holds.pop(block_id, None)  # new blocks: old content is being overwritten
        assert result.slot_mapping == [table[p // self.bs] * self.bs + p % self.bs for p in range(c, n)]
        self.tokens[rid] = list(prompt)
        self._record_full_blocks(rid, c)
        self.queried += n
        self.hit += c

    @precondition(lambda self: self.tokens)
    @rule(data=st.data(), new=st.lists(st.integers(0, 2), min_size=1, max_size=4))
    def append(self, data, new):
        rid = data.draw(st.sampled_from(sorted(self.tokens)))
        old_len = len(self.tokens[rid])
        old_table = self.m.block_table(rid)
        before = self.m.pool.free_block_ids()
        slots = self.m.append_slots(rid, new)
        if slots is None:
            assert self.m.pool.free_block_ids() == before and self.m.block_table(rid) == old_table
            assert len(before) < cdiv(old_len + len(new), self.bs) - len(old_table)
            return
        table = self.m.block_table(rid)
        assert table[: len(old_table)] == old_table  # block tables are append-only
        for block_id in table[len(old_table) :]:
            self.holds.pop(block_id, None)
        end = old_len + len(new)
        assert slots == [table[p // self.bs] * self.bs + p % self.bs for p in range(old_len, end)]
        self.tokens[rid].extend(new)
        self._record_full_blocks(rid, old_len)

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def free(self, data):
        rid = data.draw(st.sampled_from(sorted(self.tokens)))
        self.m.free(rid)
        del self.tokens[rid]

    def _record_full_blocks(self, rid, computed_from):
        """The request computed tokens[computed_from:]: blocks it filled now hold its prefix."""
        tokens, table = self.tokens[rid], self.m.block_table(rid)
        for i in range(computed_from // self.bs, len(tokens) // self.bs):
            self.holds[table[i]] = tuple(tokens[: (i + 1) * self.bs])

    # ------------------------------------------------------------------------------- invariants
    @invariant()
    def each_block_free_xor_referenced(self):
        if not hasattr(self, "m"):
            return
        free = self.m.pool.free_block_ids()
        assert len(free) == len(set(free))
        users: dict[int, int] = {}
        for rid in self.tokens:
            table = self.m.block_table(rid)
            assert len(table) == len(set(table)) and NULL_BLOCK_ID not in table
            for block_id in table:
                users[block_id] = users.get(block_id, 0) + 1
        for block in self.m.pool.blocks[1:]:
            assert block.ref_count >= 0
            assert block.ref_count == users.get(block.block_id, 0)
            assert (block.ref_count == 0) == (block.block_id in free)
        null = self.m.pool.null_block
        assert null.ref_count == 0 and not null.is_cached and NULL_BLOCK_ID not in free

    @invariant()
    def shared_blocks_only_for_equal_prefixes(self):
        if not hasattr(self, "m"):
            return
        seen: dict[int, tuple[int, tuple[int, ...]]] = {}
        for rid, tokens in self.tokens.items():
            for i, block_id in enumerate(self.m.block_table(rid)):
                prefix = tuple(tokens[: (i + 1) * self.bs])
                if block_id in seen:
                    assert seen[block_id] == (i, prefix)
                    assert len(prefix) == (i + 1) * self.bs  # only full blocks are shared
                seen[block_id] = (i, prefix)

    @invariant()
    def cached_blocks_hold_what_they_claim(self):
        if not hasattr(self, "m"):
            return
        for block_id in self.m.pool.cached_block_ids().values():
            block = self.m.pool.blocks[block_id]
            assert self.holds[block_id][-self.bs :] == block.token_ids

    @invariant()
    def stats_match_the_model(self):
        if not hasattr(self, "m"):
            return
        assert (self.m.stats.queried_tokens, self.m.stats.hit_tokens) == (self.queried, self.hit)


ManagerMachine.TestCase.settings = settings(
    max_examples=120, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestManagerProperties = ManagerMachine.TestCase
