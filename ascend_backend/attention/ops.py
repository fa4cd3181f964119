"""The attention ops, declared once; each dispatches through the op registry (NPU kernel or native), by device.

Each declaration below is the op's one signature: the native kernels (`paged`) and the NPU adapters
take its parameters, and the function it becomes is what callers use, never an implementation
directly, so the registry can pick the kernel once per device, force the native path
(ASCEND_BACKEND_FORCE_NATIVE=paged_decode_attention), count calls and inject faults. `paged_attention_forward` is the one call an attention layer makes per step:
it writes the step's keys/values into the cache and runs the op for the batch's state.
"""

from __future__ import annotations

import torch

from ascend_backend.attention.metadata import AttentionMetadata, AttentionState
from ascend_backend.registry import REGISTRY

# Which op serves each state.
STATE_OPS: dict[AttentionState, str] = {
    AttentionState.PrefillNoCache: "prefill_attention",
    AttentionState.PrefillCacheHit: "prefill_cache_hit_attention",
    AttentionState.DecodeOnly: "paged_decode_attention",
    AttentionState.ChunkedPrefill: "chunked_prefill_attention",
}
ATTENTION_OPS: tuple[str, ...] = ("reshape_and_cache", *STATE_OPS.values())


@REGISTRY.declare
def reshape_and_cache(
    key: torch.Tensor,  # [num_tokens, num_kv_heads, head_size]
    value: torch.Tensor,  # [num_tokens, num_kv_heads, head_size]
    kv_cache: torch.Tensor,  # [2, num_blocks, block_size, num_kv_heads, head_size], written in place
    slot_mapping: torch.Tensor,  # [num_tokens] int32, slot = block * block_size + offset
) -> None:
    """Write new tokens' keys/values into the paged KV cache: token t at block slot // block_size, offset
    slot % block_size."""


@REGISTRY.declare
def paged_decode_attention(
    query: torch.Tensor,  # [num_seqs, num_heads, head_size]
    kv_cache: torch.Tensor,  # [2, num_blocks, block_size, num_kv_heads, head_size]
    block_tables: torch.Tensor,  # [num_seqs, max_blocks] int32
    context_lens: torch.Tensor,  # [num_seqs] int32 host tensor, cached tokens incl. the one being decoded
    scale: float,
) -> torch.Tensor:  # [num_seqs, num_heads, head_size]
    """DecodeOnly: one new token per sequence attends to its whole context in the paged KV cache."""


@REGISTRY.declare
def prefill_attention(
    query: torch.Tensor,  # [num_tokens, num_heads, head_size]
    key: torch.Tensor,  # [num_tokens, num_kv_heads, head_size]
    value: torch.Tensor,  # [num_tokens, num_kv_heads, head_size]
    seq_lens: torch.Tensor,  # [num_seqs] int32 host tensor, prompt length per sequence
    scale: float,
) -> torch.Tensor:  # [num_tokens, num_heads, head_size]
    """PrefillNoCache: causal attention of fresh prompts over their own keys/values."""


@REGISTRY.declare
def prefill_cache_hit_attention(
    query: torch.Tensor,  # [num_tokens, num_heads, head_size]
    kv_cache: torch.Tensor,  # [2, num_blocks, block_size, num_kv_heads, head_size], new K/V written
    block_tables: torch.Tensor,  # [num_seqs, max_blocks] int32
    query_lens: torch.Tensor,  # [num_seqs] int32 host tensor, new tokens per sequence
    seq_lens: torch.Tensor,  # [num_seqs] int32 host tensor, cached + new tokens per sequence
    scale: float,
) -> torch.Tensor:  # [num_tokens, num_heads, head_size]
    """PrefillCacheHit: prompts whose prefix is cached attend to cached + new tokens."""


@REGISTRY.declare
def chunked_prefill_attention(
    query: torch.Tensor,  # [num_tokens, num_heads, head_size]
    kv_cache: torch.Tensor,  # [2, num_blocks, block_size, num_kv_heads, head_size], new K/V written
    block_tables: torch.Tensor,  # [num_seqs, max_blocks] int32
    query_lens: torch.Tensor,  # [num_seqs] int32 host tensor, new tokens per sequence
    seq_lens: torch.Tensor,  # [num_seqs] int32 host tensor, cached + new tokens per sequence
    scale: float,
) -> torch.Tensor:  # [num_tokens, num_heads, head_size]
    """ChunkedPrefill: decodes and prefill chunks in one batch over the paged KV cache."""


def paged_attention_forward(
    query: torch.Tensor,  # [num_tokens, num_heads, head_size]
    key: torch.Tensor,  # [num_tokens, num_kv_heads, head_size]
    value: torch.Tensor,  # [num_tokens, num_kv_heads, head_size]
    kv_cache: torch.Tensor,  # [2, num_blocks, block_size, num_kv_heads, head_size]
    metadata: AttentionMetadata,
    scale: float,
) -> torch.Tensor:  # [num_tokens, num_heads, head_size]
    """One attention layer's step: cache this step's keys/values, then attend for the batch's state.

    The write comes first in every state, as in vllm-ascend: the paged states read the new tokens
    back from the cache, and PrefillNoCache needs them cached for the decodes that follow.
    """
    if query.shape[0] != metadata.num_tokens:
        raise ValueError(f"query has {query.shape[0]} rows but the metadata describes {metadata.num_tokens} new tokens")
    slot_mapping = metadata.slot_mapping.to(kv_cache.device)
    reshape_and_cache(key, value, kv_cache, slot_mapping)
    state = metadata.state
    if state is AttentionState.PrefillNoCache:
        return prefill_attention(query, key, value, metadata.seq_lens_tensor, scale)
    block_tables = metadata.block_tables.to(kv_cache.device)
    if state is AttentionState.DecodeOnly:
        return paged_decode_attention(query, kv_cache, block_tables, metadata.seq_lens_tensor, scale)
    paged = prefill_cache_hit_attention if state is AttentionState.PrefillCacheHit else chunked_prefill_attention
    return paged(query, kv_cache, block_tables, metadata.query_lens_tensor, metadata.seq_lens_tensor, scale)
