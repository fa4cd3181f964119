"""The pool of KV-cache blocks: free queue, reference counts, and the prefix cache (hash -> block).

A *block* is `block_size` consecutive token slots of the paged KV cache; its id indexes the cache
tensor (`[2, num_blocks, block_size, num_kv_heads, head_size]` on Ascend). This module is pure
bookkeeping — no torch — so it is fast to test with exact expectations.

Life of a block
    free (ref_count 0, in the free queue)  --allocate-->  owned (ref_count >= 1)
    owned, full  --cache-->  owned and cached (findable by its chained hash)
    owned  --free (last reference)-->  free; a cached block *keeps* its hash and content, so a later
                                       request can still hit it ("lazy eviction")
    free and cached  --hit (touch)-->  owned again, taken out of the middle of the free queue
    free and cached  --allocated to someone else-->  its hash is dropped: this is *eviction*

Eviction order (the free queue, front = reused first):
    1. At start: ascending block id.
    2. A freed block that holds nothing reusable (never cached) goes to the *front*: reusing it loses
       nothing, and hot memory is reused first.
    3. A freed cached block goes to the *back*: the least recently used cached block is evicted first.
    4. The manager frees a request's blocks tail-first, so among blocks freed together the tail of a
       prefix chain (least likely to be shared) is evicted before its head.

Why an `OrderedDict` for the free queue: it is a hash map threaded on a doubly linked list, written in
C. It gives what vLLM's hand-written linked list gives — O(1) pop from the front, O(1) append and
prepend, O(1) removal from the middle when a hit revives a free cached block — without per-node
Python attribute writes.

The null block (`NULL_BLOCK_ID`, id 0) is reserved: never allocated, freed, or cached. A model
executor pads block tables with it (e.g. for blocks skipped by sliding-window attention), so it must
always point at valid memory that no request owns.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NewType

from ascend_backend.kv_cache.hashing import NO_EXTRA_KEYS, BlockHash, ExtraKeys

BlockId = NewType("BlockId", int)
"""Index of a block in the KV-cache tensor's block dimension."""

NULL_BLOCK_ID = BlockId(0)
"""The reserved padding block: never handed to a request, never cached, never freed."""


@dataclass(slots=True, eq=False)
class Block:
    """Metadata of one block. Mutable on purpose: the pool updates it in place on every step.

    `block_hash`, `token_ids`, `parent`, `parent_epoch` and `extra_keys` are set while the block is
    cached and describe its content exactly: the KV of `token_ids` computed after the content of
    `parent` as it was at `parent_epoch` (or after nothing, with `extra_keys`, when `parent` is None).
    `epoch` counts evictions; a child whose `parent_epoch` differs from its parent's `epoch` was
    computed against content that no longer exists and can never be hit.
    """

    block_id: BlockId
    ref_count: int = 0
    block_hash: BlockHash | None = None
    token_ids: tuple[int, ...] | None = None
    parent: Block | None = None
    parent_epoch: int = 0
    extra_keys: ExtraKeys = NO_EXTRA_KEYS
    epoch: int = 0

    @property
    def is_cached(self) -> bool:
        return self.block_hash is not None

    def __repr__(self) -> str:  # parent printed by id: the chain can be long
        parent = None if self.parent is None else self.parent.block_id
        return f"Block(id={self.block_id}, ref={self.ref_count}, cached={self.is_cached}, parent={parent})"


class BlockPool:
    """`num_blocks` blocks: id 0 is the null block, ids 1 .. num_blocks-1 are handed out.

    The pool does not know about requests; the manager (`manager.KVCacheManager`) holds per-request
    block lists and calls `allocate`, `touch`, `cache`, `find_prefix` and `free`.
    """

    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 2:
            raise ValueError(
                f"BlockPool needs at least 2 blocks (one is the reserved null block), got {num_blocks}; "
                "give the KV cache more memory (see kv_cache.sizing)"
            )
        self.num_blocks = num_blocks
        self.blocks: list[Block] = [Block(BlockId(i)) for i in range(num_blocks)]
        self.null_block: Block = self.blocks[NULL_BLOCK_ID]
        # block id -> block, in eviction order (front first); see the module docstring.
        self._free: OrderedDict[BlockId, Block] = OrderedDict((b.block_id, b) for b in self.blocks[1:])
        # Prefix cache: at most one block per hash. A second block with the same content (two requests
        # that computed the same prefix before either was cached) stays uncached: block tables are
        # append-only, so we never swap a request's block for the cached twin.
        self._cached: dict[BlockHash, Block] = {}

    # ----------------------------------------------------------------------------------- queries
    @property
    def num_free_blocks(self) -> int:
        """Blocks that an allocation may take now (free, including cached blocks it would evict)."""
        return len(self._free)

    @property
    def num_usable_blocks(self) -> int:
        """All blocks except the null block."""
        return self.num_blocks - 1

    @property
    def usage(self) -> float:
        """Fraction of usable blocks owned by requests (0.0 .. 1.0)."""
        return 1.0 - len(self._free) / (self.num_blocks - 1)

    def free_block_ids(self) -> list[BlockId]:
        """Free block ids in eviction order (the first is reused first). O(free blocks): for tests."""
        return list(self._free)

    def cached_block_ids(self) -> dict[BlockHash, BlockId]:
        """Snapshot of the prefix cache: hash -> block id."""
        return {h: b.block_id for h, b in self._cached.items()}

    # ------------------------------------------------------------------------------- prefix cache
    def find_prefix(
        self,
        hashes: Sequence[BlockHash],
        chunks: Sequence[tuple[int, ...]],
        max_blocks: int,
        extra_keys: ExtraKeys = NO_EXTRA_KEYS,
    ) -> list[Block]:
        """The longest run of cached blocks holding exactly `chunks[0], chunks[1], ...`.

        A hash match is not trusted alone. Block i is a hit only if it is cached under `hashes[i]`,
        its `token_ids` equal `chunks[i]`, and its parent is the block hit at i-1 *in the same epoch*
        (for i = 0: no parent and equal `extra_keys`). By induction every returned block holds the
        KV of exactly this prefix, so a hash collision can only shorten the hit, never serve wrong
        KV. Reference counts are not changed (see `touch`).
        """
        cached = self._cached
        hits: list[Block] = []
        prev: Block | None = None
        for i in range(min(max_blocks, len(hashes))):
            block = cached.get(hashes[i])
            if block is None or block.token_ids != chunks[i] or block.parent is not prev:
                break
            if prev is None:
                if block.extra_keys != extra_keys:
                    break
            elif block.parent_epoch != prev.epoch:
                break
            hits.append(block)
            prev = block
        return hits

    def cache(
        self,
        block: Block,
        block_hash: BlockHash,
        token_ids: tuple[int, ...],
        parent: Block | None,
        parent_epoch: int,
        extra_keys: ExtraKeys = NO_EXTRA_KEYS,
    ) -> Block | None:
        """Offer a full, owned block to the prefix cache; return the block that now represents it.

        Returns `block` when it was cached, the already-cached twin when an identical block (same
        hash, tokens, parent and epoch) is cached already, and None when the hash is taken by a block
        with *different* content (a collision) or when `parent` was evicted since the caller saw it
        at `parent_epoch`: then nothing after this block can be cached for that request either.
        """
        if block.ref_count <= 0 or block is self.null_block:
            raise ValueError(f"only an owned, non-null block can be cached, got {block!r}")
        if parent is not None and (parent.epoch != parent_epoch or parent.block_hash is None):
            return None
        existing = self._cached.get(block_hash)
        if existing is None:
            if block.block_hash is not None:
                raise ValueError(f"{block!r} is already cached under another hash")
            block.block_hash = block_hash
            block.token_ids = token_ids
            block.parent = parent
            block.parent_epoch = parent_epoch
            block.extra_keys = extra_keys
            self._cached[block_hash] = block
            return block
        if (
            existing.token_ids == token_ids
            and existing.parent is parent
            and (existing.extra_keys == extra_keys if parent is None else existing.parent_epoch == parent_epoch)
        ):
            return existing
        return None

    # ----------------------------------------------------------------------------- ref counting
    def allocate(self, num_blocks: int) -> list[Block]:
        """Take `num_blocks` blocks from the front of the free queue, evicting any cached content.

        Raises when fewer are free: callers check `num_free_blocks` first (the manager returns None
        to its caller instead, so a scheduler can wait or preempt).
        """
        free = self._free
        if num_blocks > len(free):
            raise ValueError(f"cannot allocate {num_blocks} blocks: only {len(free)} free")
        taken: list[Block] = []
        for _ in range(num_blocks):
            block = free.popitem(last=False)[1]
            if block.block_hash is not None:
                self._evict(block)
            block.ref_count = 1
            taken.append(block)
        return taken

    def touch(self, blocks: Iterable[Block]) -> None:
        """Add one reference to each block (a prefix hit); free ones leave the free queue."""
        free = self._free
        for block in blocks:
            if block.ref_count == 0:
                del free[block.block_id]
            block.ref_count += 1

    def free(self, blocks: Iterable[Block]) -> None:
        """Drop one reference from each block; `blocks` is in eviction priority (first = evict first).

        Blocks whose count reaches 0 join the free queue: uncached ones at the front, cached ones at
        the back, each group keeping the given order.
        """
        free = self._free
        to_front: list[Block] = []
        for block in blocks:
            if block.ref_count <= 0 or block is self.null_block:
                raise ValueError(f"{block!r} freed more often than it was allocated")
            block.ref_count -= 1
            if block.ref_count == 0:
                if block.block_hash is None:
                    to_front.append(block)
                else:
                    free[block.block_id] = block
        for block in reversed(to_front):
            free[block.block_id] = block
            free.move_to_end(block.block_id, last=False)

    def reset_prefix_cache(self) -> bool:
        """Forget every cached block (e.g. after a weight update). Refused (False) while blocks are owned."""
        if len(self._free) != self.num_blocks - 1:
            return False
        for block in self._cached.values():
            self._evict_fields(block)
        self._cached.clear()
        return True

    def _evict(self, block: Block) -> None:
        del self._cached[block.block_hash]  # type: ignore[arg-type]  # checked by the caller
        self._evict_fields(block)

    @staticmethod
    def _evict_fields(block: Block) -> None:
        block.block_hash = None
        block.token_ids = None
        block.parent = None
        block.extra_keys = NO_EXTRA_KEYS
        block.epoch += 1
