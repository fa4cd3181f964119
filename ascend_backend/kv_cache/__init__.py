"""Paged KV-cache bookkeeping: chained block hashes, the block pool, the per-request manager, sizing.

No torch anywhere in this package: allocation and prefix caching are integer bookkeeping, tested
with exact expectations, and the attention code only consumes the block tables and slot mappings.

    hashing    chained prefix hashes of full blocks (pure functions)
    block_pool free queue in eviction order, ref counts, hash -> block prefix cache, null block
    manager    per-request allocate / append_slots / free, block tables, slot mapping, hit stats
    sizing     memory budget -> number of blocks; block-size rules per target; clear OOM errors
"""

from ascend_backend.kv_cache.block_pool import NULL_BLOCK_ID, Block, BlockId, BlockPool
from ascend_backend.kv_cache.hashing import BlockHash, chain_hashes, full_block_chunks, hash_block_tokens
from ascend_backend.kv_cache.manager import Allocation, CacheStats, KVCacheManager, KVCacheRequestError
from ascend_backend.kv_cache.sizing import (
    BLOCK_SIZE_RULES,
    KVCacheMemoryError,
    KVCachePlan,
    KVCacheSpec,
    KVDtype,
    MemoryBudget,
    blocks_per_sequence,
    plan_kv_cache,
)

__all__ = [
    "BLOCK_SIZE_RULES",
    "NULL_BLOCK_ID",
    "Allocation",
    "Block",
    "BlockHash",
    "BlockId",
    "BlockPool",
    "CacheStats",
    "KVCacheManager",
    "KVCacheMemoryError",
    "KVCachePlan",
    "KVCacheRequestError",
    "KVCacheSpec",
    "KVDtype",
    "MemoryBudget",
    "blocks_per_sequence",
    "chain_hashes",
    "full_block_chunks",
    "hash_block_tokens",
    "plan_kv_cache",
]
