"""The one way an NPU implementation gets torch_npu and says when it can run: `npu_op`.

    npu_op("rms_norm", {"npu_rms_norm": _npu_rms_norm}, dtypes=None)

registers `rms_norm`'s NPU implementation (`NpuOp`). Before every call the registry asks its guard why
this call must run native, or None:

1. `refuse(*args)`: what the adapter cannot take whatever the table says (no key to rotate, an odd
   gate width); None where it takes everything;
2. the dtype of the op's device argument (the declared `device` parameter: the activation) against
   `dtypes` (CANN's attention, rotary and quantized-matmul kernels take float16/bfloat16; None: any);
3. the kernel-selection table, `kernels.choose(op, facts(*args))`: a native row sends the call native
   with the row's reason (so does an ATB kernel where NNAL/ATB cannot load);
4. the documented limits of the kernels the chosen recipe calls (`ascend_backend.platform.limits`, read
   from `data/kernel_limits.json`), on the call's `shape(*args)`: a block size, head size, alignment or
   chip outside them sends the call native with the limit and its source as the reason, as vllm-ascend
   keeps its own calls inside them (it forces block size 128 where the prefix encoder runs).

Otherwise the implementation runs the recipe the table chose, handing it the torch_npu module first:
`recipes[choice.recipe](npu, *args)`. This module is the only one that asks the probe for torch_npu
(`ascend_backend.platform.device.torch_npu`), and every `npu_*` / `_npu_*` call in ascend_backend is made on
a recipe's `npu` parameter (tests/unit/ascend_backend/test_import_direction.py holds both by AST).

Each recipe takes `npu` and then exactly the op's declared parameters (checked here, at registration);
`refuse`, `facts` and `shape` take the declared parameters too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import torch

from ascend_backend.platform import device, kernels, limits
from ascend_backend.platform.kernels import CallFacts
from ascend_backend.platform.limits import CallShape
from ascend_backend.registry import REGISTRY, Backend
from ascend_backend.signatures import OpSignature, parameter_names

HALF_DTYPES = (torch.float16, torch.bfloat16)


def typical_call(*_args: object) -> CallFacts:
    """The call facts of ops whose rows depend on none (norms, activations, linears)."""
    return kernels.TYPICAL_CALL


@dataclass(frozen=True)
class NpuOp:
    """An op's NPU implementation: the recipes it can make, and when a call may use them.

    Registered by `npu_op`; the registry calls `supports` before every call and the instance itself for
    the call. `recipes` maps the kernel-selection table's recipe names to functions `(npu, *op_args)`.
    """

    signature: OpSignature
    recipes: Mapping[str, Callable[..., Any]]
    dtypes: tuple[torch.dtype, ...] | None
    facts: Callable[..., CallFacts]
    refuse: Callable[..., str | None] | None
    shape: Callable[..., CallShape] | None = None

    @property
    def op(self) -> str:
        return self.signature.op

    def supports(self, *args: Any) -> str | None:
        """Why this call runs native (the adapter refuses it, its dtype, the table's row, a kernel limit), or None."""
        if self.refuse is not None:
            why = self.refuse(*args)
            if why is not None:
                return why
        if self.dtypes is not None:
            tensor = args[self.signature.device_index]
            if tensor.dtype not in self.dtypes:
                kinds = "/".join(str(d).removeprefix("torch.") for d in self.dtypes)
                return f"{tensor.dtype} {self.signature.device_param} ({self.op}'s NPU kernels take {kinds})"
        choice = kernels.choose(self.op, self.facts(*args))
        if choice.native:
            return choice.reason
        if self.shape is None:
            return None
        chip = kernels.active_context().chip
        return limits.violation(kernels.calls(choice.kernel), self.shape(*args), chip)

    def __call__(self, *args: Any) -> Any:
        recipe = kernels.choose(self.op, self.facts(*args)).recipe
        return self.recipes[recipe](device.torch_npu(), *args)


def npu_op(
    op: str,
    recipes: Mapping[str, Callable[..., Any]],
    *,
    dtypes: tuple[torch.dtype, ...] | None = HALF_DTYPES,
    facts: Callable[..., CallFacts] = typical_call,
    refuse: Callable[..., str | None] | None = None,
    shape: Callable[..., CallShape] | None = None,
) -> NpuOp:
    """Register `op`'s NPU implementation (see the module docstring); returns it.

    The op must be declared first (each adapter module imports the module that declares its ops).
    """
    signature = REGISTRY.signature(op)
    expected = ("npu", *signature.parameters)
    for name, recipe in recipes.items():
        names = parameter_names(recipe)
        if names != expected:
            raise TypeError(f"op {op!r}: recipe {name!r} ({recipe.__qualname__}) takes {names}, not {expected}")
    for helper in (facts, refuse, shape):
        if helper is not None:
            signature.check(helper, f"the NPU guard's {helper.__qualname__}")
    adapter = NpuOp(signature, MappingProxyType(dict(recipes)), dtypes, facts, refuse, shape)
    REGISTRY.register(op, Backend.NPU, supports=adapter.supports)(adapter)
    return adapter


def dtype_name(tensor) -> str:
    """torch.float16 -> 'float16' (the names kernel_limits.json uses)."""
    return str(tensor.dtype).removeprefix("torch.")


__all__ = ["HALF_DTYPES", "NpuOp", "dtype_name", "npu_op", "typical_call"]
