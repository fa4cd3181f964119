"""NPU adapters: each attention op makes the torch_npu call vllm-ascend makes for its release, chip and state.

Which call is the kernel-selection table's answer (`ascend_backend.platform.kernels.choose(op, CallFacts(...))`,
rows cited from vllm_ascend/attention/attention_v1.py and device/device_op.py per tag; the ops are declared
in `ascend_backend.attention.ops`, their native kernels are `ascend_backend.attention.paged`); this module
only builds the arguments of each recipe, as vllm-ascend builds them:

    cache write     atb_reshape_and_cache      _npu_reshape_and_cache(key=, value=, key_cache=, value_cache=, slot_indices=)
                    scatter_pa_kv_cache_norm   npu_scatter_pa_kv_cache(..., cache_mode="Norm"), all inputs contiguous
                                               (A5 v0.20.2rc1+, A2/A3 v0.25.1rc1+; A5 before: native, see the table)
    PrefillNoCache  atb_flash_attention        _npu_flash_attention, causal mask [max_len, max_len] (-inf fp16 / 1 bf16)
                    fia_tnd_dense              npu_fused_infer_attention_score on the fresh K/V, TND, sparse_mode=3
                    fusion_attention_dense     npu_fusion_attention, TND, causal (head_size 512 on A2/A3, v0.23.0rc1+)
    PrefillCacheHit atb_flash_attention_qlens  _npu_flash_attention_qlens, 128 x 128 compressed causal mask
    ChunkedPrefill  atb_splitfuse              _npu_paged_attention_splitfuse, per-token causal rows
    (all paged)     fia_tnd_paged              npu_fused_infer_attention_score over the cache viewed [blocks, block, kv_heads*D]
    DecodeOnly      atb_paged_attention        _npu_paged_attention
                    fia_tnd_paged_nomask       FIA without atten_mask / sparse_mode (A5, v0.12.0rc1)

Lengths go as int32 host tensors to ATB kernels (op-plugin's ParamSetter passes CPU tensors as host
data) and as Python lists of cumulative ends to FIA ("TND": actual_seq_lengths are end offsets). The
guard (`npu_op`) sends a call to the native path, with the reason logged once by the registry, where the
table says vllm-ascend runs no torch_npu kernel (head_size 192 before v0.12, 310P's NZ layouts, head_size
512 paged prefill), for float32 inputs (CANN attention kernels take float16/bfloat16), and outside a
kernel's documented limits (`_shape` below against data/kernel_limits.json: the ATB prefix encoder takes
block size 128 only, FIA's paged prefill multiples of 128). The masks are built on the device, once per
step: every layer of a step asks for the same mask and gets the tensor built for the first
(`MaskCache`), as vllm-ascend's model runner builds one per step (worker/model_runner_v1.py@v0.11.0:900-920).
tests/npu compares every recipe the installed torch_npu has with native; tests/unit/ascend_backend/npu
checks each call against the schema of the torch_npu wheel each release pins.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Hashable

import torch

from ascend_backend.attention import ops as _declared  # noqa: F401  (declares the ops adapted here)
from ascend_backend.attention.layout import KVCacheDims
from ascend_backend.npu.guard import dtype_name, npu_op
from ascend_backend.platform.kernels import CallFacts
from ascend_backend.platform.limits import CallShape

# vllm-ascend's FIA mask: int8, 1 above the diagonal; sparse_mode=3 reads its causal pattern from it
# (attention_mask.py get_splitfuse_attn_mask, v0.11.0 to v0.25.1rc1).
FIA_MASK_SIZE = 2048
# The "compressed" causal mask _npu_flash_attention_qlens takes (vllm-ascend passes 128 x 128).
ATB_QLENS_MASK_SIZE = 128
# The splitfuse kernel wants a finite mask value in bfloat16 (vllm-ascend scales its 1s by -10000).
ATB_SPLITFUSE_BF16_MASK_VALUE = -10000.0
# npu_fusion_attention's "no limit" for pre tokens (device/utils.py@v0.23.0 SWA_INT_MAX).
INT_MAX = 2147483647
# PrefillNoCache through FIA passes block_size 128 with no block table (_get_fia_params).
FIA_DENSE_BLOCK_SIZE = 128


def _host_int32(lengths: torch.Tensor) -> torch.Tensor:
    return lengths.to(device="cpu", dtype=torch.int32)


def _cumulative(lengths: torch.Tensor) -> list[int]:
    """[3, 2, 4] -> [3, 5, 9]: TND layout's actual_seq_lengths are end offsets, not lengths."""
    return torch.cumsum(_host_int32(lengths), 0).tolist()


# --------------------------------------------------------------------------------------------- masks
class MaskCache:
    """The masks of the current step, built on the device and kept while the step's layers ask for them.

    Every layer of a step calls its attention with the same lengths, so every layer asks for the same
    mask; building it on the host and copying it per layer cost 128 MiB per layer at 8k tokens. The
    first layer builds it on the device, the others get that tensor; the next step's lengths build
    anew and the oldest entries are dropped (`keep` entries: a prefill and a decode mask interleave).
    Read-only by contract: no kernel writes its mask.
    """

    def __init__(self, keep: int = 4) -> None:
        self._masks: OrderedDict[Hashable, torch.Tensor] = OrderedDict()
        self._keep = keep

    def get(self, key: Hashable, build: Callable[[], torch.Tensor]) -> torch.Tensor:
        mask = self._masks.get(key)
        if mask is None:
            mask = self._masks[key] = build()
            while len(self._masks) > self._keep:
                self._masks.popitem(last=False)
        else:
            self._masks.move_to_end(key)
        return mask


ATB_MASKS = MaskCache()  # one per process: the masks of the step in flight


def atb_causal_mask(size: int, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """[size, size] mask of the ATB flash kernels: above the diagonal -inf in float16, 1 in bfloat16
    (the value vllm-ascend's AttentionMaskBuilder writes for each dtype), 0 elsewhere; built on `device`."""

    def build() -> torch.Tensor:
        above = torch.ones(size, size, dtype=torch.bool, device=device).triu(1)
        masked = float("-inf") if dtype == torch.float16 else 1.0
        return torch.zeros(size, size, dtype=dtype, device=device).masked_fill(above, masked)

    return ATB_MASKS.get(("causal", size, dtype, str(device)), build)


def atb_splitfuse_mask(
    query_lens: list[int], seq_lens: list[int], dtype: torch.dtype, device: torch.device | str
) -> torch.Tensor:
    """[num_tokens, max_seq_len] mask for `_npu_paged_attention_splitfuse`: row t is the causal mask
    row of token t's position in its sequence (-inf in float16, -10000 in bfloat16); built on `device`."""

    def build() -> torch.Tensor:
        max_len = max(seq_lens)
        positions = torch.cat([torch.arange(s - q, s, device=device) for q, s in zip(query_lens, seq_lens)])
        above = torch.arange(max_len, device=device)[None, :] > positions[:, None]
        masked = float("-inf") if dtype == torch.float16 else ATB_SPLITFUSE_BF16_MASK_VALUE
        return torch.zeros(above.shape, dtype=dtype, device=device).masked_fill(above, masked)

    return ATB_MASKS.get(("splitfuse", tuple(query_lens), tuple(seq_lens), dtype, str(device)), build)


def fia_causal_mask(device: torch.device | str, dtype: torch.dtype = torch.int8) -> torch.Tensor:
    """The shared [2048, 2048] mask (1 above the diagonal) on `device`, built once per device and dtype
    (as vllm-ascend's AttentionMaskBuilder keeps one): rebuilding and copying 4 MiB per layer and step
    would cost more than the attention itself. Read-only by contract: no kernel writes its mask."""
    return _fia_mask_on(str(device), dtype)


@functools.lru_cache(maxsize=8)
def _fia_mask_on(device: str, dtype: torch.dtype) -> torch.Tensor:
    return torch.ones(FIA_MASK_SIZE, FIA_MASK_SIZE, dtype=torch.int8).triu(1).to(dtype).to(device)


# --------------------------------------------------------------------------------------------- guards
def _dense_shape(query, key, value, seq_lens, scale) -> CallShape:
    return CallShape(
        dtype=dtype_name(query),
        head_size=int(query.shape[-1]),
        num_heads=int(query.shape[1]),
        num_kv_heads=int(key.shape[1]),
        max_query_len=int(_host_int32(seq_lens).max()),
        paged=False,
    )


def _paged_shape(query, kv_cache, block_tables, query_lens, seq_lens, scale) -> CallShape:
    dims = KVCacheDims.of(kv_cache)
    queries, contexts = _host_int32(query_lens).tolist(), _host_int32(seq_lens).tolist()
    return CallShape(
        dtype=dtype_name(query),
        head_size=dims.head_size,
        block_size=dims.block_size,
        num_heads=int(query.shape[1]),
        num_kv_heads=dims.num_kv_heads,
        max_query_len=max(queries),
        prefix_lens=tuple(c - q for q, c in zip(queries, contexts)),
        paged=True,
    )


def _decode_shape(query, kv_cache, block_tables, context_lens, scale) -> CallShape:
    dims = KVCacheDims.of(kv_cache)
    return CallShape(
        dtype=dtype_name(query),
        head_size=dims.head_size,
        block_size=dims.block_size,
        num_heads=int(query.shape[1]),
        num_kv_heads=dims.num_kv_heads,
        max_query_len=1,
        paged=True,
    )


def _head_size(first: torch.Tensor, *_args: object) -> CallFacts:
    """The rows of attention ops depend on the head size (the last dim of the op's first tensor) and, for
    decode under FULL_DECODE_ONLY, on the batch size being in the engine's pa_shape_list (its first dim)."""
    return CallFacts(head_size=int(first.shape[-1]), num_tokens=int(first.shape[0]))


# --------------------------------------------------------------------------------------------- cache write
def _atb_reshape_and_cache(npu, key, value, kv_cache, slot_mapping) -> None:
    npu._npu_reshape_and_cache(
        key=key, value=value, key_cache=kv_cache[0], value_cache=kv_cache[1], slot_indices=slot_mapping
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


def _fia_tnd_dense(npu, query, key, value, seq_lens, scale) -> torch.Tensor:
    # attention_v1.py@v0.19.1rc1:944 (the causal branch; the pre_tokens/next_tokens at :916 are the
    # attention-sinks branch's): no window arguments beside sparse_mode 3.
    ends = _cumulative(seq_lens)
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
    )
    return out.view_as(query)


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
        "fusion_attention_dense": _fusion_attention_dense,
    },
    facts=_head_size,
    shape=_dense_shape,
)


# --------------------------------------------------------------------------------------------- paged states
def _fia_tnd_paged(
    npu, query, kv_cache, block_tables, query_lens, seq_lens, scale, *, masked: bool = True
) -> torch.Tensor:
    # attention_v1.py@v0.13.0 _get_fia_params: K/V as the paged cache viewed [blocks, block_size, kv_heads * D].
    dims = KVCacheDims.of(kv_cache)
    mask_args = {"atten_mask": fia_causal_mask(query.device), "sparse_mode": 3} if masked else {}
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
    },
    facts=_head_size,
    shape=_paged_shape,
)
chunked_prefill_attention_npu = npu_op(
    "chunked_prefill_attention",
    {"atb_splitfuse": _atb_splitfuse, "fia_tnd_paged": _fia_tnd_paged},
    facts=_head_size,
    shape=_paged_shape,
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


def _fia_decode(npu, query, kv_cache, block_tables, context_lens, scale, *, masked: bool = True) -> torch.Tensor:
    # Every sequence brings one query token, so the TND query ends are 1, 2, ..., num_seqs.
    ones = torch.ones(query.shape[0], dtype=torch.int32)
    return _fia_tnd_paged(npu, query, kv_cache, block_tables, ones, context_lens, scale, masked=masked)


def _fia_decode_nomask(npu, query, kv_cache, block_tables, context_lens, scale) -> torch.Tensor:
    # attention_v1.py@v0.12.0rc1 _forward_decode_only_ascend91095 (A5): no atten_mask, no sparse_mode.
    return _fia_decode(npu, query, kv_cache, block_tables, context_lens, scale, masked=False)


paged_decode_attention_npu = npu_op(
    "paged_decode_attention",
    {
        "atb_paged_attention": _atb_paged_attention,
        "fia_tnd_paged": _fia_decode,
        "fia_tnd_paged_nomask": _fia_decode_nomask,
    },
    facts=_head_size,
    shape=_decode_shape,
)
