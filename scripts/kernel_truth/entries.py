"""What a probe hands the walker, and which kernels found on a path belong to the op.

`Entry` is where a walk starts (a function, its arguments, a label for the report); `NoEntry` says
vllm-ascend has no implementation of its own there. `family(op, name, kind)` says which calls found on a
path count for the op: an attention walk also passes the cache write, a norm walk prefetch helpers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scripts.kernel_truth.values import FuncRef

ATTENTION_OPS = {
    "prefill_attention": "PrefillNoCache",
    "prefill_cache_hit_attention": "PrefillCacheHit",
    "paged_decode_attention": "DecodeOnly",
    "chunked_prefill_attention": "ChunkedPrefill",
}
# Functions that appear on a path without being the op's compute kernel.
AUXILIARY = frozenset(
    {
        "npu_format_cast",
        "_npu_paged_attention_get_workspace",
        "_npu_fused_infer_attention_score_get_max_workspace",
        "_npu_fused_infer_attention_score_v2_get_max_workspace",
        "npu_prefetch",
        "get_npu_format",
        "npu_dtype_cast",
    }
)
CACHE_WRITE = ("reshape_and_cache", "scatter_pa_kv_cache", "npu_kv_rmsnorm_rope_cache")


def family(op: str, name: str, kind: str) -> bool:
    """Whether a call found on `op`'s path is the op's own kernel (or vllm-ascend's refusal / native path)."""
    if kind in ("raise", "native"):
        return True
    base = name.split(":", 1)[-1].split(".")[-1]
    if kind == "torch_npu" and base.removesuffix(".out") in AUXILIARY and op != "quant_weight_layout":
        return False
    if op == "reshape_and_cache":
        return any(k in name for k in CACHE_WRITE)
    if op in ATTENTION_OPS:
        return ("attention" in name or "flash" in name or "attn" in name) and not any(k in name for k in CACHE_WRITE)
    if op in ("rms_norm", "add_rms_norm", "gemma_rms_norm", "gemma_add_rms_norm"):
        return "norm" in name
    if op == "silu_and_mul":
        return "swiglu" in name or "silu" in name
    if op in ("quick_gelu", "gelu", "gelu_tanh"):
        return "gelu" in name
    if op in ("rotary_embedding", "mrope"):
        return "rope" in name or "rotary" in name or "rot" in name
    if op.endswith("_linear"):
        return "quant" in name or "matmul" in name or "mm" in name
    if op == "quant_weight_layout":
        return "format_cast" in name
    if op == "add_rms_norm_quant":
        return "norm" in name or "quantize" in name
    return True


@dataclass(frozen=True)
class Entry:
    func: FuncRef
    args: dict[str, Any]
    label: str  # 'AscendRMSNorm.forward_oot (vllm_ascend/ops/layernorm.py:72)'


@dataclass(frozen=True)
class NoEntry:
    """vllm-ascend has no implementation of its own here: vLLM's native layer runs (`native`) or none."""

    reason: str
    native: bool = True
