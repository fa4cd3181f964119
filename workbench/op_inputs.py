"""Inputs for single-op runs: one builder per registry op, seeded and shape-driven.

Shared by the overview notebook's op comparison and the accuracy op suite, so "the same inputs" means
the same thing everywhere. `shape` is (tokens, hidden) for token-wise ops; the builders derive the rest
(weights, positions, head layout) from it. Inputs are made in float32 on the CPU and then cast, so the
low-precision run and the float32 reference see the same values up to rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from ascend_backend.ops import build_cos_sin_cache
from workbench.errors import WorkbenchError


@dataclass(frozen=True)
class OpInputs:
    args: tuple[Any, ...]

    def to(self, device: torch.device | str, dtype: torch.dtype) -> "OpInputs":
        """Floating tensors -> (device, dtype); integer tensors (positions, tables) -> device only."""
        def move(value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                return value.to(device=device, dtype=dtype) if value.is_floating_point() else value.to(device)
            return value
        return OpInputs(tuple(move(a) for a in self.args))


def _norm(shape: tuple[int, ...], g: torch.Generator) -> OpInputs:
    tokens, hidden = shape
    weight = 1.0 + 0.1 * torch.randn(hidden, generator=g)
    return OpInputs((torch.randn(tokens, hidden, generator=g), weight, 1e-6))


def _add_norm(shape: tuple[int, ...], g: torch.Generator) -> OpInputs:
    tokens, hidden = shape
    x, weight, eps = _norm(shape, g).args
    return OpInputs((x, torch.randn(tokens, hidden, generator=g), weight, eps))


def _unary(shape: tuple[int, ...], g: torch.Generator) -> OpInputs:
    return OpInputs((3.0 * torch.randn(*shape, generator=g),))


def _gated(shape: tuple[int, ...], g: torch.Generator) -> OpInputs:
    tokens, hidden = shape
    return OpInputs((2.0 * torch.randn(tokens, 2 * hidden, generator=g),))


def _linear(shape: tuple[int, ...], g: torch.Generator) -> OpInputs:
    tokens, hidden = shape
    out_features = max(hidden // 2, 1)
    weight = torch.randn(out_features, hidden, generator=g) / hidden**0.5
    return OpInputs((torch.randn(tokens, hidden, generator=g), weight, 0.1 * torch.randn(out_features, generator=g)))


def _rotary(shape: tuple[int, ...], g: torch.Generator) -> OpInputs:
    tokens, hidden = shape
    head_size = 64 if hidden % 64 == 0 else hidden
    positions = torch.randint(0, 4096, (tokens,), generator=g)
    query = torch.randn(tokens, hidden, generator=g)
    key = torch.randn(tokens, max(hidden // 2 // head_size, 1) * head_size, generator=g)
    return OpInputs((positions, query, key, head_size, build_cos_sin_cache(head_size, 4096), True))


BUILDERS: dict[str, Callable[[tuple[int, ...], torch.Generator], OpInputs]] = {
    "rms_norm": _norm,
    "add_rms_norm": _add_norm,
    "silu_and_mul": _gated,
    "gelu": _unary,
    "gelu_tanh": _unary,
    "linear": _linear,
    "rotary_embedding": _rotary,
}


def make_inputs(op: str, shape: tuple[int, ...], seed: int = 0) -> OpInputs:
    """Float32 CPU inputs for `op` at `shape`; unknown ops name the ones that have builders."""
    builder = BUILDERS.get(op)
    if builder is None:
        raise WorkbenchError(f"no input builder for op {op!r}; ops with builders: {', '.join(sorted(BUILDERS))}")
    if len(shape) != 2 or min(shape) < 1:
        raise WorkbenchError(f"shape {tuple(shape)} for op {op!r}: expected (tokens, hidden) with both >= 1")
    return builder(tuple(int(s) for s in shape), torch.Generator().manual_seed(seed))
