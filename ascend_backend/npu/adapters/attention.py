"""NPU adapters: each attention op makes the torch_npu call vllm-ascend makes for its release, chip and state.

Which call is the kernel-selection table's answer (`ascend_backend.platform.kernels.choose(op, CallFacts(...))`,
rows cited from vllm_ascend/attention/attention_v1.py and device/device_op.py per tag; the ops are declared
in `ascend_backend.attention.ops`, their native kernels are `ascend_backend.attention.paged`); this module
only builds the arguments of each recipe, as vllm-ascend builds them:

    cache write     atb_reshape_and_cache      _npu_reshape_and_cache(key=, value=, key_cache=, value_cache=, slot_indices=)
                    scatter_pa_kv_cache        npu_scatter_pa_kv_cache(..., value=value.contiguous(), slot_mapping=)  A5 <= v0.19
                    scatter_pa_kv_cache_norm   ... all inputs contiguous, cache_mode="Norm"  (A5 v0.20.2rc1+, A2/A3 v0.25.1rc1+)
    PrefillNoCache  atb_flash_attention        _npu_flash_attention, causal mask [max_len, max_len] (-inf fp16 / 1 bf16)
                    fia_tnd_dense              npu_fused_infer_attention_score on the fresh K/V, TND, sparse_mode=3
                    fusion_attention_dense     npu_fusion_attention, TND, causal (head_size 512 on A2/A3, v0.23.0rc1+)
    PrefillCacheHit atb_flash_attention_qlens  _npu_flash_attention_qlens, 128 x 128 compressed causal mask
    ChunkedPrefill  atb_splitfuse              _npu_paged_attention_splitfuse, per-token causal rows
    (all paged)     fia_tnd_paged              npu_fused_infer_attention_score over the cache viewed [blocks, block, kv_heads*D]
    (FIA, both)     ..._tokens                 the same with pre_tokens=INT_MAX, next_tokens=0 (v0.19.1rc1-v0.21.0rc1)
    DecodeOnly      atb_paged_attention        _npu_paged_attention
                    fia_tnd_paged_nomask       FIA without atten_mask / sparse_mode (A5, v0.12.0rc1)

Lengths go as int32 host tensors to ATB kernels (op-plugin's ParamSetter passes CPU tensors as host
data) and as Python lists of cumulative ends to FIA ("TND": actual_seq_lengths are end offsets). The
guard (`npu_op`) sends a call to the native path, with the reason logged once by the registry, where the
table says vllm-ascend runs no torch_npu kernel (head_size 192 before v0.12, 310P's NZ layouts, head_size
512 paged prefill), and for float32 inputs (CANN attention kernels take float16/bfloat16). tests/npu
compares every recipe the installed torch_npu has with native; tests/unit/ascend_backend/npu checks each
call against op-plugin's declared schemas for every table row.
"""

from __future__ import annotations

import functools

import torch

from ascend_backend.attention import ops as _declared  # noqa: F401  (declares the ops adapted here)
from ascend_backend.attention.layout import KVCacheDims
from ascend_backend.npu.guard import npu_op
from ascend_backend.platform.kernels import CallFacts

# vllm-ascend's FIA mask: int8, 1 above the diagonal; sparse_mode=3 reads its causal pattern from it
# (attention_mask.py get_splitfuse_attn_mask, v0.11.0 to v0.25.1rc1).
FIA_MASK_SIZE = 2048
# The "compressed" causal mask _npu_flash_attention_qlens takes (vllm-ascend passes 128 x 128).
ATB_QLENS_MASK_SIZE = 128
# The splitfuse kernel wants a finite mask value in bfloat16 (vllm-ascend scales its 1s by -10000).
ATB_SPLITFUSE_BF16_MASK_VALUE = -10000.0
# FIA's and npu_fusion_attention's "no limit" for pre/next tokens (device/utils.py@v0.23.0 SWA_INT_MAX).
INT_MAX = 2147483647
# PrefillNoCache through FIA passes block_size 128 with no block table (_get_fia_params).
FIA_DENSE_BLOCK_SIZE = 128


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


def fia_causal_mask(device: torch.device | str, dtype: torch.dtype = torch.int8) -> torch.Tensor:
    """The shared [2048, 2048] mask (1 above the diagonal) on `device`, built once per device and dtype
    (as vllm-ascend's AttentionMaskBuilder keeps one): rebuilding and copying 4 MiB per layer and step
    would cost more than the attention itself. Read-only by contract: no kernel writes its mask."""
    return _fia_mask_on(str(device), dtype)


@functools.lru_cache(maxsize=8)
def _fia_mask_on(device: str, dtype: torch.dtype) -> torch.Tensor:
    return torch.ones(FIA_MASK_SIZE, FIA_MASK_SIZE, dtype=torch.int8).triu(1).to(dtype).to(device)


# --------------------------------------------------------------------------------------------- guards
def _head_size(first: torch.Tensor, *_args: object) -> CallFacts:
    """The rows of attention ops depend on the head size (the last dim of the op's first tensor) and, for
    decode under FULL_DECODE_ONLY, on the batch size being in the engine's pa_shape_list (its first dim)."""
    return CallFacts(head_size=int(first.shape[-1]), num_tokens=int(first.shape[0]))


# --------------------------------------------------------------------------------------------- cache write
def _atb_reshape_and_cache(npu, key, value, kv_cache, slot_mapping) -> None:
    npu._npu_reshape_and_cache(
        key=key, value=value, key_cache=kv_cache[0], value_cache=kv_cache[1], slot_indices=slot_mapping
    )


def _scatter_pa_kv_cache(npu, key, value, kv_cache, slot_mapping) -> None:
    # device_op.py@v0.14.0rc1 A5DeviceAdaptor: no cache_mode (op-plugin 7.2.0/7.3.0 declare none).
    npu.npu_scatter_pa_kv_cache(
        key=key, value=value.contiguous(), key_cache=kv_cache[0], value_cache=kv_cache[1], slot_mapping=slot_mapping
    )


def _scatter_pa_kv_cache_norm(npu, key, value, kv_cache, slot_mapping) -> None:
    # device_op.py@v0.20.2rc1 A5DeviceAdaptor / @v0.25.1rc1 BaseDeviceAdaptor: "Norm" = the ND paged layout.
    npu.npu_scatter_pa_kv_cache(
        key=key.contiguous(),
        value=value.contiguous(),
        key_cache=kv_cache[0],
        value_cache=kv_cache[1],
        slot_mapping=slot_mapping.contiguous(),
        cache_mode="Norm",
    )


reshape_and_cache_npu = npu_op(
    "reshape_and_cache",
    {
        "atb_reshape_and_cache": _atb_reshape_and_cache,
        "scatter_pa_kv_cache": _scatter_pa_kv_cache,
        "scatter_pa_kv_cache_norm": _scatter_pa_kv_cache_norm,
    },
    facts=_head_size,
)


# --------------------------------------------------------------------------------------------- PrefillNoCache
def _atb_flash_attention(npu, query, key, value, seq_lens, scale) -> torch.Tensor:
    lens = _host_int32(seq_lens)
    out = torch.empty_like(query)
    npu._npu_flash_attention(
        query=query,
        key=key,
        value=value,
        mask=atb_causal_mask(int(lens.max()), query.dtype, query.device),
        seq_len=lens,
        scale_value=scale,
        num_heads=query.shape[1],
        num_kv_heads=key.shape[1],
        out=out,
    )
    return out


def _window_args(tokens: bool) -> dict:
    # attention_v1.py@v0.19.1rc1:916: pre_tokens = the sliding window or SWA_INT_MAX, next_tokens = 0 beside
    # sparse_mode 3 (whose causal mask already bounds both); passed through **kwargs from v0.22.1rc1.
    return {"pre_tokens": INT_MAX, "next_tokens": 0} if tokens else {}


def _fia_tnd_dense(npu, query, key, value, seq_lens, scale, *, tokens: bool = False) -> torch.Tensor:
    ends = _cumulative(seq_lens)
    window = _window_args(tokens)
    out, _ = npu.npu_fused_infer_attention_score(
        query=query,
        key=key,
        value=value,
        atten_mask=fia_causal_mask(query.device),
        block_table=None,
        input_layout="TND",
        block_size=FIA_DENSE_BLOCK_SIZE,
        actual_seq_lengths=ends,
        actual_seq_lengths_kv=ends,
        num_key_value_heads=key.shape[1],
        num_heads=query.shape[1],
        scale=scale,
        sparse_mode=3,
        **window,
    )
    return out.view_as(query)


def _fia_tnd_dense_tokens(npu, query, key, value, seq_lens, scale) -> torch.Tensor:
    return _fia_tnd_dense(npu, query, key, value, seq_lens, scale, tokens=True)


def _fusion_attention_dense(npu, query, key, value, seq_lens, scale) -> torch.Tensor:
    # device/utils.py@v0.23.0 npu_large_head_prefill_attention: the int8 mask as bool, causal sparse_mode 3.
    ends = _cumulative(seq_lens)
    result = npu.npu_fusion_attention(
        query,
        key,
        value,
        query.shape[1],
        "TND",
        atten_mask=fia_causal_mask(query.device, torch.bool),
        scale=scale,
        pre_tockens=INT_MAX,
        next_tockens=0,
        actual_seq_qlen=ends,
        actual_seq_kvlen=ends,
        sparse_mode=3,
    )
    return result[0].view_as(query)


prefill_attention_npu = npu_op(
    "prefill_attention",
    {
        "atb_flash_attention": _atb_flash_attention,
        "fia_tnd_dense": _fia_tnd_dense,
        "fia_tnd_dense_tokens": _fia_tnd_dense_tokens,
        "fusion_attention_dense": _fusion_attention_dense,
    },
    facts=_head_size,
)


# --------------------------------------------------------------------------------------------- paged states
def _fia_tnd_paged(
    npu, query, kv_cache, block_tables, query_lens, seq_lens, scale, *, masked: bool = True, tokens: bool = False
) -> torch.Tensor:
    # attention_v1.py@v0.13.0 _get_fia_params: K/V as the paged cache viewed [blocks, block_size, kv_heads * D].
    dims = KVCacheDims.of(kv_cache)
    mask_args = {"atten_mask": fia_causal_mask(query.device), "sparse_mode": 3} if masked else {}
    mask_args.update(_window_args(tokens))
    out, _ = npu.npu_fused_infer_attention_score(
        query=query,
        key=kv_cache[0].view(dims.num_blocks, dims.block_size, -1),
        value=kv_cache[1].view(dims.num_blocks, dims.block_size, -1),
        block_table=block_tables,
        input_layout="TND",
        block_size=dims.block_size,
        actual_seq_lengths=_cumulative(query_lens),
        actual_seq_lengths_kv=_host_int32(seq_lens).tolist(),
        num_key_value_heads=dims.num_kv_heads,
        num_heads=query.shape[1],
        scale=scale,
        **mask_args,
    )
    return out.view_as(query)


def _fia_tnd_paged_tokens(npu, query, kv_cache, block_tables, query_lens, seq_lens, scale) -> torch.Tensor:
    return _fia_tnd_paged(npu, query, kv_cache, block_tables, query_lens, seq_lens, scale, tokens=True)


def _atb_flash_attention_qlens(npu, query, kv_cache, block_tables, query_lens, seq_lens, scale) -> torch.Tensor:
    dims = KVCacheDims.of(kv_cache)
    out = torch.empty_like(query)
    npu._npu_flash_attention_qlens(
        query=query,
        key_cache=kv_cache[0],
        value_cache=kv_cache[1],
        block_table=block_tables,
        mask=atb_causal_mask(ATB_QLENS_MASK_SIZE, query.dtype, query.device),
        seq_len=_host_int32(query_lens),
        context_lens=_host_int32(seq_lens),
        num_kv_heads=dims.num_kv_heads,
        num_heads=query.shape[1],
        scale_value=scale,
        out=out,
    )
    return out


def _atb_splitfuse(npu, query, kv_cache, block_tables, query_lens, seq_lens, scale) -> torch.Tensor:
    dims = KVCacheDims.of(kv_cache)
    q_lens, s_lens = _host_int32(query_lens), _host_int32(seq_lens)
    out = torch.empty_like(query)
    npu._npu_paged_attention_splitfuse(
        query=query,
        key_cache=kv_cache[0],
        value_cache=kv_cache[1],
        mask=atb_splitfuse_mask(q_lens.tolist(), s_lens.tolist(), query.dtype, query.device),
        block_table=block_tables,
        seq_len=q_lens,
        context_lens=s_lens,
        num_kv_heads=dims.num_kv_heads,
        num_heads=query.shape[1],
        scale_value=scale,
        out=out,
    )
    return out


prefill_cache_hit_attention_npu = npu_op(
    "prefill_cache_hit_attention",
    {
        "atb_flash_attention_qlens": _atb_flash_attention_qlens,
        "atb_splitfuse": _atb_splitfuse,
        "fia_tnd_paged": _fia_tnd_paged,
        "fia_tnd_paged_tokens": _fia_tnd_paged_tokens,
    },
    facts=_head_size,
)
chunked_prefill_attention_npu = npu_op(
    "chunked_prefill_attention",
    {"atb_splitfuse": _atb_splitfuse, "fia_tnd_paged": _fia_tnd_paged, "fia_tnd_paged_tokens": _fia_tnd_paged_tokens},
    facts=_head_size,
)


# --------------------------------------------------------------------------------------------- DecodeOnly
def _atb_paged_attention(npu, query, kv_cache, block_tables, context_lens, scale) -> torch.Tensor:
    dims = KVCacheDims.of(kv_cache)
    out = torch.empty_like(query)
    npu._npu_paged_attention(
        query=query,
        key_cache=kv_cache[0],
        value_cache=kv_cache[1],
        num_kv_heads=dims.num_kv_heads,
        num_heads=query.shape[1],
        scale_value=scale,
        block_table=block_tables,
        context_lens=_host_int32(context_lens),
        out=out,
    )
    return out


def _fia_decode(
    npu, query, kv_cache, block_tables, context_lens, scale, *, masked: bool = True, tokens: bool = False
) -> torch.Tensor:
    # Every sequence brings one query token, so the TND query ends are 1, 2, ..., num_seqs.
    ones = torch.ones(query.shape[0], dtype=torch.int32)
    return _fia_tnd_paged(npu, query, kv_cache, block_tables, ones, context_lens, scale, masked=masked, tokens=tokens)


def _fia_decode_tokens(npu, query, kv_cache, block_tables, context_lens, scale) -> torch.Tensor:
    return _fia_decode(npu, query, kv_cache, block_tables, context_lens, scale, tokens=True)


def _fia_decode_nomask(npu, query, kv_cache, block_tables, context_lens, scale) -> torch.Tensor:
    # attention_v1.py@v0.12.0rc1 _forward_decode_only_ascend91095 (A5): no atten_mask, no sparse_mode.
    return _fia_decode(npu, query, kv_cache, block_tables, context_lens, scale, masked=False)


paged_decode_attention_npu = npu_op(
    "paged_decode_attention",
    {
        "atb_paged_attention": _atb_paged_attention,
        "fia_tnd_paged": _fia_decode,
        "fia_tnd_paged_tokens": _fia_decode_tokens,
        "fia_tnd_paged_nomask": _fia_decode_nomask,
    },
    facts=_head_size,
)
