"""What a call must satisfy beyond its schema: dtypes, devices, host lengths, layouts, consistency of sizes.

The schema says "Tensor"; the kernels say more. Each rule is written from where the requirement is
stated or shown: op-plugin's ATB wrappers hand CPU tensors to ATB as host data (ParamSetter::Input,
op_plugin/utils/custom_functions/atb/AtbCommon.cpp@7.2.0) and vllm-ascend passes every ATB length as an
int32 host tensor (seq_lens_cpu, attention_v1.py@v0.11.0); block tables and slot mappings are int32 on
the device (AscendMetadata); FIA's "TND" lengths are cumulative ends and sparse_mode 3 needs the
2048 x 2048 int8 causal mask (attention_v1.py@v0.13.0, attention_mask.py@v0.13.0); `_npu_rotary_embedding`
rotates pairs across `head_size` columns of a cache exactly that wide (RopeAtb.cpp); npu_mrope accepts
rotary_mode 'half' or 'interleave' only (RopeWithSinCosCacheKernelNpuOpApi.cpp@master). The W8A8 calls
get what vllm-ascend hands them (quantization/w8a8.py and w8a8_dynamic.py, v0.8.4rc2 to v0.13.0, then
quantization/methods/): int8 (qint8) activations quantized along the last axis with the per-tensor scale
and offset repeated to K (process_weights_after_loading), the offset int8 with div_mode=True
(w8a8.py@v0.8.5rc1) and in the scale's dtype with div_mode=False (w8a8.py@v0.9.0rc1 on); an int8 [K, N]
weight (transposed once after loading); the fused norm-quant gets the scale and offset repeated to K in
the model's dtype (layernorm.py@v0.11.0:53); the weight cast is int8 to FRACTAL_NZ, format 29
(ACL_FORMAT_FRACTAL_NZ, vllm_ascend/utils.py).

Dtype rules come from the kernels' own tables, not from what vllm-ascend happens to pass: every
npu_quant_matmul call must be a row of its dtype table for the chip (`limits.quant_matmul_combinations`,
data/kernel_limits.json, from op-plugin's torch_npu-npu_quant_matmul.md), whose departures from
vllm-ascend the data file lists. A cache write must land in the ND layout the cache has: the mode the
kernel gets is the one passed, else the schema's default, else what op-plugin passes implicitly at that
commit (`schema.effective`: "PA_NZ" at op-plugin 7.2.0/7.3.0), and it must be "Norm".

`problems(call, device, chip, commit)` returns every broken rule as text; an empty list means the call is
in contract. Values computed by the stand-in are never looked at: only the arguments our adapters built.
"""

from __future__ import annotations

from typing import Any

import torch

from ascend_backend.platform.kernels import ChipFamily
from ascend_backend.platform.limits import quant_matmul_combinations
from tests.unit.ascend_backend.npu.schema import effective
from tests.unit.ascend_backend.npu.stand_in import Call

ACTIVATION_DTYPES = (torch.float16, torch.bfloat16)

# function -> argument names that are activations: float16/bfloat16 on the device, all one dtype
ACTIVATIONS = {
    "_npu_reshape_and_cache": ("key", "value", "key_cache", "value_cache"),
    "npu_scatter_pa_kv_cache": ("key", "value", "key_cache", "value_cache"),
    "_npu_flash_attention": ("query", "key", "value", "mask", "out"),
    "_npu_flash_attention_qlens": ("query", "key_cache", "value_cache", "mask", "out"),
    "_npu_paged_attention": ("query", "key_cache", "value_cache", "out"),
    "_npu_paged_attention_splitfuse": ("query", "key_cache", "value_cache", "mask", "out"),
    "npu_fused_infer_attention_score": ("query", "key", "value"),
    "npu_fusion_attention": ("query", "key", "value"),
    "_npu_rotary_embedding": ("query", "key", "cos_sin_cache"),
    "npu_apply_rotary_pos_emb": ("query", "key", "cos", "sin"),
    "npu_mrope": ("query", "key", "cos_sin_cache"),
    "npu_rms_norm": ("self", "gamma"),
    "npu_add_rms_norm": ("x1", "x2", "gamma"),
    "npu_swiglu": ("self",),
    "npu_fast_gelu": ("self",),
    "npu_quantize": ("self", "scales"),
    "npu_dynamic_quant": ("input",),
    "npu_add_rms_norm_quant": ("x1", "x2", "gamma", "scales1"),
}
# Functions vllm-ascend also hands float32: 310P's SwiGLU runs in float32 (activation.py@v0.13.0:40).
FLOAT32_TOO = frozenset({"npu_swiglu"})
HOST_INT32 = {
    "_npu_flash_attention": ("seq_len",),
    "_npu_flash_attention_qlens": ("seq_len", "context_lens"),
    "_npu_paged_attention": ("context_lens",),
    "_npu_paged_attention_splitfuse": ("seq_len", "context_lens"),
}
DEVICE_INT32 = {
    "_npu_reshape_and_cache": ("slot_indices",),
    "npu_scatter_pa_kv_cache": ("slot_mapping",),
    "_npu_flash_attention_qlens": ("block_table",),
    "_npu_paged_attention": ("block_table",),
    "_npu_paged_attention_splitfuse": ("block_table",),
    "npu_fused_infer_attention_score": ("block_table",),
}


def _tensors(call: Call, names: tuple[str, ...]) -> dict[str, torch.Tensor]:
    return {n: call.arguments[n] for n in names if isinstance(call.arguments.get(n), torch.Tensor)}


def _common(call: Call, device: torch.device) -> list[str]:
    out = []
    acts = _tensors(call, ACTIVATIONS.get(call.function, ()))
    dtypes = {t.dtype for t in acts.values()}
    allowed = (*ACTIVATION_DTYPES, torch.float32) if call.function in FLOAT32_TOO else ACTIVATION_DTYPES
    for name, t in acts.items():
        if t.dtype not in allowed:
            out.append(f"{name} is {t.dtype}, not float16/bfloat16")
        if t.device != device:
            out.append(f"{name} is on {t.device}, not the device {device}")
    if len(dtypes) > 1:
        out.append(f"activations mix dtypes {sorted(map(str, dtypes))}")
    for name, t in _tensors(call, HOST_INT32.get(call.function, ())).items():
        if t.device.type != "cpu" or t.dtype != torch.int32:
            out.append(f"{name} must be an int32 host tensor, got {t.dtype} on {t.device}")
    for name in HOST_INT32.get(call.function, ()):
        if name in call.arguments and not isinstance(call.arguments[name], torch.Tensor):
            out.append(f"{name} must be an int32 host tensor, got {type(call.arguments[name]).__name__}")
    for name, t in _tensors(call, DEVICE_INT32.get(call.function, ())).items():
        if t.device != device or t.dtype != torch.int32:
            out.append(f"{name} must be int32 on the device, got {t.dtype} on {t.device}")
    return out


def _lengths(value: Any) -> list[int]:
    return value.tolist() if isinstance(value, torch.Tensor) else list(value)


def _is_cumulative_ends(ends: list[int], total: int) -> bool:
    return bool(ends) and all(b >= a for a, b in zip(ends, ends[1:])) and ends[0] >= 0 and ends[-1] == total


def _fia(a: dict[str, Any]) -> list[str]:
    out, q = [], a["query"]
    if a.get("input_layout") != "TND" or q.dim() != 3:
        return [f"expected TND (query [T, N, D]); got input_layout={a.get('input_layout')!r}, query {list(q.shape)}"]
    if a.get("num_heads") != q.shape[1]:
        out.append(f"num_heads {a.get('num_heads')} != query heads {q.shape[1]}")
    kv_heads = a.get("num_key_value_heads", 0)
    if not kv_heads or q.shape[1] % kv_heads:
        out.append(f"num_key_value_heads {kv_heads} does not divide num_heads {q.shape[1]}")
    q_ends = _lengths(a.get("actual_seq_lengths") or [])
    if not _is_cumulative_ends(q_ends, q.shape[0]):
        out.append(f"actual_seq_lengths {q_ends} are not cumulative ends reaching {q.shape[0]}")
    if a.get("sparse_mode") == 3:
        mask = a.get("atten_mask")
        if mask is None or mask.dtype not in (torch.int8, torch.bool) or list(mask.shape) != [2048, 2048]:
            out.append("sparse_mode 3 needs the 2048 x 2048 int8/bool causal mask")
    key, table = a["key"], a.get("block_table")
    if table is not None:
        if key.dim() != 3 or a.get("block_size") != key.shape[1] or key.shape[2] != kv_heads * q.shape[2]:
            out.append(
                f"paged K/V must be [blocks, block_size={a.get('block_size')}, kv_heads*D], got {list(key.shape)}"
            )
        kv_lens = _lengths(a.get("actual_seq_lengths_kv") or [])
        if not (len(kv_lens) == len(q_ends) == table.shape[0]):
            out.append(f"{len(q_ends)} query ends, {len(kv_lens)} kv lengths, {table.shape[0]} block-table rows")
        elif any(kv > table.shape[1] * a["block_size"] for kv in kv_lens):
            out.append(f"kv lengths {kv_lens} exceed the block table's capacity")
    elif _lengths(a.get("actual_seq_lengths_kv") or []) != q_ends or list(key.shape) != [
        q.shape[0],
        kv_heads,
        q.shape[2],
    ]:
        out.append("dense FIA needs K/V [T, kv_heads, D] and actual_seq_lengths_kv == actual_seq_lengths")
    return out


def _fusion(a: dict[str, Any]) -> list[str]:
    q, out = a["query"], []
    if a.get("input_layout") != "TND" or a.get("head_num") != q.shape[1]:
        out.append(f"expected TND with head_num {q.shape[1]}, got {a.get('input_layout')!r}, {a.get('head_num')}")
    if not _is_cumulative_ends(list(a.get("actual_seq_qlen") or []), q.shape[0]):
        out.append("actual_seq_qlen must be cumulative ends")
    mask = a.get("atten_mask")
    if a.get("sparse_mode") == 3 and (mask is None or mask.dtype not in (torch.bool, torch.uint8)):
        out.append("sparse_mode 3 needs a bool/uint8 causal mask")
    return out


def _atb_attention(name: str, a: dict[str, Any]) -> list[str]:
    q, out = a["query"], []
    if q.dim() != 3 or a.get("num_heads") != q.shape[1]:
        out.append(f"query must be [tokens, num_heads={a.get('num_heads')}, D], got {list(q.shape)}")
    cache = a.get("key_cache", a.get("key"))
    if name != "_npu_flash_attention" and (cache.dim() != 4 or cache.shape[2] != a.get("num_kv_heads")):
        out.append(
            f"key_cache must be [blocks, block_size, num_kv_heads={a.get('num_kv_heads')}, D], got {list(cache.shape)}"
        )
    if name in ("_npu_flash_attention", "_npu_flash_attention_qlens", "_npu_paged_attention_splitfuse"):
        if sum(a["seq_len"].tolist()) != q.shape[0]:
            out.append(f"seq_len {a['seq_len'].tolist()} does not add up to the {q.shape[0]} query rows")
    if name == "_npu_paged_attention" and a["context_lens"].shape[0] != q.shape[0]:
        out.append("decode: one context length per query row")
    if name == "_npu_paged_attention_splitfuse" and list(a["mask"].shape) != [
        q.shape[0],
        max(a["context_lens"].tolist()),
    ]:
        out.append(f"splitfuse mask must be [tokens, max context], got {list(a['mask'].shape)}")
    if name == "_npu_flash_attention" and a["mask"].shape[-1] < max(a["seq_len"].tolist()):
        out.append("flash attention mask narrower than the longest sequence")
    if "out" in a and a["out"].shape != q.shape:
        out.append("out must have the query's shape")
    return out


def _cache_write(call: Call, commit: str) -> list[str]:
    a = call.arguments
    out, key, cache = [], a["key"], a["key_cache"]
    slots = a.get("slot_indices", a.get("slot_mapping"))
    if key.shape[1:] != cache.shape[2:] or slots.shape[0] != key.shape[0]:
        out.append(f"key {list(key.shape)} / cache {list(cache.shape)} / slots {list(slots.shape)} do not line up")
    if call.function == "npu_scatter_pa_kv_cache":
        if not a["value"].is_contiguous():
            out.append("value must be contiguous")
        mode = effective(call.signature, a, commit, "cache_mode")
        if mode not in (None, "Norm"):
            passed = "passed" if "cache_mode" in a else "left out, so op-plugin passes"
            out.append(f"cache_mode {mode!r} ({passed}): the ND paged cache needs 'Norm'")
    return out


def _rope(name: str, a: dict[str, Any]) -> list[str]:
    out, q, k = [], a["query"], a["key"]
    cache = a.get("cos_sin_cache")
    if name == "_npu_rotary_embedding":
        if q.dim() != 2 or k.dim() != 2 or q.shape[1] % a["head_size"] or cache.shape[-1] != a["head_size"]:
            out.append(
                f"2-D q/k in heads of head_size={a['head_size']} and a cache that wide; got q {list(q.shape)}, "
                f"cache {list(cache.shape)}"
            )
    if name == "npu_mrope":
        section = list(a.get("mrope_section") or [])
        if a.get("rotary_mode") not in ("half", "interleave"):
            out.append(f"rotary_mode {a.get('rotary_mode')!r} is not 'half' or 'interleave'")
        if len(section) != 3 or (any(section) and sum(section) * 2 != cache.shape[-1]):
            out.append(f"mrope_section {section} must be [0, 0, 0] or sum to rotary_dim/2 = {cache.shape[-1] // 2}")
        if q.dim() != 2 or not q.is_contiguous() or not k.is_contiguous():
            out.append("npu_mrope takes contiguous 2-D q/k")
        if any(section) != (a["positions"].dim() == 2):
            out.append("2-D positions go with a real section, 1-D positions with [0, 0, 0]")
    if name == "npu_apply_rotary_pos_emb":
        cos = a["cos"]
        if (
            q.dim() != 4
            or q.shape[0] != 1
            or list(cos.shape) != [1, q.shape[1], 1, q.shape[3]]
            or cos.shape != a["sin"].shape
        ):
            out.append(f"BSND q [1, T, H, D] with cos/sin [1, T, 1, D]; got q {list(q.shape)}, cos {list(cos.shape)}")
    return out


def _quantize(a: dict[str, Any]) -> list[str]:
    out, x, scales, zero = [], a["self"], a["scales"], a.get("zero_points")
    k = x.shape[-1]
    if a.get("dtype") != torch.qint8:
        out.append(f"dtype {a.get('dtype')} is not torch.qint8")
    if a.get("axis", 1) != -1:
        out.append(f"axis {a.get('axis', 1)}: the scale goes along the last axis (-1)")
    if list(scales.shape) != [k]:
        out.append(f"scales {list(scales.shape)} is not [K={k}] (the per-tensor scale repeated to K)")
    want = torch.int8 if a.get("div_mode", True) else scales.dtype
    if zero is None or list(zero.shape) != [k] or zero.dtype != want:
        got = None if zero is None else f"{zero.dtype} {list(zero.shape)}"
        out.append(f"zero_points must be [K={k}] {want} with div_mode={a.get('div_mode', True)}, got {got}")
    return out


def _dtype(value: Any) -> str | None:
    if value is None:
        return None
    return str(value.dtype if isinstance(value, torch.Tensor) else value).removeprefix("torch.")


def _quant_matmul(a: dict[str, Any], device: torch.device, chip: ChipFamily) -> list[str]:
    out, x1, x2, scale = [], a["x1"], a["x2"], a["scale"]
    tensors = {n: a[n] for n in ("x1", "x2", "scale", "bias", "pertoken_scale") if isinstance(a.get(n), torch.Tensor)}
    out += [f"{n} is on {t.device}, not the device {device}" for n, t in tensors.items() if t.device != device]
    if x2.dim() != 2 or x2.shape[0] != x1.shape[-1]:
        out.append(f"x2 {list(x2.shape)} is not [K={x1.shape[-1]}, N]")
    n = x2.shape[-1]
    if list(scale.shape) != [n]:
        out.append(f"scale {list(scale.shape)} is not [N={n}]")
    bias, pertoken = a.get("bias"), a.get("pertoken_scale")
    if bias is not None and list(bias.shape) != [n]:
        out.append(f"bias {list(bias.shape)} is not [N={n}]")
    if pertoken is not None and (list(pertoken.shape) != [x1.shape[0]] or x1.dim() != 2):
        out.append(f"pertoken_scale must be [{x1.shape[0]}] for 2-D x1, got {list(pertoken.shape)}")
    names = ("x1", "x2", "scale", "offset", "bias", "pertoken_scale", "output_dtype")
    got = tuple(_dtype(a.get(name)) for name in names)
    rows = quant_matmul_combinations(chip)
    if not any(all(g in allowed for g, allowed in zip(got, row)) for row in rows):
        shown = ", ".join(f"{name}={g}" for name, g in zip(names, got))
        out.append(f"({shown}) is no row of npu_quant_matmul's dtype table for {chip.value}")
    return out


def problems(call: Call, device: torch.device, chip: ChipFamily, commit: str) -> list[str]:
    """Every rule `call` breaks (empty when it is in contract) on `chip`, against op-plugin at `commit`."""
    name, a = call.function, call.arguments
    found = _common(call, device)
    if name == "npu_fused_infer_attention_score":
        found += _fia(a)
    elif name == "npu_fusion_attention":
        found += _fusion(a)
    elif name in (
        "_npu_flash_attention",
        "_npu_flash_attention_qlens",
        "_npu_paged_attention",
        "_npu_paged_attention_splitfuse",
    ):
        found += _atb_attention(name, a)
    elif name in ("_npu_reshape_and_cache", "npu_scatter_pa_kv_cache"):
        found += _cache_write(call, commit)
    elif name in ("_npu_rotary_embedding", "npu_mrope", "npu_apply_rotary_pos_emb"):
        found += _rope(name, a)
    elif name in ("npu_rms_norm", "npu_add_rms_norm"):
        x = a.get("self", a.get("x1"))
        if list(a["gamma"].shape) != [x.shape[-1]]:
            found.append(f"gamma {list(a['gamma'].shape)} is not [hidden={x.shape[-1]}]")
    elif name == "npu_quantize":
        found += _quantize(a)
    elif name == "npu_quant_matmul":
        found += _quant_matmul(a, device, chip)
    elif name == "npu_dynamic_quant" and a.get("dst_type") not in (None, torch.int8):
        found.append(f"dst_type {a.get('dst_type')}: W8A8_DYNAMIC quantizes to int8")
    elif name == "npu_swiglu" and a["self"].shape[-1] % 2:
        found.append("npu_swiglu needs an even last dim")
    elif name == "npu_format_cast":
        if a["self"].dtype != torch.int8 or a["self"].dim() != 2 or a.get("acl_format") != 29:
            found.append(f"the weight cast is int8 2-D to FRACTAL_NZ (29), got {a['self'].dtype} {a.get('acl_format')}")
    elif name == "npu_add_rms_norm_quant":
        k = a["x1"].shape[-1]
        for param in ("scales1", "zero_points1"):
            t = a.get(param)
            if not isinstance(t, torch.Tensor) or list(t.shape) != [k] or t.dtype != a["x1"].dtype:
                found.append(f"{param} must be [K={k}] in the activation's dtype (the scale repeated to K)")
    return [f"{name}: {p}" for p in found]
