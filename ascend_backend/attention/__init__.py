"""Paged attention for the Ascend backend: KV cache layout, per-step metadata, and the attention ops.

    from ascend_backend.attention import (
        allocate_kv_cache, build_attention_metadata, paged_attention_forward,
    )
    kv_cache = allocate_kv_cache(num_blocks, block_size, num_kv_heads, head_size, dtype=torch.bfloat16)
    meta = build_attention_metadata(block_tables, seq_lens, query_lens, block_size)  # plain lists
    out = paged_attention_forward(q, k, v, kv_cache, meta, scale)   # writes cache, attends

The attention ops (reshape_and_cache, prefill_attention, prefill_cache_hit_attention,
paged_decode_attention, chunked_prefill_attention) are declared in `ops`; their native kernels are in
`paged`, their NPU adapters in `ascend_backend.npu.adapters.attention`.

`vllm_cpu_layout` runs the same native kernels on vLLM's CPU cache layout (the vLLM plugin's
`vllm_cpu_kv_write` and `vllm_cpu_paged_attention`); it registers those two ops when imported, which
the plugin does, so they are not listed in a process that never loads it.
"""

from ascend_backend.attention import paged as _paged  # noqa: F401  (registers the native kernels)
from ascend_backend.attention.layout import KV_CACHE_LAYOUT, KVCacheDims, allocate_kv_cache, kv_cache_shape
from ascend_backend.attention.metadata import (
    AttentionMetadata,
    AttentionState,
    build_attention_metadata,
    classify_state,
    compute_slot_mapping,
)
from ascend_backend.attention.ops import (
    ATTENTION_OPS,
    STATE_OPS,
    chunked_prefill_attention,
    paged_attention_forward,
    paged_decode_attention,
    prefill_attention,
    prefill_cache_hit_attention,
    reshape_and_cache,
)
from ascend_backend.attention.paged import default_scale

__all__ = [
    "ATTENTION_OPS",
    "AttentionMetadata",
    "AttentionState",
    "KVCacheDims",
    "KV_CACHE_LAYOUT",
    "STATE_OPS",
    "allocate_kv_cache",
    "build_attention_metadata",
    "chunked_prefill_attention",
    "classify_state",
    "compute_slot_mapping",
    "default_scale",
    "kv_cache_shape",
    "paged_attention_forward",
    "paged_decode_attention",
    "prefill_attention",
    "prefill_cache_hit_attention",
    "reshape_and_cache",
]
