"""Chained prefix hashes of full KV-cache blocks, as pure functions.

Why chained: the KV of a token depends on every token before it, so a block can only be reused by a
request whose *whole prefix* up to and including that block is equal. Hashing each block together with
its parent block's hash makes the hash of block i a fingerprint of tokens[0 : (i + 1) * block_size]
while costing O(block_size) per block instead of O(prefix).

Why Python's built-in `hash` of a tuple: it runs in C (an xxHash-style combine), needs no
serialisation, and is deterministic across processes for ints, tuples and None (only `str`/`bytes`
extra keys vary with PYTHONHASHSEED). It is 64-bit and not collision resistant, which is acceptable
because the block pool never trusts a hash alone: a hit also compares the block's token ids and its
parent block (see `block_pool.BlockPool.find_prefix`), so a collision costs a cache miss, never wrong
KV. (vLLM hashes with sha256 by default because it exports hashes to other processes; we do not.)

Worked example, block_size = 2, tokens [5, 6, 7, 8, 9]:
    h0 = hash_block_tokens(None, (5, 6), extra_keys)     # covers tokens[0:2]
    h1 = hash_block_tokens(h0,   (7, 8))                 # covers tokens[0:4]
    token 9 is a partial block: it is never hashed (only full blocks are cached).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import NewType

BlockHash = NewType("BlockHash", int)
"""Fingerprint of a full block *and* its whole prefix (see module docstring)."""

ExtraKeys = tuple[Hashable, ...]
"""Request-level inputs besides tokens that change the KV (LoRA adapter name, cache salt, ...)."""

NO_EXTRA_KEYS: ExtraKeys = ()


def hash_block_tokens(
    parent: BlockHash | None, token_ids: tuple[int, ...], extra_keys: ExtraKeys = NO_EXTRA_KEYS
) -> BlockHash:
    """Hash of one full block given its parent's hash (None for the first block).

    `extra_keys` are folded into the first block only: every later hash chains through it, so two
    requests that differ in a LoRA adapter or cache salt never share any block.
    """
    return BlockHash(hash((parent, token_ids, extra_keys)))


def full_block_chunks(token_ids: Sequence[int], block_size: int, start_block: int = 0) -> list[tuple[int, ...]]:
    """Token tuples of the full blocks from `start_block` on; a trailing partial block is left out.

    >>> full_block_chunks([5, 6, 7, 8, 9], 2)
    [(5, 6), (7, 8)]
    """
    end = len(token_ids) // block_size * block_size
    return [tuple(token_ids[i : i + block_size]) for i in range(start_block * block_size, end, block_size)]


def chain_hashes(
    chunks: Sequence[tuple[int, ...]], parent: BlockHash | None = None, extra_keys: ExtraKeys = NO_EXTRA_KEYS
) -> list[BlockHash]:
    """Chained hashes of consecutive full blocks that follow a block whose hash is `parent`.

    `extra_keys` only matter when `parent` is None (the chain starts at the request's first block).
    """
    hashes: list[BlockHash] = []
    for chunk in chunks:
        parent = hash_block_tokens(parent, chunk, extra_keys if parent is None else NO_EXTRA_KEYS)
        hashes.append(parent)
    return hashes
