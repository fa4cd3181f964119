"""Inputs for single-op runs: one builder per registry op, seeded and shape-driven.

Shared by the overview notebook's op comparison and the accuracy op suite, so "the same inputs" means
the same thing everywhere. A case is a mapping of named sizes: `{tokens, hidden}` for token-wise ops
(the builders derive weights, positions and head layout from it), and the attention layout
(`num_seqs`, `num_heads`, `num_kv_heads`, `head_size`, `context_len`, `block_size`, ...) for attention ops. Inputs are made in float32 on the CPU and then cast, so the
low-precision run and the float32 reference see the same values up to rounding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ascend_backend.ops import build_cos_sin_cache
from workbench.errors import WorkbenchError


@dataclass(frozen=True)
class OpInputs:
    args: tuple[Any, ...]

    def to(self, device: torch.device | str, dtype: torch.dtype) -> OpInputs:
        """Floating tensors -> (device, dtype); integer tensors (positions, tables) -> device only."""
        def move(value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                return value.to(device=device, dtype=dtype) if value.is_floating_point() else value.to(device)
            return value
        return OpInputs(tuple(move(a) for a in self.args))


Params = Mapping[str, int]


def _tokens_hidden(p: Params) -> tuple[int, int]:
    return int(p["tokens"]), int(p["hidden"])


def _norm(p: Params, g: torch.Generator) -> OpInputs:
    tokens, hidden = _tokens_hidden(p)
    weight = 1.0 + 0.1 * torch.randn(hidden, generator=g)
    return OpInputs((torch.randn(tokens, hidden, generator=g), weight, 1e-6))


def _add_norm(p: Params, g: torch.Generator) -> OpInputs:
    tokens, hidden = _tokens_hidden(p)
    x, weight, eps = _norm(p, g).args
    return OpInputs((x, torch.randn(tokens, hidden, generator=g), weight, eps))


def _unary(p: Params, g: torch.Generator) -> OpInputs:
    return OpInputs((3.0 * torch.randn(*_tokens_hidden(p), generator=g),))


def _gated(p: Params, g: torch.Generator) -> OpInputs:
    tokens, hidden = _tokens_hidden(p)
    return OpInputs((2.0 * torch.randn(tokens, 2 * hidden, generator=g),))


def _linear(p: Params, g: torch.Generator) -> OpInputs:
    tokens, hidden = _tokens_hidden(p)
    out_features = max(hidden // 2, 1)
    weight = torch.randn(out_features, hidden, generator=g) / hidden**0.5
    return OpInputs((torch.randn(tokens, hidden, generator=g), weight, 0.1 * torch.randn(out_features, generator=g)))


def _rotary(p: Params, g: torch.Generator) -> OpInputs:
    tokens, hidden = _tokens_hidden(p)
    head_size = 64 if hidden % 64 == 0 else hidden
    positions = torch.randint(0, 4096, (tokens,), generator=g)
    query = torch.randn(tokens, hidden, generator=g)
    key = torch.randn(tokens, max(hidden // 2 // head_size, 1) * head_size, generator=g)
    return OpInputs((positions, query, key, head_size, build_cos_sin_cache(head_size, 4096), True))


TOKEN_PARAMS = ("tokens", "hidden")

# op -> (builder, the size names a case must give)
BUILDERS: dict[str, tuple[Callable[[Params, torch.Generator], OpInputs], tuple[str, ...]]] = {
    "rms_norm": (_norm, TOKEN_PARAMS),
    "add_rms_norm": (_add_norm, TOKEN_PARAMS),
    "silu_and_mul": (_gated, TOKEN_PARAMS),
    "gelu": (_unary, TOKEN_PARAMS),
    "gelu_tanh": (_unary, TOKEN_PARAMS),
    "linear": (_linear, TOKEN_PARAMS),
    "rotary_embedding": (_rotary, TOKEN_PARAMS),
}


def as_params(op: str, case: Params | Sequence[int]) -> dict[str, int]:
    """A case as a dict; a 2-sequence is read as (tokens, hidden) for token-wise ops."""
    if isinstance(case, Mapping):
        return {str(k): int(v) for k, v in case.items()}
    values = [int(v) for v in case]
    if len(values) != 2:
        raise WorkbenchError(f"shape {values} for op {op!r}: expected (tokens, hidden) or a mapping of sizes")
    return dict(zip(TOKEN_PARAMS, values))


def make_inputs(op: str, case: Params | Sequence[int], seed: int = 0) -> OpInputs:
    """Float32 CPU inputs for `op`; unknown ops and missing or non-positive sizes get a clear error."""
    if op not in BUILDERS:
        raise WorkbenchError(f"no input builder for op {op!r}; ops with builders: {', '.join(sorted(BUILDERS))}")
    builder, required = BUILDERS[op]
    params = as_params(op, case)
    missing = [name for name in required if name not in params]
    if missing:
        raise WorkbenchError(f"op {op!r} case {params}: missing sizes {missing} (needs {list(required)})")
    bad = {k: v for k, v in params.items() if v < 1}
    if bad:
        raise WorkbenchError(f"op {op!r} case {params}: sizes must be >= 1, got {bad}")
    return builder(params, torch.Generator().manual_seed(seed))
