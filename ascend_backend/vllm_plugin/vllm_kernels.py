"""vLLM's own CPU kernels as the registry's `vllm_cpu` backend, registered inside a vLLM CPU engine.

Why: the registry picks, per op and device, a compiled kernel where one exists and the native PyTorch
path otherwise. On an Ascend NPU those kernels are torch_npu's; inside a vLLM CPU engine the compiled
kernels at hand are vLLM's C++ ops. Registering them makes the plugin's default CPU server run the
kernels vLLM itself runs, with the registry's switches, counters and faults on top.
`ASCEND_BACKEND_FORCE_NATIVE=<ops or *>` puts the native path back for any of them: the same first
experiment as forcing native over a suspect NPU kernel, with two real implementations to compare.

Which ops: those with a C++ kernel in vLLM's CPU build that beats our native code at serving shapes
(measured at SmolLM2's decode step, 32 tokens, bf16):
- `vllm_cpu_kv_write` -> `cpu_attn_reshape_and_cache` (the cache write),
- `vllm_cpu_paged_attention` -> `cpu_attention_with_kv_cache` (decode, prefill and chunked prefill),
- `rotary_embedding` -> `rotary_embedding` (RoPE; in place in vLLM, on copies here),
- `rms_norm` / `add_rms_norm` -> `rms_norm` / `fused_add_rms_norm` (5 µs against 30-40 µs native;
  vLLM itself runs PyTorch code for RMSNorm on x86, which Inductor fuses in compiled mode, while our
  operators must stay opaque there so that every call is dispatched and counted).
`silu_and_mul` keeps the native path: vLLM's C++ kernel takes 61 µs where PyTorch takes 29 µs.
The cache write and the attention are linked in the registry (see `attention.vllm_cpu_layout`): vLLM packs the
cache for its ISA, so they switch to native together.

Each function takes its op's declared parameters (declared with the native paths: `ascend_backend.ops`,
`attention.vllm_cpu_layout`); the registry checks the names when they are registered.

Never registered at import: only `install()`, which the plugin's `register()` calls in a vLLM
process, adds them. A plain process (the workbench, the tests of the native paths) keeps its choices
when it imports the plugin.
"""

from __future__ import annotations

import functools

import torch
from vllm import _custom_ops as ops

import ascend_backend.ops  # noqa: F401  (registers the native ops this module adds kernels to)
from ascend_backend.attention.vllm_cpu_layout import KV_WRITE_OP, PAGED_ATTENTION_OP, PagedStep
from ascend_backend.registry import REGISTRY, Backend

ROTARY_OP = "rotary_embedding"
_KERNEL_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@functools.cache
def attention_isa(dtype: torch.dtype, block_size: int, head_size: int) -> str:
    """The ISA vLLM's CPU attention builder picks for this cache; the cache layout depends on it."""
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    return _get_attn_isa(dtype, block_size, head_size)


def _cache_halves(kv_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[nb, Hk, bs, 2D] -> key and value halves [nb, Hk, bs, D], views as vLLM's CPU backend takes them."""
    num_blocks, heads, block_size, fused = kv_cache.shape
    key_cache, value_cache = kv_cache.view(num_blocks, heads, 2 * block_size, fused // 2).chunk(2, dim=2)
    return key_cache, value_cache


def kv_write_vllm(key, value, kv_cache, slot_mapping):
    # key, value: [T, Hk, D]; slot_mapping: [T'] (T' <= T, negative slots are padding)
    key_cache, value_cache = _cache_halves(kv_cache)
    isa = attention_isa(kv_cache.dtype, kv_cache.shape[2], kv_cache.shape[3] // 2)
    ops.cpu_attn_reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, isa)


def paged_attention_vllm(query, kv_cache, step: PagedStep, scale, out):
    # query: [N, Hq, D] -> [N, Hq, D] (written into `out` when given)
    key_cache, value_cache = _cache_halves(kv_cache)
    kv_heads, head_size = kv_cache.shape[1], kv_cache.shape[3] // 2
    if out is None:
        out = torch.empty_like(query)
    schedule = step.scheduler_metadata
    if schedule is None:  # outside an engine (tests, the op suite): build the work split vLLM's builder would
        schedule = ops.cpu_attn_get_scheduler_metadata(
            num_reqs=step.seq_lens.shape[0],
            num_heads=query.shape[1],
            num_kv_heads=kv_heads,
            head_dim=head_size,
            seq_lens=step.seq_lens,
            dtype=query.dtype,
            query_start_loc=step.query_start_loc,
            causal=True,
            sliding_window_size=-1,
            isa=attention_isa(kv_cache.dtype, step.block_size, head_size),
            enable_kv_split=False,
        )
    ops.cpu_attention_with_kv_cache(
        query=query,
        key_cache=key_cache,
        value_cache=value_cache,
        output=out,
        query_start_loc=step.query_start_loc,
        seq_lens=step.seq_lens,
        scale=scale,
        causal=True,
        alibi_slopes=None,
        sliding_window=-1,
        block_table=step.block_table,
        softcap=0.0,
        scheduler_metadata=schedule,
        s_aux=None,
    )
    return out


def rotary_unsupported(positions, query, key, head_size, cos_sin_cache, is_neox) -> str | None:
    """Why vLLM's rotary kernel cannot take this call (it then runs native), or None."""
    if query.dtype not in _KERNEL_DTYPES:
        return f"query dtype {query.dtype}"
    if cos_sin_cache.dtype != query.dtype:
        return f"cos/sin cache dtype {cos_sin_cache.dtype} differs from query dtype {query.dtype}"
    if key is not None and key.dtype != query.dtype:
        return f"key dtype {key.dtype} differs from query dtype {query.dtype}"
    if positions.dim() != 1:
        return f"positions of shape {tuple(positions.shape)} (the kernel takes [T])"
    return None


def rotary_embedding_vllm(positions, query, key, head_size, cos_sin_cache, is_neox):
    # query: [T, Hq*D] or [T, Hq, D]; key likewise or None. vLLM's kernel rotates in place and reads
    # [T, H*D] rows (a [T, H, D] tensor is misread), so it works on flat copies: the registry's contract
    # is that callers' tensors are never modified.
    tokens = query.shape[0]
    q = query.reshape(tokens, -1).clone()
    k = None if key is None else key.reshape(tokens, -1).clone()
    ops.rotary_embedding(positions.long(), q, k, head_size, cos_sin_cache, is_neox)
    return q.view(query.shape), (None if k is None else k.view(key.shape))


def rms_norm_unsupported(x, weight, eps, *_: object) -> str | None:
    """Why vLLM's RMSNorm kernels cannot take this call (it then runs native), or None."""
    if weight.dtype != x.dtype:
        return f"weight dtype {weight.dtype} differs from input dtype {x.dtype}"
    if x.dtype not in _KERNEL_DTYPES:
        return f"input dtype {x.dtype}"
    if x.shape[-1] % 16:  # the kernel walks the hidden size in vector-width steps and refuses a remainder
        return f"hidden size {x.shape[-1]} is not a multiple of 16"
    return None


def _add_rms_norm_unsupported(x, residual, weight, eps) -> str | None:
    if residual.dtype != x.dtype:
        return f"residual dtype {residual.dtype} differs from input dtype {x.dtype}"
    return rms_norm_unsupported(x, weight, eps)


def rms_norm_vllm(x, weight, eps):
    # x: [..., hidden] -> [..., hidden]. The kernel reads rows as contiguous: a strided view is copied.
    x = x.contiguous()
    out = torch.empty_like(x)
    ops.rms_norm(out, x, weight.contiguous(), eps)
    return out


def add_rms_norm_vllm(x, residual, weight, eps):
    # x, residual: [..., hidden] -> (normed, x + residual). The kernel overwrites both arguments, so it
    # works on copies (callers' tensors are never modified).
    normed, summed = x.contiguous().clone(), residual.contiguous().clone()
    ops.fused_add_rms_norm(normed, summed, weight.contiguous(), eps)
    return normed, summed


# (op, implementation, per-call guard or None). Linked ops get no guard: one call must never split them.
_KERNELS = (
    (KV_WRITE_OP, kv_write_vllm, None),
    (PAGED_ATTENTION_OP, paged_attention_vllm, None),
    (ROTARY_OP, rotary_embedding_vllm, rotary_unsupported),
    ("rms_norm", rms_norm_vllm, rms_norm_unsupported),
    ("add_rms_norm", add_rms_norm_vllm, _add_rms_norm_unsupported),
)


def install() -> tuple[str, ...]:
    """Register vLLM's CPU kernels as `vllm_cpu` implementations; returns the ops now served by them.

    Idempotent. Ops whose `vllm_cpu` slot holds something else already are left as they are.
    """
    for op, fn, guard in _KERNELS:
        if Backend.VLLM_CPU not in REGISTRY.entry(op).impls:
            REGISTRY.register(op, Backend.VLLM_CPU, supports=guard)(fn)
    return tuple(op for op, fn, _ in _KERNELS if REGISTRY.entry(op).impls.get(Backend.VLLM_CPU) is fn)


def uninstall() -> None:
    """Remove the kernels `install` registered (tests compare the two backends in one process)."""
    for op, fn, _ in _KERNELS:
        if REGISTRY.entry(op).impls.get(Backend.VLLM_CPU) is fn:
            REGISTRY.unregister(op, Backend.VLLM_CPU)
