"""NPU adapters: each attention op as the exact torch_npu call vllm-ascend makes for that state.

Two kernel families exist, and which one a machine has follows from its torch_npu release:

- ATB (torch_npu < 2.8, vllm-ascend <= 0.11): one ATB kernel per state —
  `_npu_flash_attention` (PrefillNoCache), `_npu_flash_attention_qlens` (PrefillCacheHit),
  `_npu_paged_attention` (DecodeOnly), `_npu_paged_attention_splitfuse` (ChunkedPrefill) — each with
  its own additive mask convention (see `atb_causal_mask`, `atb_splitfuse_mask`).
- FIA (torch_npu >= 2.8, vllm-ascend >= 0.12): every prefill state goes through
  `npu_fused_infer_attention_score` in the packed "TND" layout with `sparse_mode=3` and one shared
  2048x2048 int8 upper-triangular mask; decode keeps `_npu_paged_attention`.

Cache writes use `_npu_reshape_and_cache` where torch_npu has it (every release vllm-ascend pairs
with a 910B), else `npu_scatter_pa_kv_cache(..., cache_mode="Norm")` as current vllm-ascend does.

CANN attention kernels take float16/bfloat16 only; the `supports` guards send float32 calls (and the
head size 192 that vllm-ascend keeps off the splitfuse kernel) to the native path, logged once.
Lengths are passed as int32 host tensors or lists, as vllm-ascend passes them. The adapters only
run where `ascend_backend.device.torch_npu()` succeeds; tests/npu compares them with native.
"""

from __future__ import annotations

import enum
import re

import torch

from ascend_backend.attention.layout import KVCacheDims
from ascend_backend.device import torch_npu
from ascend_backend.registry import REGISTRY, Backend

_KERNEL_DTYPES = (torch.float16, torch.bfloat16)
# vllm-ascend's FIA mask: int8, 1 above the diagonal; sparse_mode=3 reads its causal pattern from it.
FIA_MASK_SIZE = 2048
# The "compressed" causal mask _npu_flash_attention_qlens takes (vllm-ascend passes 128 x 128).
ATB_QLENS_MASK_SIZE = 128
# The splitfuse kernel wants a finite mask value in bfloat16 (vllm-ascend scales its 1s by -10000).
ATB_SPLITFUSE_BF16_MASK_VALUE = -10000.0


class NpuKernelFamily(enum.Enum):
    ATB = "atb"  # per-state ATB kernels (torch_npu < 2.8)
    FIA = "fia"  # npu_fused_infer_attention_score, TND layout (torch_npu >= 2.8)


def kernel_family(torch_npu_version: str) -> NpuKernelFamily:
    """'2.7.1.post1' -> ATB, '2.8.0' -> FIA: the family the paired vllm-ascend release calls."""
    match = re.match(r"(\d+)\.(\d+)", torch_npu_version)
    if match is None:
        raise ValueError(f"cannot read a major.minor version from torch_npu version {torch_npu_version!r}")
    return NpuKernelFamily.FIA if (int(match[1]), int(match[2])) >= (2, 8) else NpuKernelFamily.ATB


def _family() -> NpuKernelFamily:
    return kernel_family(getattr(torch_npu(), "__version__", "0.0"))


def _host_int32(lengths: torch.Tensor) -> torch.Tensor:
    return lengths.to(device="cpu", dtype=torch.int32)


def _cumulative(lengths: torch.Tensor) -> list[int]:
    """[3, 2, 4] -> [3, 5, 9]: TND layout's actual_seq_lengths are end offsets, not lengths."""
    return torch.cumsum(_host_int32(lengths), 0).tolist()


# --------------------------------------------------------------------------------------------- masks
def atb_causal_mask(size: int, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """[size, size] mask of the ATB flash kernels: above the diagonal -inf in float16, 1 in bfloat16
    (the value vllm-ascend's AttentionMaskBuilder writes for each dtype), 0 elsewhere."""
    above = torch.ones(size, size, dtype=torch.bool).triu(1)
    masked = float("-inf") if dtype == torch.float16 else 1.0
    return torch.zeros(size, size).masked_fill(above, masked).to(dtype).to(device)


def atb_splitfuse_mask(
    query_lens: list[int], seq_lens: list[int], dtype: torch.dtype, device: torch.device | str
) -> torch.Tensor:
    """[num_tokens, max_seq_len] mask for `_npu_paged_attention_splitfuse`: row t is the causal mask
    row of token t's position in its sequence (-inf in float16, -10000 in bfloat16)."""
    max_len = max(seq_lens)
    positions = torch.cat([torch.arange(s - q, s) for q, s in zip(query_lens, seq_lens)])
    above = torch.arange(max_len)[None, :] > positions[:, None]
    masked = float("-inf") if dtype == torch.float16 else ATB_SPLITFUSE_BF16_MASK_VALUE
    return torch.zeros(above.shape).masked_fill(above, masked).to(dtype).to(device)


def fia_causal_mask(device: torch.device | str) -> torch.Tensor:
    return torch.ones(FIA_MASK_SIZE, FIA_MASK_SIZE).triu(1).to(torch.int8).to(device)


# --------------------------------------------------------------------------------------------- guards
def _dtype_guard(tensor: torch.Tensor) -> str | None:
    if tensor.dtype not in _KERNEL_DTYPES:
        return f"{tensor.dtype} inputs (CANN attention kernels take float16/bfloat16)"
    return None


def _guard_query(query: torch.Tensor, *_args: object, **_kwargs: object) -> str | None:
    return _dtype_guard(query)


def _guard_cache_write(key: torch.Tensor, *_args: object, **_kwargs: object) -> str | None:
    return _dtype_guard(key)


def _guard_chunked(query: torch.Tensor, *_args: object, **_kwargs: object) -> str | None:
    if query.shape[-1] == 192 and _family() is NpuKernelFamily.ATB:
        return "head_size 192 (vllm-ascend keeps it off _npu_paged_attention_splitfuse)"
    return _dtype_guard(query)


# --------------------------------------------------------------------------------------------- ops
@REGISTRY.register("reshape_and_cache", Backend.NPU, supports=_guard_cache_write)
def reshape_and_cache_npu(
    key: torch.Tensor, value: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor
) -> None:
    npu = torch_npu()
    if hasattr(npu, "_npu_reshape_and_cache"):
        npu._npu_reshape_and_cache(
            key=key, value=value, key_cache=kv_cache[0], value_cache=kv_cache[1], slot_indices=slot_mapping
        )
    else:
        npu.npu_scatter_pa_kv_cache(
            key=key.contiguous(), value=value.contiguous(), key_cache=kv_cache[0], value_cache=kv_cache[1],
            slot_mapping=slot_mapping.contiguous(), cache_mode="Norm",
        )


@REGISTRY.register("paged_decode_attention", Backend.NPU, supports=_guard_query)
def paged_decode_attention_npu(
    query: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor, context_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    dims = KVCacheDims.of(kv_cache)
    out = torch.empty_like(query)
    torch_npu()._npu_paged_attention(
        query=query, key_cache=kv_cache[0], value_cache=kv_cache[1], num_kv_heads=dims.num_kv_heads,
        num_heads=query.shape[1], scale_value=scale, block_table=block_tables,
        context_lens=_host_int32(context_lens), out=out,
    )
    return out


@REGISTRY.register("prefill_attention", Backend.NPU, supports=_guard_query)
def prefill_attention_npu(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, seq_lens: torch.Tensor, scale: float
) -> torch.Tensor:
    num_heads, num_kv_heads = query.shape[1], key.shape[1]
    if _family() is NpuKernelFamily.FIA:
        ends = _cumulative(seq_lens)
        out, _ = torch_npu().npu_fused_infer_attention_score(
            query=query, key=key, value=value, atten_mask=fia_causal_mask(query.device), block_table=None,
            input_layout="TND", block_size=128, actual_seq_lengths=ends, actual_seq_lengths_kv=ends,
            num_key_value_heads=num_kv_heads, num_heads=num_heads, scale=scale, sparse_mode=3,
        )
        return out.view_as(query)
    lens = _host_int32(seq_lens)
    out = torch.empty_like(query)
    torch_npu()._npu_flash_attention(
        query=query, key=key, value=value, mask=atb_causal_mask(int(lens.max()), query.dtype, query.device),
        seq_len=lens, scale_value=scale, num_heads=num_heads, num_kv_heads=num_kv_heads, out=out,
    )
    return out


def _fia_paged_prefill(
    query: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor, query_lens: torch.Tensor,
    seq_lens: torch.Tensor, scale: float,
) -> torch.Tensor:
    dims = KVCacheDims.of(kv_cache)
    out, _ = torch_npu().npu_fused_infer_attention_score(
        query=query,
        key=kv_cache[0].view(dims.num_blocks, dims.block_size, -1),
        value=kv_cache[1].view(dims.num_blocks, dims.block_size, -1),
        atten_mask=fia_causal_mask(query.device), block_table=block_tables, input_layout="TND",
        block_size=dims.block_size, actual_seq_lengths=_cumulative(query_lens),
        actual_seq_lengths_kv=_host_int32(seq_lens).tolist(), num_key_value_heads=dims.num_kv_heads,
        num_heads=query.shape[1], scale=scale, sparse_mode=3,
    )
    return out.view_as(query)


@REGISTRY.register("prefill_cache_hit_attention", Backend.NPU, supports=_guard_query)
def prefill_cache_hit_attention_npu(
    query: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor, query_lens: torch.Tensor,
    seq_lens: torch.Tensor, scale: float,
) -> torch.Tensor:
    if _family() is NpuKernelFamily.FIA:
        return _fia_paged_prefill(query, kv_cache, block_tables, query_lens, seq_lens, scale)
    dims = KVCacheDims.of(kv_cache)
    out = torch.empty_like(query)
    torch_npu()._npu_flash_attention_qlens(
        query=query, key_cache=kv_cache[0], value_cache=kv_cache[1], block_table=block_tables,
        mask=atb_causal_mask(ATB_QLENS_MASK_SIZE, query.dtype, query.device), seq_len=_host_int32(query_lens),
        context_lens=_host_int32(seq_lens), num_kv_heads=dims.num_kv_heads, num_heads=query.shape[1],
        scale_value=scale, out=out,
    )
    return out


@REGISTRY.register("chunked_prefill_attention", Backend.NPU, supports=_guard_chunked)
def chunked_prefill_attention_npu(
    query: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor, query_lens: torch.Tensor,
    seq_lens: torch.Tensor, scale: float,
) -> torch.Tensor:
    if _family() is NpuKernelFamily.FIA:
        return _fia_paged_prefill(query, kv_cache, block_tables, query_lens, seq_lens, scale)
    dims = KVCacheDims.of(kv_cache)
    q_lens, s_lens = _host_int32(query_lens), _host_int32(seq_lens)
    out = torch.empty_like(query)
    torch_npu()._npu_paged_attention_splitfuse(
        query=query, key_cache=kv_cache[0], value_cache=kv_cache[1],
        mask=atb_splitfuse_mask(q_lens.tolist(), s_lens.tolist(), query.dtype, query.device),
        block_table=block_tables, seq_len=q_lens, context_lens=s_lens, num_kv_heads=dims.num_kv_heads,
        num_heads=query.shape[1], scale_value=scale, out=out,
    )
    return out
