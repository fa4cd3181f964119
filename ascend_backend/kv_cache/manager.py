"""Per-request KV-cache bookkeeping on top of `BlockPool`: prefix hits, slots, block tables, stats.

What a model executor gets from it
    allocate(request_id, prompt)   -> Allocation | None   prefill: hit length, block table, new slots
    append_slots(request_id, toks) -> slots | None        decode: a slot for each new token
    free(request_id)                                       finished or preempted
    block_table(request_id)        -> list[BlockId]

None means "not enough free blocks now": nothing was changed, so the scheduler can wait or preempt
another request and retry. Errors a caller causes (unknown or duplicate request ids, empty prompts)
raise `KVCacheRequestError` naming the request.

Slot mapping: the KV of the token at position p of a request goes to
    slot = block_table[p // block_size] * block_size + p % block_size
i.e. the flat index into the cache viewed as [num_blocks * block_size, kv_heads, head_size].
Worked example, block_size = 4, prompt of 10 tokens, first 4 tokens a prefix hit on block 7, new
blocks 3 and 9:
    block_table  = [7, 3, 9]
    positions      4  5  6  7 | 8  9          (positions 0..3 are cached: no slots)
    slot_mapping = [12, 13, 14, 15, 36, 37]    (3*4+0 .. 3*4+3, then 9*4+0, 9*4+1)

Prefix caching: every full block is offered to the cache as soon as it is full (at allocation for
the prompt, in `append_slots` during decode), so a request that arrives later with the same prefix
hits it. The hit is capped at `num_tokens - 1` tokens, because the last prompt token must be run
through the model to get the logits of the next token; since hits are whole blocks, a fully cached
prompt recomputes its whole last block. Caching a block before its KV is written is safe for the same
reason it is in vLLM: the request that owns it writes it in the very step it is scheduled, before any
later request can read it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ascend_backend.kv_cache.block_pool import Block, BlockId, BlockPool
from ascend_backend.kv_cache.hashing import NO_EXTRA_KEYS, BlockHash, ExtraKeys, hash_block_tokens

RequestId = str

BlockHasher = Callable[[BlockHash | None, tuple[int, ...], ExtraKeys], BlockHash]
"""Signature of `hashing.hash_block_tokens`: (parent hash, block tokens, extra keys) -> hash."""


class KVCacheRequestError(ValueError):
    """A caller used a request id the manager cannot accept (unknown, duplicate) or an empty prompt."""


@dataclass(frozen=True, slots=True)
class CacheStats:
    """Prefix-cache counters since construction (or `reset_stats`), counted per successful allocate."""

    requests: int
    queried_tokens: int
    hit_tokens: int

    @property
    def hit_rate(self) -> float:
        """Fraction of prompt tokens served from the cache (0.0 when nothing was queried)."""
        return self.hit_tokens / self.queried_tokens if self.queried_tokens else 0.0


@dataclass(frozen=True, slots=True)
class Allocation:
    """Result of `KVCacheManager.allocate` for one prompt.

    num_cached_tokens: prompt tokens whose KV is already in the cache (a multiple of block_size);
        the model runs only tokens[num_cached_tokens:].
    block_table: one block id per `block_size` tokens of the prompt (cached blocks first).
    """

    num_cached_tokens: int
    num_tokens: int
    block_size: int
    block_table: tuple[BlockId, ...]

    @property
    def num_new_tokens(self) -> int:
        return self.num_tokens - self.num_cached_tokens

    @property
    def slot_mapping(self) -> list[int]:
        """Cache slot of each new token, positions num_cached_tokens .. num_tokens-1 (module docstring).

        Built per block (one `range` per block), not per token in Python.
        """
        return _slots(self.block_table, self.block_size, self.num_cached_tokens, self.num_tokens)


def _slots(block_ids: Sequence[BlockId], block_size: int, start: int, end: int) -> list[int]:
    """Slots of positions start .. end-1 given a request's block ids (see module docstring)."""
    slots: list[int] = []
    pos = start
    while pos < end:
        index, offset = divmod(pos, block_size)
        stop = min(end, (index + 1) * block_size)
        base = block_ids[index] * block_size - index * block_size
        slots.extend(range(base + pos, base + stop))
        pos = stop
    return slots


@dataclass(slots=True)
class _RequestState:
    """What the manager keeps per running request.

    `hashes`/`chunks` cover the full blocks of `token_ids`, computed once each (never re-hashed).
    `num_offered` full blocks have been offered to the cache; `chain_parent` is the cached block that
    stands for the prefix before block `num_offered` (None at the start of the request), seen at
    `chain_epoch`; `chain_intact` turns False after a collision, when nothing later can be cached.
    """

    token_ids: list[int]
    blocks: list[Block]
    extra_keys: ExtraKeys
    hashes: list[BlockHash] = field(default_factory=list)
    chunks: list[tuple[int, ...]] = field(default_factory=list)
    num_offered: int = 0
    chain_parent: Block | None = None
    chain_epoch: int = 0
    chain_intact: bool = True


class KVCacheManager:
    """Allocates paged-KV blocks per request with prefix caching; see the module docstring.

    num_blocks: blocks in the cache tensor (including the reserved null block, see `block_pool`).
    block_size: tokens per block (kv_cache.sizing says which sizes each target accepts).
    enable_prefix_caching: off = every request allocates fresh blocks and nothing is cached.
    hash_fn: the block hasher; tests pass a deliberately colliding one to show that a hit never
        trusts the hash alone.
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        enable_prefix_caching: bool = True,
        hash_fn: BlockHasher = hash_block_tokens,
    ) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self._hash_fn = hash_fn
        self.pool = BlockPool(num_blocks)
        self._requests: dict[RequestId, _RequestState] = {}
        self._num_requests = 0
        self._queried_tokens = 0
        self._hit_tokens = 0

    # ------------------------------------------------------------------------------- public API
    def allocate(
        self, request_id: RequestId, token_ids: Sequence[int], extra_keys: ExtraKeys = NO_EXTRA_KEYS
    ) -> Allocation | None:
        """Admit a prompt: reuse its longest cached prefix and allocate blocks for the rest.

        Returns None, changing nothing, when the free blocks do not suffice. Counts toward `stats`
        only when it succeeds, so a retried request is not counted twice.
        """
        if request_id in self._requests:
            raise KVCacheRequestError(f"request {request_id!r} already holds KV blocks; free() it first")
        num_tokens = len(token_ids)
        if num_tokens == 0:
            raise KVCacheRequestError(f"request {request_id!r} has an empty prompt; nothing to allocate")
        bs = self.block_size
        state = _RequestState(list(token_ids), [], extra_keys)
        hits: list[Block] = []
        if self.enable_prefix_caching:
            self._extend_hashes(state)
            hits = self.pool.find_prefix(state.hashes, state.chunks, (num_tokens - 1) // bs, extra_keys)
        num_new = -(-num_tokens // bs) - len(hits)
        # A hit on a free cached block takes it out of the free queue, so it costs a free block too.
        reviving = sum(1 for b in hits if b.ref_count == 0)
        if num_new + reviving > self.pool.num_free_blocks:
            return None
        self.pool.touch(hits)
        state.blocks = hits + self.pool.allocate(num_new)
        if hits:
            state.num_offered = len(hits)
            state.chain_parent = hits[-1]
            state.chain_epoch = hits[-1].epoch
        if self.enable_prefix_caching:
            self._offer_full_blocks(state)
        self._requests[request_id] = state
        num_cached = len(hits) * bs
        self._num_requests += 1
        self._queried_tokens += num_tokens
        self._hit_tokens += num_cached
        return Allocation(num_cached, num_tokens, bs, tuple(b.block_id for b in state.blocks))

    def append_slots(self, request_id: RequestId, new_token_ids: Sequence[int]) -> list[int] | None:
        """Append decoded (or speculative) tokens; return the cache slot of each, or None if out of blocks.

        None leaves the request unchanged: the caller may preempt another request and retry.
        """
        state = self._state(request_id)
        tokens = state.token_ids
        start = len(tokens)
        end = start + len(new_token_ids)
        blocks = state.blocks
        num_new = -(-end // self.block_size) - len(blocks)
        if num_new > 0:
            if num_new > self.pool.num_free_blocks:
                return None
            blocks.extend(self.pool.allocate(num_new))
        tokens.extend(new_token_ids)
        bs = self.block_size
        if end - start == 1:  # decode fast path: one token, one slot
            slots = [blocks[start // bs].block_id * bs + start % bs]
        else:
            slots = _slots([b.block_id for b in blocks], bs, start, end)
        if self.enable_prefix_caching and end // bs > state.num_offered:
            self._extend_hashes(state)
            self._offer_full_blocks(state)
        return slots

    def free(self, request_id: RequestId) -> None:
        """Release a request's blocks, tail first, so the tail of its prefix chain is evicted first."""
        state = self._requests.pop(request_id, None)
        if state is None:
            raise KVCacheRequestError(f"request {request_id!r} holds no KV blocks (never allocated or already freed)")
        self.pool.free(reversed(state.blocks))

    def block_table(self, request_id: RequestId) -> list[BlockId]:
        """Block ids of the request, one per `block_size` tokens, in token order."""
        return [b.block_id for b in self._state(request_id).blocks]

    def num_tokens(self, request_id: RequestId) -> int:
        return len(self._state(request_id).token_ids)

    def has_request(self, request_id: RequestId) -> bool:
        return request_id in self._requests

    @property
    def num_free_blocks(self) -> int:
        return self.pool.num_free_blocks

    @property
    def usage(self) -> float:
        return self.pool.usage

    @property
    def stats(self) -> CacheStats:
        return CacheStats(self._num_requests, self._queried_tokens, self._hit_tokens)

    def reset_stats(self) -> None:
        self._num_requests = self._queried_tokens = self._hit_tokens = 0

    def reset_prefix_cache(self) -> bool:
        """Drop every cached block (after a weight update). False, and nothing dropped, while requests run."""
        return self.pool.reset_prefix_cache()

    # ------------------------------------------------------------------------------- internals
    def _state(self, request_id: RequestId) -> _RequestState:
        state = self._requests.get(request_id)
        if state is None:
            raise KVCacheRequestError(f"request {request_id!r} holds no KV blocks; allocate() it first")
        return state

    def _extend_hashes(self, state: _RequestState) -> None:
        """Hash the request's full blocks that are not hashed yet (each block is hashed once)."""
        bs = self.block_size
        tokens = state.token_ids
        hashes, chunks = state.hashes, state.chunks
        parent = hashes[-1] if hashes else None
        hash_fn = self._hash_fn
        for start in range(len(hashes) * bs, len(tokens) // bs * bs, bs):
            chunk = tuple(tokens[start : start + bs])
            parent = hash_fn(parent, chunk, state.extra_keys if parent is None else NO_EXTRA_KEYS)
            hashes.append(parent)
            chunks.append(chunk)

    def _offer_full_blocks(self, state: _RequestState) -> None:
        """Offer full, not yet offered blocks to the prefix cache, keeping the parent chain."""
        full = len(state.token_ids) // self.block_size
        if state.chain_intact:
            pool, blocks, hashes, chunks = self.pool, state.blocks, state.hashes, state.chunks
            parent, epoch = state.chain_parent, state.chain_epoch
            for i in range(state.num_offered, full):
                canonical = pool.cache(blocks[i], hashes[i], chunks[i], parent, epoch, state.extra_keys)
                if canonical is None:
                    state.chain_intact = False
                    break
                parent, epoch = canonical, canonical.epoch
            state.chain_parent, state.chain_epoch = parent, epoch
        state.num_offered = full
