"""A recording stand-in for torch_npu, built from op-plugin's declared schemas.

Each attribute is a function that binds its arguments exactly as the schema declares them (unknown
name, too many positional arguments, a keyword-only argument passed by position, a missing required
argument, an unknown keyword or a value of the wrong kind is a TypeError, as torch's dispatcher would
raise) and records the call. It returns empty tensors of the declared number and plausible shapes only
so the adapter can finish; nothing about their values is ever asserted: these tests check our calls
against the interface, not anybody's arithmetic.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from tests.unit.ascend_backend.npu.schema import Param, Signature


@dataclass(frozen=True)
class Call:
    function: str
    arguments: dict[str, Any]  # every declared parameter that was passed, by name
    signature: Signature


def _kind_ok(param: Param, value: Any) -> bool:
    if value is None:
        return param.optional or (param.has_default and param.type != "Tensor")
    if param.type == "Tensor":
        return isinstance(value, torch.Tensor)
    if param.type in ("int", "SymInt"):
        # torch's schema binding turns a dtype into its ScalarType number for an `int` (op-plugin 26.x declares
        # `int dtype` where 7.x said `ScalarType dtype`, and its own tests still pass torch.qint8 there).
        return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, torch.dtype)
    if param.type == "ScalarType":
        return isinstance(value, torch.dtype)
    if param.type == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if param.type == "bool":
        return isinstance(value, bool)
    if param.type == "str":
        return isinstance(value, str)
    if param.type.endswith("[]") or param.type.endswith("]"):
        return isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    return True


def bind(signature: Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments by name, or a TypeError naming what breaks the schema."""
    name = signature.name
    positional = signature.positional
    if len(args) > len(positional):
        raise TypeError(f"{name}() takes {len(positional)} positional arguments but {len(args)} were given")
    bound = {p.name: value for p, value in zip(positional, args)}
    for key, value in kwargs.items():
        if key not in {p.name for p in signature.params}:
            raise TypeError(f"{name}() got an unexpected keyword argument {key!r}")
        if key in bound:
            raise TypeError(f"{name}() got multiple values for argument {key!r}")
        bound[key] = value
    for param in signature.params:
        if param.name not in bound and not param.has_default and not param.optional:
            raise TypeError(f"{name}() missing required argument {param.name!r}")
        if param.name in bound and not _kind_ok(param, bound[param.name]):
            raise TypeError(f"{name}(): argument {param.name!r} ({param.type}) got {type(bound[param.name]).__name__}")
    return bound


def _like(tensor: torch.Tensor) -> torch.Tensor:
    return torch.empty(tensor.shape, dtype=tensor.dtype, device=tensor.device)


# What each function returns, by shape only (see the module docstring).
RESULTS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "npu_rms_norm": lambda a: (_like(a["self"]), torch.empty(*a["self"].shape[:-1], 1, device=a["self"].device)),
    "npu_add_rms_norm": lambda a: (
        _like(a["x1"]),
        torch.empty(*a["x1"].shape[:-1], 1, device=a["x1"].device),
        _like(a["x1"]),
    ),
    "npu_swiglu": lambda a: torch.empty(
        *a["self"].shape[:-1], a["self"].shape[-1] // 2, dtype=a["self"].dtype, device=a["self"].device
    ),
    "npu_fast_gelu": lambda a: _like(a["self"]),
    "npu_mrope": lambda a: (_like(a["query"]), _like(a["key"])),
    "npu_apply_rotary_pos_emb": lambda a: (_like(a["query"]), _like(a["key"])),
    "npu_fused_infer_attention_score": lambda a: (_like(a["query"]), torch.empty(1, device=a["query"].device)),
    "npu_fusion_attention": lambda a: (_like(a["query"]), None, None, None, 0, 0, 0),
    "npu_quantize": lambda a: torch.empty(a["self"].shape, dtype=torch.int8, device=a["self"].device),
    "npu_dynamic_quant": lambda a: (
        torch.empty(a["input"].shape, dtype=torch.int8, device=a["input"].device),
        torch.empty(a["input"].shape[:-1], dtype=torch.float32, device=a["input"].device),
    ),
    "npu_format_cast": lambda a: _like(a["self"]),
    "npu_add_rms_norm_quant": lambda a: (
        torch.empty(a["x1"].shape, dtype=torch.int8, device=a["x1"].device),
        torch.empty(a["x1"].shape, dtype=torch.int8, device=a["x1"].device),
        _like(a["x1"]),
    ),
    "npu_quant_matmul": lambda a: torch.empty(
        *a["x1"].shape[:-1], a["x2"].shape[-1], dtype=a.get("output_dtype") or torch.int8, device=a["x1"].device
    ),
}


@dataclass
class StandIn:
    """`module` is what the guard hands the adapters (from `ascend_backend.platform.device.torch_npu()`); `calls` what they did."""

    signatures: dict[str, Signature]
    calls: list[Call] = field(default_factory=list)

    @property
    def module(self) -> types.ModuleType:
        module = types.ModuleType("torch_npu_stand_in")
        for name, signature in self.signatures.items():
            setattr(module, name, self._function(signature))
        module.__version__ = "stand-in"
        return module

    def _function(self, signature: Signature) -> Callable[..., Any]:
        def function(*args: Any, **kwargs: Any) -> Any:
            arguments = bind(signature, args, kwargs)
            self.calls.append(Call(signature.name, arguments, signature))
            if signature.returns == "()":
                return None
            return RESULTS[signature.name](arguments)

        function.__name__ = signature.name
        return function
