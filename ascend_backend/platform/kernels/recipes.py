"""The argument recipes ascend_backend's NPU adapters know, per op: recipe name -> the torch_npu call(s) it makes.

A recipe is one way of making a call: the function and how its arguments are built (layout, masks,
which lengths, contiguity). The kernel-selection table (`ascend_backend/data/kernel_table.json`) names
a recipe per row; the adapters in `ascend_backend.npu.adapters` implement each one, and a unit test
checks that both sides list the same names. `native` is always a recipe: the call goes to the op's
native PyTorch implementation, with the row's reason. A recipe making two calls in a row names both,
in order, joined by " + " (`calls` splits them): the W8A8 linears quantize the activation, then multiply.

    attention (packed "TND" = [tokens, heads, head_size] with cumulative per-sequence lengths):
      fia_tnd_dense         npu_fused_infer_attention_score over fresh K/V, block_table None, sparse_mode 3
      fia_tnd_paged         ... over the paged cache viewed [blocks, block_size, kv_heads*head_size]
      fia_tnd_paged_nomask  ... the same without atten_mask and sparse_mode (A5 decode in v0.12.0rc1)
    rotary:
      atb_rope              _npu_rotary_embedding, in place on copies; one cos/sin cache per process
      apply_rotary_pos_emb  npu_apply_rotary_pos_emb with cos/sin gathered per token ([1, T, 1, D])
      mrope_rope            npu_mrope(..., mrope_section=[0, 0, 0]): plain RoPE with the cache passed per call
    W8A8 linears:
      quantize_divide       npu_quantize(x, scale, int8 offset, qint8, -1, div_mode=True) + npu_quant_matmul
      quantize_reciprocal   npu_quantize(x, 1 / scale, offset in the model dtype, qint8, -1, False) + npu_quant_matmul
      quantize_reciprocal_float_bias  the same with a float32 deq_scale and a float bias (compressed-tensors)
      quant_matmul_prequantized       npu_quant_matmul alone: x is already int8 (a fused norm-quant ran before)
      dynamic_quant         npu_dynamic_quant(x) + npu_quant_matmul(..., pertoken_scale=...)
      dynamic_quant_int8    npu_dynamic_quant(x, dst_type=torch.int8) + npu_quant_matmul(...)
    the quantized weight, once at load:
      nz_cast               npu_format_cast(weight [K, N], 29): FRACTAL_NZ
      nz_cast_transposed    310P: npu_format_cast(weight [N, K], 29), handed to the matmul transposed
    the norm before a static W8A8 linear:
      npu_add_rms_norm_quant        one kernel: (x + residual) normalised and quantized to int8
      add_rms_norm_then_quantize    npu_add_rms_norm, then the linear's npu_quantize (no fusion)

`REFUSED` lists the ops vllm-ascend runs that ascend_backend declines, with the reason (the table and
the `kernels` verb show them; `select()` answers native with that reason).
"""

from __future__ import annotations

NATIVE = "native"
CALL_SEPARATOR = " + "

RECIPES: dict[str, dict[str, str]] = {
    "reshape_and_cache": {
        "atb_reshape_and_cache": "_npu_reshape_and_cache",
        "scatter_pa_kv_cache_norm": "npu_scatter_pa_kv_cache",
    },
    "prefill_attention": {
        "atb_flash_attention": "_npu_flash_attention",
        "fia_tnd_dense": "npu_fused_infer_attention_score",
        "fusion_attention_dense": "npu_fusion_attention",
    },
    "prefill_cache_hit_attention": {
        "atb_flash_attention_qlens": "_npu_flash_attention_qlens",
        "atb_splitfuse": "_npu_paged_attention_splitfuse",
        "fia_tnd_paged": "npu_fused_infer_attention_score",
    },
    "paged_decode_attention": {
        "atb_paged_attention": "_npu_paged_attention",
        "fia_tnd_paged": "npu_fused_infer_attention_score",
        "fia_tnd_paged_nomask": "npu_fused_infer_attention_score",
    },
    "chunked_prefill_attention": {
        "atb_splitfuse": "_npu_paged_attention_splitfuse",
        "fia_tnd_paged": "npu_fused_infer_attention_score",
    },
    "rotary_embedding": {
        "atb_rope": "_npu_rotary_embedding",
        "apply_rotary_pos_emb": "npu_apply_rotary_pos_emb",
        "mrope_rope": "npu_mrope",
    },
    "mrope": {"npu_mrope": "npu_mrope"},
    "rms_norm": {"npu_rms_norm": "npu_rms_norm"},
    "add_rms_norm": {"npu_add_rms_norm": "npu_add_rms_norm", "add_then_npu_rms_norm": "npu_rms_norm"},
    "gemma_rms_norm": {"npu_rms_norm_plus_one": "npu_rms_norm"},
    "gemma_add_rms_norm": {
        "npu_add_rms_norm_plus_one": "npu_add_rms_norm",
        "add_then_npu_rms_norm_plus_one": "npu_rms_norm",
    },
    "silu_and_mul": {"npu_swiglu": "npu_swiglu", "npu_swiglu_fp32": "npu_swiglu"},
    "quick_gelu": {"npu_fast_gelu": "npu_fast_gelu"},
    "gelu": {},
    "gelu_tanh": {},
    "w8a8_linear": {
        "quantize_divide": "npu_quantize + npu_quant_matmul",
        "quantize_reciprocal": "npu_quantize + npu_quant_matmul",
        "quantize_reciprocal_float_bias": "npu_quantize + npu_quant_matmul",
        "quant_matmul_prequantized": "npu_quant_matmul",
    },
    "w8a8_dynamic_linear": {
        "dynamic_quant": "npu_dynamic_quant + npu_quant_matmul",
        "dynamic_quant_int8": "npu_dynamic_quant + npu_quant_matmul",
    },
    "quant_weight_layout": {"nz_cast": "npu_format_cast", "nz_cast_transposed": "npu_format_cast"},
    "add_rms_norm_quant": {
        "npu_add_rms_norm_quant": "npu_add_rms_norm_quant",
        "add_rms_norm_then_quantize": "npu_add_rms_norm + npu_quantize",
    },
}

# Ops vllm-ascend runs that ascend_backend declines, and why (no recipe, no native op: a clear answer instead).
REFUSED: dict[str, str] = {
    "w8a16_linear": (
        "ascend_backend quantizes W8A8 only (static and per-token dynamic, ascend_backend.quantization.scheme); "
        "a W8A16 checkpoint's linears (vllm-ascend: npu_weight_quant_batchmatmul, quantization/w8a16.py from "
        "v0.13.0rc1, quantization/methods/w8a16.py from v0.14.0rc1) have no op here: serve them with vllm-ascend"
    ),
    "w4a8_linear": (
        "ascend_backend quantizes W8A8 only (static and per-token dynamic, ascend_backend.quantization.scheme); "
        "a W4A8_DYNAMIC checkpoint's linears (vllm-ascend: npu_dynamic_quant + npu_weight_quant_batchmatmul "
        "with int4-packed weights, quantization/w4a8_dynamic.py from v0.9.1rc2, quantization/methods/w4a8.py "
        "from v0.14.0rc1) have no op here: serve them with vllm-ascend"
    ),
}

# Which attention state an op serves, for tables and diffs ("decode moved from ... to ...").
STATES: dict[str, str] = {
    "reshape_and_cache": "cache write",
    "prefill_attention": "PrefillNoCache",
    "prefill_cache_hit_attention": "PrefillCacheHit",
    "paged_decode_attention": "DecodeOnly",
    "chunked_prefill_attention": "ChunkedPrefill",
}


def kernel_of(op: str, recipe: str) -> str:
    """'paged_decode_attention', 'atb_paged_attention' -> '_npu_paged_attention'; 'native' -> 'native'."""
    if recipe == NATIVE:
        return NATIVE
    try:
        return RECIPES[op][recipe]
    except KeyError:
        known = ", ".join(sorted(RECIPES.get(op, {}))) or "none"
        raise ValueError(f"op {op!r} has no recipe {recipe!r}; its recipes: {known}, native") from None


def calls(kernel: str) -> tuple[str, ...]:
    """'npu_quantize + npu_quant_matmul' -> ('npu_quantize', 'npu_quant_matmul'); 'native' -> ()."""
    return () if kernel == NATIVE else tuple(kernel.split(CALL_SEPARATOR))


def label(op: str) -> str:
    """'paged_decode_attention' -> 'paged_decode_attention (DecodeOnly)'; other ops as they are."""
    return f"{op} ({STATES[op]})" if op in STATES else op
