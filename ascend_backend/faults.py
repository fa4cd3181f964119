"""Fault kinds and how they corrupt an op's output.

Fault injection exists for the debugging tools: to prove that a layer comparison finds the layer that
went wrong, or that a feature bisect catches "runs but answers wrong", something must go wrong on
purpose, in exactly one op, one call or one module. The registry decides *when* a fault fires; this
module only says *what* it does to a tensor.

Spec strings (env var ASCEND_BACKEND_FAULT, CLI flags) look like
    rms_norm:nan
    rms_norm:scale:factor=1.01:call=3
    silu_and_mul:noise:std=0.05:module=model.layers.1.*
    silu_and_mul:delay:ms=2
and several specs are joined with ';'.

A `delay` fault changes no number: it makes the op slower, a planted cost for the performance twin
(docs/METHOD.md §19) to find. The wait runs inside a torch operator named `planted::<op>` (for example
`planted::silu_and_mul`), so a profiler sees it as that op's own time — the way a slow kernel shows on a
device — and not as a gap between ops, which is where an unnamed `time.sleep` would land. On a CPU
engine the wait holds the op's thread just as a slow kernel would.
"""

from __future__ import annotations

import enum
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

import torch


class FaultKind(str, enum.Enum):
    NAN = "nan"  # every element NaN
    INF = "inf"  # every element +inf
    ZERO = "zero"  # every element 0
    SCALE = "scale"  # output * factor (a 1% gain error: factor=1.01)
    NOISE = "noise"  # output + N(0, (std * rms(output))^2), seeded
    RAISE = "raise"  # the op raises InjectedFault: a kernel that errors out (crashes an engine)
    DELAY = "delay"  # the op takes `ms` milliseconds longer; its output is untouched (a planted cost)


class InjectedFault(RuntimeError):
    """Raised by an op under a `raise` fault, standing in for a kernel that fails outright."""


@dataclass(frozen=True)
class FaultSpec:
    """One fault: which op, what corruption, and (optionally) which call / module it hits.

    call:   1-based index among the op's calls that match `module`, counted from when the fault was
            armed; None = every matching call.
    module: fnmatch pattern on the innermost named module running the op (see
            `registry.module_scope` / `registry.attach_module_names`); None = anywhere.
    """

    op: str
    kind: FaultKind
    call: int | None = None
    module: str | None = None
    factor: float = 1.01
    std: float = 0.01
    seed: int = 0
    ms: float = 1.0  # delay: milliseconds added to each call it hits

    def __post_init__(self) -> None:
        if self.call is not None and self.call < 1:
            raise ValueError(f"fault call index must be >= 1 (1 = first call), got {self.call}")
        if self.kind is FaultKind.DELAY and not 0.0 < self.ms <= MAX_DELAY_MS:
            raise ValueError(f"delay fault on {self.op!r}: ms={self.ms:g} must be above 0 and at most {MAX_DELAY_MS:g}")


MAX_DELAY_MS = 10_000.0  # ten seconds a call: longer is a hang, not a slow op
PLANTED_NAMESPACE = "planted"  # the torch operators that carry delays: `planted::<op>`
_NUMERIC = {"call": int, "factor": float, "std": float, "seed": int, "ms": float}


def parse_fault_specs(text: str) -> tuple[FaultSpec, ...]:
    """'rms_norm:scale:factor=1.01:call=3;silu_and_mul:nan' -> two FaultSpecs (clear errors otherwise)."""
    specs = []
    for chunk in filter(None, (c.strip() for c in text.split(";"))):
        parts = chunk.split(":")
        if len(parts) < 2:
            raise ValueError(f"fault spec {chunk!r}: expected 'op:kind[:key=value...]', e.g. 'rms_norm:nan'")
        op, kind_text, *options = parts
        try:
            kind = FaultKind(kind_text.strip().lower())
        except ValueError:
            raise ValueError(
                f"fault spec {chunk!r}: unknown kind {kind_text!r}; use one of {[k.value for k in FaultKind]}"
            ) from None
        spec = FaultSpec(op.strip(), kind)
        allowed = {f.name for f in fields(FaultSpec)} - {"op", "kind"}
        for option in options:
            key, sep, value = option.partition("=")
            key = key.strip()
            if not sep or key not in allowed:
                raise ValueError(f"fault spec {chunk!r}: bad option {option!r}; options are {sorted(allowed)}")
            spec = replace(spec, **{key: _NUMERIC.get(key, str)(value.strip())})
        specs.append(spec)
    return tuple(specs)


def corrupt(output: torch.Tensor, spec: FaultSpec) -> torch.Tensor:
    """A corrupted copy of `output` (never in place: the caller's tensors stay as they were).

    A `raise` fault raises InjectedFault instead of returning.
    """
    if spec.kind is FaultKind.RAISE:
        raise InjectedFault(f"injected fault: op {spec.op!r} raised (ASCEND_BACKEND_FAULT / registry.inject)")
    if spec.kind is FaultKind.DELAY:
        delay_operator(spec.op)(output, spec.ms)
        return output
    if spec.kind is FaultKind.NAN:
        return torch.full_like(output, float("nan"))
    if spec.kind is FaultKind.INF:
        return torch.full_like(output, float("inf"))
    if spec.kind is FaultKind.ZERO:
        return torch.zeros_like(output)
    if spec.kind is FaultKind.SCALE:
        return output * spec.factor
    generator = torch.Generator(device="cpu").manual_seed(spec.seed)
    rms = output.float().pow(2).mean().sqrt()
    noise = torch.randn(output.shape, generator=generator, dtype=torch.float32).to(output.device)
    return (output.float() + noise * (spec.std * rms)).to(output.dtype)


def delay_operator(op: str) -> Callable[[torch.Tensor, float], None]:
    """`torch.ops.planted.<op>(tensor, ms)`: waits `ms` milliseconds (defined on first use)."""
    _delay_library(op)
    return getattr(getattr(torch.ops, PLANTED_NAMESPACE), op)


@functools.cache
def _delay_library(op: str) -> torch.library.Library:
    """Define `planted::<op>` once per process; the cache keeps the library, and so the definition, alive.

    The tensor argument gives the dispatcher a device to dispatch on (the op is composite: any device).
    """
    library = torch.library.Library(PLANTED_NAMESPACE, "FRAGMENT")
    library.define(f"{op}(Tensor anchor, float ms) -> ()")

    def wait(anchor: torch.Tensor, ms: float) -> None:
        time.sleep(ms / 1000.0)

    library.impl(op, wait, "CompositeExplicitAutograd")
    return library
