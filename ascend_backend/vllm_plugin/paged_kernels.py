"""Paged-attention kernels for vLLM's CPU KV-cache layout, registered in `ascend_backend.registry`.

Why here and not in `ascend_backend.attention`: these read and write the cache exactly as vLLM's CPU
engine allocates it, and take vLLM's per-step metadata (block table, sequence lengths, slot mapping,
query start offsets, as a `PagedStep`); the registry routes them like every other op (counted; faults
on the attention output can be injected). The native implementations live here; inside a vLLM CPU
engine the plugin also registers vLLM's own C++ kernels for both ops (`vllm_kernels`). The two ops are
linked in the registry: the cache write and the attention always run on one backend, because vLLM's
kernels may pack the cache for their ISA in a layout the native path does not read.

Cache layout (one tensor per layer, allocated by vLLM's CPU backend):

    kv_cache: [num_blocks, num_kv_heads, block_size, 2 * head_size]
    viewed as [num_blocks, num_kv_heads, 2, block_size, head_size]: [..., 0, :, :] keys, [..., 1, :, :] values

i.e. per (block, head) all keys of the block's slots come first, then all values — the same split as
vLLM's `kv_cache.view(nb, H, 2 * block_size, D).chunk(2, dim=2)`.

Slots: token with slot s lives in block s // block_size at offset s % block_size. Worked example,
block_size 32, a request whose block table row is [7, 2]: its token at position 40 is in the row's
block 40 // 32 = 1 -> physical block 2, offset 40 % 32 = 8, so slot = 2 * 32 + 8 = 72.
Slots < 0 mark padding tokens and are not written.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ascend_backend.attention import fused_decode
from ascend_backend.registry import REGISTRY, Backend

KV_WRITE_OP = "vllm_cpu_kv_write"
PAGED_ATTENTION_OP = "vllm_cpu_paged_attention"
REGISTRY.link(KV_WRITE_OP, PAGED_ATTENTION_OP)


@dataclass(frozen=True)
class ContextIndex:
    """Where each context token of some requests lives in the cache, padded to a common length.

    blocks[i, t], offsets[i, t]: physical block and in-block offset of token t of request i. Padding
    positions (t >= its context length) point at the request's own token 0, a slot written for this
    request, so the gathered values are finite and the mask gives them weight 0. (Pointing them at
    arbitrary slots could read NaN left in the cache by an earlier faulty request: -inf masking does
    not cancel a NaN.)
    """

    blocks: torch.Tensor  # [R, L] int64
    offsets: torch.Tensor  # [R, L] int64
    mask: torch.Tensor | None  # [R, 1, 1, L] additive (0 / -inf) in the query dtype; None = no padding


@dataclass(frozen=True)
class PrefillSpan:
    """One request with more than one query token (a prefill, or a chunk of one)."""

    start: int  # first query token of the request in the batch
    end: int  # one past its last query token
    seq_len: int  # tokens in its context, including these query tokens (already in the cache)
    context: ContextIndex  # R = 1, L = seq_len, no padding


@dataclass(frozen=True)
class FreshPrefills:
    """Prefills without a cached prefix (every context token is a query token), right-padded to L.

    One causal SDPA call serves all of them: a real query row attends only to positions at or before
    its own, all of which are real, so the padding needs no mask; padded rows are computed and dropped.
    """

    token_index: torch.Tensor  # [R, L] int64: batch token at (request, position); padding -> row's first token
    tokens: torch.Tensor  # [n] int64: token_index at the real positions, row by row
    valid: torch.Tensor  # [R, L] bool: real positions
    context: ContextIndex  # where those tokens' K/V were just written


@dataclass(frozen=True)
class PagedBatchPlan:
    """How a step's requests split into one batched decode call and per-request prefill calls.

    Built once per step (by the metadata builder) and shared by every layer, so no layer pays the
    host-side bookkeeping or the index arithmetic again.
    """

    decode_tokens: torch.Tensor  # [Bd] int64: token index in the batch of each one-token request
    decode_in_order: bool  # decode_tokens == 0..Bd-1: results need no scatter
    decode: ContextIndex | None  # contexts of the decode requests; None when there are none
    decode_index: fused_decode.DecodeIndex | None  # the decodes' token locations for the fused kernel
    decode_longest: int  # longest decode context (0 when there are no decodes)
    fresh: FreshPrefills | None  # prefills without a cached prefix, batched; None when there are none
    prefills: tuple[PrefillSpan, ...]  # chunks that continue a cached context, one call each


@dataclass
class PagedStep:
    """One engine step's attention inputs as vLLM's CPU metadata builder hands them over (CPU tensors).

    Each implementation of the attention op reads what it needs: vLLM's kernel takes these tensors
    as they are; the native path takes `plan`, derived from them on first use and then shared by
    every layer of the step, so a step that vLLM's kernel serves never pays for it.
    """

    query_start_loc: torch.Tensor  # [B+1] int32: cumulative query tokens per request
    seq_lens: torch.Tensor  # [B] int32: context length of each request, its query tokens included
    block_table: torch.Tensor  # [B, max_blocks] int32: physical blocks of each request
    block_size: int
    dtype: torch.dtype  # query and cache dtype (the plan's padding masks use it)
    scheduler_metadata: torch.Tensor | None = None  # vLLM's work split for its kernel (None outside vLLM)

    @functools.cached_property
    def plan(self) -> PagedBatchPlan:
        return plan_batch(self.query_start_loc, self.seq_lens, self.block_table, self.block_size, self.dtype)


def context_index(
    block_table: torch.Tensor, seq_lens: torch.Tensor, block_size: int, dtype: torch.dtype
) -> ContextIndex:
    """block_table: [R, max_blocks]; seq_lens: [R] -> token locations padded to max(seq_lens)."""
    longest = int(seq_lens.max())
    positions = torch.arange(longest)[None, :]  # [1, L]
    valid = positions < seq_lens[:, None]  # [R, L]
    positions = torch.where(valid, positions, 0)
    blocks = torch.gather(block_table.long(), 1, positions // block_size)  # [R, L]
    mask = None
    if not bool(valid.all()):
        mask = torch.zeros(valid.shape, dtype=dtype).masked_fill_(~valid, float("-inf"))[:, None, None, :]
    return ContextIndex(blocks, positions % block_size, mask)


def plan_batch(
    query_start_loc: torch.Tensor,
    seq_lens: torch.Tensor,
    block_table: torch.Tensor,
    block_size: int,
    dtype: torch.dtype = torch.float32,
) -> PagedBatchPlan:
    """query_start_loc: [B+1] cumulative query tokens; seq_lens: [B]; block_table: [B, max_blocks]."""
    starts = query_start_loc.tolist()
    lens = seq_lens.tolist()
    decodes, decode_tokens, fresh, prefills = [], [], [], []
    for request, seq_len in enumerate(lens):
        start, end = starts[request], starts[request + 1]
        if end - start == 1:
            decodes.append(request)
            decode_tokens.append(start)
        elif end - start == seq_len and seq_len > 1:
            fresh.append(request)
        elif end > start:
            context = context_index(block_table[request : request + 1], seq_lens[request : request + 1], block_size, dtype)
            prefills.append(PrefillSpan(start, end, seq_len, context))
    decode, decode_index = None, None
    if decodes:
        rows = torch.tensor(decodes)
        decode_tables = block_table[rows]
        decode = context_index(decode_tables, seq_lens[rows], block_size, dtype)
        decode_index = fused_decode.build_decode_index(decode_tables, [lens[r] for r in decodes], block_size)
    return PagedBatchPlan(
        decode_tokens=torch.tensor(decode_tokens, dtype=torch.long),
        decode_in_order=decode_tokens == list(range(len(decode_tokens))),
        decode=decode,
        decode_index=decode_index,
        decode_longest=max((lens[r] for r in decodes), default=0),
        fresh=_fresh_prefills(fresh, starts, seq_lens, block_table, block_size, dtype) if fresh else None,
        prefills=tuple(prefills),
    )


def _fresh_prefills(
    requests: list[int], starts: list[int], seq_lens: torch.Tensor, block_table: torch.Tensor,
    block_size: int, dtype: torch.dtype,
) -> FreshPrefills:
    rows = torch.tensor(requests)
    context = context_index(block_table[rows], seq_lens[rows], block_size, dtype)
    lengths = seq_lens[rows].long()
    positions = torch.arange(context.blocks.shape[1])[None, :]  # [1, L]
    valid = positions < lengths[:, None]  # [R, L]
    first = torch.tensor([starts[r] for r in requests])[:, None]  # [R, 1]
    token_index = first + torch.where(valid, positions, 0)  # [R, L]
    return FreshPrefills(token_index, token_index[valid], valid, context)


def _split_view(kv_cache: torch.Tensor) -> torch.Tensor:
    """[nb, H, bs, 2D] -> [nb, H, 2, bs, D] (a view: no copy)."""
    num_blocks, heads, block_size, fused = kv_cache.shape
    return kv_cache.view(num_blocks, heads, 2, block_size, fused // 2)


def kv_write(key: torch.Tensor, value: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """Write key/value [T, Hk, D] into the cache at slot_mapping [T'] (T' <= T; extra tokens are padding)."""
    REGISTRY.dispatch(KV_WRITE_OP, kv_cache.device, key, value, kv_cache, slot_mapping)


def paged_attention(
    query: torch.Tensor, kv_cache: torch.Tensor, step: PagedStep, scale: float, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Causal attention of query [N, Hq, D] over each request's cached context -> [N, Hq, D].

    With `out` ([N, Hq, D]) the result is written there; the returned tensor is `out` unless an
    injected fault replaced it with a corrupted copy, so callers copy when the two differ.
    """
    return REGISTRY.dispatch(PAGED_ATTENTION_OP, query.device, query, kv_cache, step, scale, out)


@REGISTRY.register(KV_WRITE_OP, Backend.NATIVE, doc="write K/V of new tokens into vLLM's CPU paged cache (in place)")
def kv_write_native(
    key: torch.Tensor, value: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor
) -> None:
    cache = _split_view(kv_cache)  # [nb, Hk, 2, bs, D]
    block_size = cache.shape[3]
    count = slot_mapping.shape[0]
    slots = slot_mapping.long()
    key, value = key[:count], value[:count]  # [T', Hk, D]
    valid = slots >= 0
    if not bool(valid.all()):
        slots, key, value = slots[valid], key[valid], value[valid]
    blocks, offsets = slots // block_size, slots % block_size
    # Advanced indices on dims 0 and 3 around the head slice: the indexed view is [T', Hk, D].
    cache[blocks, :, 0, offsets] = key.to(cache.dtype)
    cache[blocks, :, 1, offsets] = value.to(cache.dtype)


@REGISTRY.register(
    PAGED_ATTENTION_OP, Backend.NATIVE,
    doc="causal attention over vLLM's CPU paged cache (decodes and fresh prefills batched, continued chunks per request)",
)
def paged_attention_native(
    query: torch.Tensor, kv_cache: torch.Tensor, step: PagedStep, scale: float, out: torch.Tensor | None = None
) -> torch.Tensor:
    plan = step.plan  # the block table is folded into the plan's token locations
    cache = _split_view(kv_cache)  # [nb, Hk, 2, bs, D]
    if plan.decode is not None and plan.decode_in_order and plan.fresh is None and not plan.prefills:
        result = _decode(query, cache, plan, scale)  # the common pure-decode step: no scatter
        return result if out is None else out.copy_(result)
    if out is None:
        out = torch.empty_like(query)  # [N, Hq, D]
    if plan.decode is not None:
        out[plan.decode_tokens] = _decode(query[plan.decode_tokens], cache, plan, scale)
    if plan.fresh is not None:
        out[plan.fresh.tokens] = _fresh(query, cache, plan.fresh, scale)
    for span in plan.prefills:
        out[span.start : span.end] = _prefill(query[span.start : span.end], cache, span, scale)
    return out


def _gather_context(cache: torch.Tensor, index: ContextIndex) -> tuple[torch.Tensor, torch.Tensor]:
    """cache [nb, Hk, 2, bs, D] -> keys, values [R, Hk, L, D] (one gather for both)."""
    picked = cache[index.blocks, :, :, index.offsets]  # [R, L, Hk, 2, D]
    picked = picked.permute(0, 2, 3, 1, 4)  # [R, Hk, 2, L, D]
    return picked[:, :, 0], picked[:, :, 1]


def _decode(query: torch.Tensor, cache: torch.Tensor, plan: PagedBatchPlan, scale: float) -> torch.Tensor:
    # query: [Bd, Hq, D] -> [Bd, Hq, D]
    batch, q_heads, head_size = query.shape
    kv_heads = cache.shape[1]
    if fused_decode.use_fused(query.device, batch, plan.decode_longest, kv_heads, head_size):
        # The fused kernel shared with ascend_backend.attention, on [nb, bs, Hk, D] views of this layout.
        q = (query.float() * scale).view(batch, kv_heads, q_heads // kv_heads, head_size)
        keys = cache[:, :, 0].permute(0, 2, 1, 3)
        values = cache[:, :, 1].permute(0, 2, 1, 3)
        out = fused_decode.fused_decode(q, keys, values, plan.decode_index)
        if out is not None:
            return out.view(batch, q_heads, head_size).to(query.dtype)
    # Eager: all decode requests in one padded SDPA call.
    index = plan.decode
    keys, values = _gather_context(cache, index)  # [Bd, Hk, L, D]
    # Grouped-query trick: query head h reads kv head h // group, so the `group` query heads of one kv
    # head are `group` query rows against the same keys: [Bd, Hq, D] -> [Bd, Hk, group, D]. One query
    # token per request means no causal mask is needed, only the padding mask.
    grouped = query.reshape(batch, keys.shape[1], q_heads // keys.shape[1], head_size)
    out = F.scaled_dot_product_attention(grouped, keys, values, attn_mask=index.mask, scale=scale)
    return out.reshape(batch, q_heads, head_size)


def _fresh(query: torch.Tensor, cache: torch.Tensor, fresh: FreshPrefills, scale: float) -> torch.Tensor:
    # query: [N, Hq, D] (whole batch) -> [n, Hq, D] for fresh.tokens, in that order.
    q = query[fresh.token_index].transpose(1, 2)  # [R, Hq, L, D]
    keys, values = _gather_context(cache, fresh.context)  # [R, Hk, L, D]
    out = F.scaled_dot_product_attention(q, keys, values, is_causal=True, scale=scale, enable_gqa=True)
    return out.transpose(1, 2)[fresh.valid]  # [R, L, Hq, D] -> real positions only


def _prefill(query: torch.Tensor, cache: torch.Tensor, span: PrefillSpan, scale: float) -> torch.Tensor:
    # query: [q, Hq, D] -> [q, Hq, D]; query token j sits at position seq_len - q + j of the context.
    q_len, seq_len = span.end - span.start, span.seq_len
    keys, values = _gather_context(cache, span.context)  # [1, Hk, seq_len, D]
    q = query.transpose(0, 1).unsqueeze(0)  # [1, Hq, q, D]
    if q_len == seq_len:
        out = F.scaled_dot_product_attention(q, keys, values, is_causal=True, scale=scale, enable_gqa=True)
    else:
        first = seq_len - q_len
        mask = torch.arange(seq_len)[None, :] <= torch.arange(first, seq_len)[:, None]  # [q, seq_len]
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=scale, enable_gqa=True)
    return out[0].transpose(0, 1)
