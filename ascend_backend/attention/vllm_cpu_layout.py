"""Paged attention on vLLM's CPU KV-cache layout: the native path of the vLLM plugin's two cache ops.

The ops `vllm_cpu_kv_write` and `vllm_cpu_paged_attention` read and write the cache exactly as vLLM's
CPU engine allocates it and take vLLM's per-step metadata (block table, sequence lengths, query start
offsets) as a `PagedStep`. Nothing here imports vLLM: the maths is `paged.py`'s (`write_slots`,
`attend_paged`: eager tiles or the fused Inductor kernel for decodes, chunked float32 causal attention
for prefills), applied to strided views of this layout. The registry routes the ops like every other
(counted; faults on the attention output can be injected). Inside a vLLM CPU engine the plugin also
registers vLLM's own C++ kernels for both (`ascend_backend.vllm_plugin.vllm_kernels`); the two ops are
linked, so the cache write and the attention always run on one backend, because vLLM's kernels may
pack the cache for their ISA in a layout the native path does not read. Importing this module
registers the native implementations (the plugin does; a plain process's registry table does not
list these ops).

Cache layout (one tensor per layer, allocated by vLLM's CPU backend):

    kv_cache: [num_blocks, num_kv_heads, block_size, 2 * head_size]
    viewed as [num_blocks, num_kv_heads, 2, block_size, head_size]: [..., 0, :, :] keys, [..., 1, :, :] values

i.e. per (block, head) all keys of the block's slots come first, then all values — the same split as
vLLM's `kv_cache.view(nb, H, 2 * block_size, D).chunk(2, dim=2)`. `cache_views` permutes each half to
the `[num_blocks, block_size, kv_heads, head_size]` view that `paged.py` reads, without copying.

Slots: token with slot s lives in block s // block_size at offset s % block_size. Worked example,
block_size 32, a request whose block table row is [7, 2]: its token at position 40 is in the row's
block 40 // 32 = 1 -> physical block 2, offset 40 % 32 = 8, so slot = 2 * 32 + 8 = 72.
Slots < 0 mark padding tokens and are not written.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from ascend_backend.attention import fused_decode, paged
from ascend_backend.registry import REGISTRY, Backend

KV_WRITE_OP = "vllm_cpu_kv_write"
PAGED_ATTENTION_OP = "vllm_cpu_paged_attention"
REGISTRY.link(KV_WRITE_OP, PAGED_ATTENTION_OP)


@dataclass(frozen=True)
class PagedBatchPlan:
    """A step's lengths as host lists, and where its one-token requests' contexts live.

    Built once per step (on first use) and shared by every layer, so no layer pays the device-to-host
    reads or the fused kernel's index arithmetic again.
    """

    query_lens: list[int]  # [B] new tokens per request (0 for a request with none this step)
    seq_lens: list[int]  # [B] context length of each request, its new tokens included
    decode_index: fused_decode.DecodeIndex | None  # one-token requests, in batch order; None when none


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
    scheduler_metadata: torch.Tensor | None = None  # vLLM's work split for its kernel (None outside vLLM)

    @functools.cached_property
    def plan(self) -> PagedBatchPlan:
        return plan_batch(self.query_start_loc, self.seq_lens, self.block_table, self.block_size)


def plan_batch(
    query_start_loc: torch.Tensor, seq_lens: torch.Tensor, block_table: torch.Tensor, block_size: int
) -> PagedBatchPlan:
    """query_start_loc: [B+1] cumulative query tokens; seq_lens: [B]; block_table: [B, max_blocks]."""
    starts = query_start_loc.tolist()
    lens = seq_lens.tolist()
    query_lens = [end - start for start, end in zip(starts, starts[1:])]
    decodes = [r for r, q in enumerate(query_lens) if q == 1]
    decode_index = None
    if decodes:
        tables = block_table if len(decodes) == len(lens) else block_table[torch.tensor(decodes)]
        decode_index = fused_decode.build_decode_index(tables, [lens[r] for r in decodes], block_size)
    return PagedBatchPlan(query_lens, lens, decode_index)


def cache_views(kv_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[nb, Hk, bs, 2D] -> key and value caches [nb, bs, Hk, D], strided views (no copy)."""
    num_blocks, heads, block_size, fused = kv_cache.shape
    split = kv_cache.view(num_blocks, heads, 2, block_size, fused // 2)
    return split[:, :, 0].permute(0, 2, 1, 3), split[:, :, 1].permute(0, 2, 1, 3)


@REGISTRY.declare(name=KV_WRITE_OP, device="kv_cache")
def kv_write(
    key: torch.Tensor,  # [T, Hk, D]
    value: torch.Tensor,  # [T, Hk, D]
    kv_cache: torch.Tensor,  # [num_blocks, Hk, block_size, 2 * D], written in place
    slot_mapping: torch.Tensor,  # [T'] with T' <= T (extra tokens are padding); slots < 0 are not written
) -> None:
    """Write K/V of new tokens into vLLM's CPU paged cache (in place)."""


@REGISTRY.declare(name=PAGED_ATTENTION_OP)
def paged_attention(
    query: torch.Tensor,  # [N, Hq, D]
    kv_cache: torch.Tensor,  # [num_blocks, Hk, block_size, 2 * D]
    step: PagedStep,
    scale: float,
    out: torch.Tensor | None = None,  # [N, Hq, D] to write the result into
) -> torch.Tensor:  # [N, Hq, D]
    """Causal attention over vLLM's CPU paged cache (decodes batched, prefills and chunks per request).

    With `out` the result is written there; the returned tensor is `out` unless an injected fault
    replaced it with a corrupted copy, so callers copy when the two differ.
    """


@REGISTRY.register(KV_WRITE_OP, Backend.NATIVE)
def kv_write_native(key, value, kv_cache, slot_mapping):
    count = slot_mapping.shape[0]
    slots = slot_mapping.long()
    key, value = key[:count], value[:count]  # [T', Hk, D]
    valid = slots >= 0
    if not bool(valid.all()):
        slots, key, value = slots[valid], key[valid], value[valid]
    key_cache, value_cache = cache_views(kv_cache)
    paged.write_slots(key.to(kv_cache.dtype), value.to(kv_cache.dtype), key_cache, value_cache, slots)


@REGISTRY.register(PAGED_ATTENTION_OP, Backend.NATIVE)
def paged_attention_native(query, kv_cache, step, scale, out):
    plan = step.plan
    key_cache, value_cache = cache_views(kv_cache)
    return paged.attend_paged(
        query,
        key_cache,
        value_cache,
        step.block_table,
        plan.query_lens,
        plan.seq_lens,
        scale,
        out=out,
        decode_index=plan.decode_index,
    )
