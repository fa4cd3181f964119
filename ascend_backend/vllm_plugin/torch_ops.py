"""The backend's ops as opaque `torch.library` custom ops, so compiled vLLM still dispatches per call.

Why: in vLLM's compiled mode the model is traced once by dynamo. A plain Python call to
`REGISTRY.dispatch` inside a layer's forward would run only at trace time: the graph would bake in
whichever implementation was chosen then, and the registry's call counters and fault injection would
never see a real call. Wrapping each op in a `torch.library.custom_op` makes it a single opaque node
in the graph whose Python body (`REGISTRY.dispatch`) runs on every execution.

Eager callers do not need the wrapper (it costs a few microseconds per call) and use
`REGISTRY.dispatch` directly; `call_*` below picks the route with `torch.compiler.is_compiling()`.

Outputs are always fresh, contiguous tensors: torch.library forbids outputs that alias inputs, and the
fake (meta) implementations promise contiguous strides, which must match the real ones.
"""

from __future__ import annotations

import torch

import ascend_backend.ops  # noqa: F401  (importing it registers the implementations dispatched to below)
from ascend_backend.registry import REGISTRY


@torch.library.custom_op("ascend_backend::rms_norm", mutates_args=())
def rms_norm_op(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x: [..., hidden], weight: [hidden] -> [..., hidden]."""
    return REGISTRY.dispatch("rms_norm", x.device, x, weight, eps).contiguous()


@rms_norm_op.register_fake
def _rms_norm_fake(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x.new_empty(x.shape)


@torch.library.custom_op("ascend_backend::add_rms_norm", mutates_args=())
def add_rms_norm_op(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """x, residual: [..., hidden] -> (normed, x + residual), both [..., hidden]."""
    out, summed = REGISTRY.dispatch("add_rms_norm", x.device, x, residual, weight, eps)
    return out.contiguous(), summed.contiguous()


@add_rms_norm_op.register_fake
def _add_rms_norm_fake(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    return x.new_empty(x.shape), x.new_empty(x.shape)


@torch.library.custom_op("ascend_backend::silu_and_mul", mutates_args=())
def silu_and_mul_op(x: torch.Tensor) -> torch.Tensor:
    """x: [..., 2*d] -> [..., d]."""
    return REGISTRY.dispatch("silu_and_mul", x.device, x).contiguous()


@silu_and_mul_op.register_fake
def _silu_and_mul_fake(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


@torch.library.custom_op("ascend_backend::gelu", mutates_args=())
def gelu_op(x: torch.Tensor, approximate: str) -> torch.Tensor:
    """Elementwise GELU; approximate is 'none' (erf) or 'tanh'."""
    op = "gelu_tanh" if approximate == "tanh" else "gelu"
    return REGISTRY.dispatch(op, x.device, x).contiguous()


@gelu_op.register_fake
def _gelu_fake(x: torch.Tensor, approximate: str) -> torch.Tensor:
    return x.new_empty(x.shape)


@torch.library.custom_op("ascend_backend::rotary_embedding", mutates_args=())
def rotary_embedding_op(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """positions: [T]; query: [T, Hq*D]; key: [T, Hk*D] -> rotated copies of both."""
    q, k = REGISTRY.dispatch(
        "rotary_embedding", query.device, positions, query, key, head_size, cos_sin_cache, is_neox
    )
    return q.contiguous(), k.contiguous()


@rotary_embedding_op.register_fake
def _rotary_embedding_fake(positions, query, key, head_size, cos_sin_cache, is_neox):
    return query.new_empty(query.shape), key.new_empty(key.shape)


@torch.library.custom_op("ascend_backend::rotary_embedding_query", mutates_args=())
def rotary_embedding_query_op(
    positions: torch.Tensor, query: torch.Tensor, head_size: int, cos_sin_cache: torch.Tensor, is_neox: bool
) -> torch.Tensor:
    """RoPE on the query alone (layers sharing another layer's KV cache pass key=None)."""
    q, _ = REGISTRY.dispatch(
        "rotary_embedding", query.device, positions, query, None, head_size, cos_sin_cache, is_neox
    )
    return q.contiguous()


@rotary_embedding_query_op.register_fake
def _rotary_embedding_query_fake(positions, query, head_size, cos_sin_cache, is_neox):
    return query.new_empty(query.shape)


# ----------------------------------------------------------------------------- routing helpers
def call_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if torch.compiler.is_compiling():
        return rms_norm_op(x, weight, eps)
    return REGISTRY.dispatch("rms_norm", x.device, x, weight, eps)


def call_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    if torch.compiler.is_compiling():
        return add_rms_norm_op(x, residual, weight, eps)
    return REGISTRY.dispatch("add_rms_norm", x.device, x, residual, weight, eps)


def call_silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    if torch.compiler.is_compiling():
        return silu_and_mul_op(x)
    return REGISTRY.dispatch("silu_and_mul", x.device, x)


def call_gelu(x: torch.Tensor, approximate: str) -> torch.Tensor:
    if torch.compiler.is_compiling():
        return gelu_op(x, approximate)
    return REGISTRY.dispatch("gelu_tanh" if approximate == "tanh" else "gelu", x.device, x)


def call_rotary_embedding(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor | None,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    if torch.compiler.is_compiling():
        if key is None:
            return rotary_embedding_query_op(positions, query, head_size, cos_sin_cache, is_neox), None
        return rotary_embedding_op(positions, query, key, head_size, cos_sin_cache, is_neox)
    return REGISTRY.dispatch(
        "rotary_embedding", query.device, positions, query, key, head_size, cos_sin_cache, is_neox
    )
