"""An op's one signature: the typed, documented function that declares it, and what is derived from it.

Each registry op is declared once, as a function with typed parameters (shape comments beside them), a
docstring and no body:

    @REGISTRY.declare(device="query")
    def paged_decode_attention(
        query: torch.Tensor,  # [num_seqs, num_heads, head_size]
        ...
        scale: float,
    ) -> torch.Tensor:  # [num_seqs, num_heads, head_size]
        ...  # in the source: the op's docstring, and no statement

Derived from it, never written again: the op's public function (it dispatches on the device of the
`device` parameter, the first one by default, and completes the declared defaults, so every
implementation receives every argument positionally and states no defaults of its own); the parameter
names every implementation must take, in order (checked when either side is registered, whichever
comes first); the torch operator schemas of the vLLM plugin (`torch.library.infer_schema` reads the
annotations); the op's doc.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class OpSignature:
    """`declaration` is the typed function; `parameters` its names in order; `device_param` picks the route."""

    op: str
    declaration: Callable[..., Any]
    parameters: tuple[str, ...]
    device_param: str

    @classmethod
    def of(cls, op: str, declaration: Callable[..., Any], device: str | None = None) -> OpSignature:
        signature = inspect.signature(declaration)
        loose = [p.name for p in signature.parameters.values() if p.kind is not p.POSITIONAL_OR_KEYWORD]
        if loose:
            raise TypeError(
                f"op {op!r}: parameters {loose} are not plain positional-or-keyword ones; an op's arguments are "
                "handed to every implementation positionally"
            )
        parameters = tuple(signature.parameters)
        device_param = device or parameters[0]
        if device_param not in parameters:
            raise TypeError(f"op {op!r}: device={device_param!r} is not one of its parameters {list(parameters)}")
        return cls(op, declaration, parameters, device_param)

    @property
    def device_index(self) -> int:
        return self.parameters.index(self.device_param)

    @property
    def signature(self) -> inspect.Signature:
        return inspect.signature(self.declaration)

    @property
    def doc(self) -> str:
        """The docstring's first paragraph, on one line."""
        text = inspect.getdoc(self.declaration) or ""
        return " ".join(text.split("\n\n", 1)[0].split())

    @property
    def where(self) -> str:
        """'ascend_backend/ops/norm.py:27' for messages."""
        code = self.declaration.__code__
        return f"{code.co_filename}:{code.co_firstlineno}"

    def check(self, implementation: Callable[..., Any], what: str) -> None:
        """Raise TypeError unless `implementation` takes exactly the declared parameters, in order.

        An implementation taking only `*args` (one built from other checked parts) passes.
        """
        names = parameter_names(implementation)
        if names is not None and names != self.parameters:
            raise TypeError(
                f"{what} of op {self.op!r} takes ({', '.join(names)}); the op is declared at {self.where} "
                f"with ({', '.join(self.parameters)})"
            )

    def public_function(self, dispatch: Callable[..., Any]) -> Callable[..., Any]:
        """The op's function: complete the declared defaults, then `dispatch(op, device, *arguments)`."""
        op, index, count = self.op, self.device_index, len(self.parameters)
        bind = self.signature.bind

        def call(*args: Any, **kwargs: Any) -> Any:
            if kwargs or len(args) != count:  # the slow path only when a default or a keyword is involved
                bound = bind(*args, **kwargs)
                bound.apply_defaults()
                args = bound.args
            return dispatch(op, args[index].device, *args)

        return functools.update_wrapper(call, self.declaration)


def parameter_names(fn: Callable[..., Any]) -> tuple[str, ...] | None:
    """The positional parameter names of `fn`, or None when it takes `*args` (any arguments)."""
    parameters = inspect.signature(fn).parameters.values()
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return None
    return tuple(p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


__all__ = ["OpSignature", "parameter_names"]
