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

Each operator's schema is inferred from the op's one declaration (`ascend_backend.signatures`): no
signature is written here. Eager callers do not need the operator and dispatch directly; `call_*`
below picks the route with `torch.compiler.is_compiling()`.

Outputs are always fresh, contiguous tensors: the schemas declare no aliasing and no mutation, and the
fake (meta) implementations promise contiguous strides, which must match the real ones.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

import ascend_backend.ops  # noqa: F401  (declares the ops whose signatures the operators below take)
from ascend_backend.registry import REGISTRY

NAMESPACE = "ascend_backend"
_LIB = torch.library.Library(NAMESPACE, "FRAGMENT")  # kept alive for the process: it owns the definitions


def opaque_op(
    op: str,
    fake: Callable[..., object],
    *,
    name: str | None = None,
    prototype: Callable[..., Any] | None = None,
    body: Callable[..., Any] | None = None,
) -> Callable[..., Any]:
    """Define `torch.ops.ascend_backend.<name>` (default: the op's name) for registry op `op`.

    The schema is inferred from the op's declaration (or from `prototype`, a variant of it, with `body`
    mapping its arguments onto the op's); the body dispatches every call through the registry and returns
    contiguous outputs; `fake` gives output shapes to the tracer. Returns the operator.
    """
    name = name or op
    index = REGISTRY.signature(op).device_index

    def dispatched(*args: Any) -> Any:
        return _contiguous(REGISTRY.dispatch(op, args[index].device, *args))

    schema = torch.library.infer_schema(_required(prototype or REGISTRY.signature(op).declaration), mutates_args=())
    _LIB.define(name + schema)
    _LIB.impl(name, body or dispatched, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::{name}", fake, lib=_LIB)
    return getattr(getattr(torch.ops, NAMESPACE), name)


def routed(op: str, operator: Callable[..., Any]) -> Callable[..., Any]:
    """The op for a layer's forward: the opaque operator under torch.compile, plain dispatch in eager mode."""
    index = REGISTRY.signature(op).device_index

    def call(*args: Any) -> Any:
        if torch.compiler.is_compiling():
            return operator(*args)
        return REGISTRY.dispatch(op, args[index].device, *args)

    return call


def _contiguous(out: Any) -> Any:
    return tuple(t.contiguous() for t in out) if isinstance(out, tuple) else out.contiguous()


def _required(prototype: Callable[..., Any]) -> Callable[..., Any]:
    """`prototype` with every parameter required: a Python kernel receives no argument the caller left at its
    schema default (the dispatcher drops trailing defaults), and the registry's implementations take every
    argument, so the operators have no defaults (their callers, `call_*` below, pass every argument)."""
    declared = inspect.signature(prototype)
    parameters = [p.replace(default=inspect.Parameter.empty) for p in declared.parameters.values()]
    return _with_signature(declared.replace(parameters=parameters))


def _with_signature(signature: inspect.Signature) -> Callable[..., Any]:
    def prototype(*args: Any) -> Any:
        raise NotImplementedError("a schema prototype; never called")

    prototype.__signature__ = signature  # type: ignore[attr-defined]
    return prototype


def _rotary_prototype(*, with_key: bool) -> Callable[..., Any]:
    """rotary_embedding's declaration as a torch operator takes it: torch operators return no optional tensor,
    so a call with a key is one operator (key required, both returned) and a call without one another
    (query alone; layers that share another layer's KV cache pass key=None)."""
    declared = REGISTRY.signature("rotary_embedding").signature
    parameters = [
        p.replace(annotation=torch.Tensor) if p.name == "key" else p
        for p in declared.parameters.values()
        if with_key or p.name != "key"
    ]
    returns = tuple[torch.Tensor, torch.Tensor] if with_key else torch.Tensor
    return _with_signature(declared.replace(parameters=parameters, return_annotation=returns))


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


rms_norm_op = opaque_op("rms_norm", _same_shape)
add_rms_norm_op = opaque_op("add_rms_norm", _two_like)
silu_and_mul_op = opaque_op("silu_and_mul", _half_last)
gelu_op = opaque_op("gelu", _same_shape)
gelu_tanh_op = opaque_op("gelu_tanh", _same_shape)
rotary_embedding_op = opaque_op("rotary_embedding", _rotated_pair, prototype=_rotary_prototype(with_key=True))


def _rotate_query(positions, query, head_size, cos_sin_cache, is_neox):
    q, _ = REGISTRY.dispatch(
        "rotary_embedding", query.device, positions, query, None, head_size, cos_sin_cache, is_neox
    )
    return q.contiguous()


rotary_embedding_query_op = opaque_op(
    "rotary_embedding",
    _rotated_query,
    name="rotary_embedding_query",
    prototype=_rotary_prototype(with_key=False),
    body=_rotate_query,
)

# ----------------------------------------------------------------------------- what the layers call
call_rms_norm = routed("rms_norm", rms_norm_op)
call_add_rms_norm = routed("add_rms_norm", add_rms_norm_op)
call_silu_and_mul = routed("silu_and_mul", silu_and_mul_op)
call_gelu = routed("gelu", gelu_op)
call_gelu_tanh = routed("gelu_tanh", gelu_tanh_op)


def call_rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox):
    """rotary_embedding's arguments; under torch.compile one of its two operators, by whether `key` is None."""
    if torch.compiler.is_compiling():
        if key is None:
            return rotary_embedding_query_op(positions, query, head_size, cos_sin_cache, is_neox), None
        return rotary_embedding_op(positions, query, key, head_size, cos_sin_cache, is_neox)
    return REGISTRY.dispatch("rotary_embedding", query.device, positions, query, key, head_size, cos_sin_cache, is_neox)
