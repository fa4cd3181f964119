"""The backend's ops as opaque torch operators, so compiled vLLM still dispatches per call.

Why: in vLLM's compiled mode the model is traced once by dynamo. A plain Python call to
`REGISTRY.dispatch` inside a layer's forward would run only at trace time: the graph would bake in
whichever implementation was chosen then, and the registry's call counters and fault injection would
never see a real call. Defining each op as a torch operator (`torch.ops.ascend_backend.*`) makes it a
single opaque node in the graph whose Python body (`REGISTRY.dispatch`) runs on every execution.

Why `torch.library.define` + `impl` rather than the `torch.library.custom_op` decorator: the decorator
wraps every call in Python plumbing for autograd and fake tensors that costs about 10 µs here, against
about 2 µs for a plain operator; a compiled engine pays it for several ops in every layer of every step.
These ops serve inference only: no autograd formula is registered.

Eager callers do not need the operator and use `REGISTRY.dispatch` directly; `call_*` below picks the
route with `torch.compiler.is_compiling()`.

Outputs are always fresh, contiguous tensors: the schemas declare no aliasing and no mutation, and the
fake (meta) implementations promise contiguous strides, which must match the real ones.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

import ascend_backend.ops  # noqa: F401  (importing it registers the implementations dispatched to below)
from ascend_backend.registry import REGISTRY

NAMESPACE = "ascend_backend"
_LIB = torch.library.Library(NAMESPACE, "FRAGMENT")  # kept alive for the process: it owns the definitions


def opaque_op(name: str, fake: Callable[..., object]) -> Callable[[Callable[..., object]], Callable[..., object]]:
    """Define `torch.ops.ascend_backend.<name>` from a typed function (schema inferred from its hints).

    The body runs for every device (CompositeExplicitAutograd); `fake` gives output shapes to the tracer.
    Returns the operator, so the decorated name calls it.
    """

    def decorator(fn: Callable[..., object]) -> Callable[..., object]:
        _LIB.define(name + torch.library.infer_schema(fn, mutates_args=()))
        _LIB.impl(name, fn, "CompositeExplicitAutograd")
        torch.library.register_fake(f"{NAMESPACE}::{name}", fake, lib=_LIB)
        return getattr(getattr(torch.ops, NAMESPACE), name)

    return decorator


def _same_shape(x: torch.Tensor, *_: object) -> torch.Tensor:
    return x.new_empty(x.shape)


def _two_like(x: torch.Tensor, *_: object) -> tuple[torch.Tensor, torch.Tensor]:
    return x.new_empty(x.shape), x.new_empty(x.shape)


def _half_last(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


def _rotated_pair(positions, query, key, *_: object) -> tuple[torch.Tensor, torch.Tensor]:
    return query.new_empty(query.shape), key.new_empty(key.shape)


def _rotated_query(positions, query, *_: object) -> torch.Tensor:
    return query.new_empty(query.shape)


@opaque_op("rms_norm", _same_shape)
def rms_norm_op(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x: [..., hidden], weight: [hidden] -> [..., hidden]."""
    return REGISTRY.dispatch("rms_norm", x.device, x, weight, eps).contiguous()


@opaque_op("add_rms_norm", _two_like)
def add_rms_norm_op(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """x, residual: [..., hidden] -> (normed, x + residual), both [..., hidden]."""
    out, summed = REGISTRY.dispatch("add_rms_norm", x.device, x, residual, weight, eps)
    return out.contiguous(), summed.contiguous()


@opaque_op("silu_and_mul", _half_last)
def silu_and_mul_op(x: torch.Tensor) -> torch.Tensor:
    """x: [..., 2*d] -> [..., d]."""
    return REGISTRY.dispatch("silu_and_mul", x.device, x).contiguous()


@opaque_op("gelu", _same_shape)
def gelu_op(x: torch.Tensor, approximate: str) -> torch.Tensor:
    """Elementwise GELU; approximate is 'none' (erf) or 'tanh'."""
    op = "gelu_tanh" if approximate == "tanh" else "gelu"
    return REGISTRY.dispatch(op, x.device, x).contiguous()


@opaque_op("rotary_embedding", _rotated_pair)
def rotary_embedding_op(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """positions: [T]; query: [T, Hq*D]; key: [T, Hk*D] -> rotated copies of both."""
    q, k = REGISTRY.dispatch("rotary_embedding", query.device, positions, query, key, head_size, cos_sin_cache, is_neox)
    return q.contiguous(), k.contiguous()


@opaque_op("rotary_embedding_query", _rotated_query)
def rotary_embedding_query_op(
    positions: torch.Tensor, query: torch.Tensor, head_size: int, cos_sin_cache: torch.Tensor, is_neox: bool
) -> torch.Tensor:
    """RoPE on the query alone (layers sharing another layer's KV cache pass key=None)."""
    q, _ = REGISTRY.dispatch(
        "rotary_embedding", query.device, positions, query, None, head_size, cos_sin_cache, is_neox
    )
    return q.contiguous()


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
    return REGISTRY.dispatch("rotary_embedding", query.device, positions, query, key, head_size, cos_sin_cache, is_neox)
