"""The self-test's one report: what the machine is, what ran on the NPU and how it compared, what needs hardware.

One JSON document (kind "selftest") a user attaches to a bug: the probe's verdict on torch_npu (with the
autoload failure, NNAL/ATB), the kernel-selection context (release, chip, CANN, how each was found), the
documented limits loaded, per kernel recipe the status (ran / native with the guard's reason / error with
CANN's code / skipped with the reason) and per dtype the msprobe numbers against float32 and the time,
the native paths checked on the CPU, and the served request through the vLLM plugin.
"""

from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from workbench.results.envelope import DocumentKind, write_result
from workbench.selftest.plan import KernelItem
from workbench.selftest.run import DtypeRun

SELFTEST_KIND = DocumentKind("selftest", 1)


class KernelStatus(str, enum.Enum):
    """What became of one recipe: its kernel ran, the guard kept it native, it raised, or it was not tried."""

    RAN = "ran"
    NATIVE = "native"
    ERROR = "error"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class KernelRun:
    item: KernelItem
    status: KernelStatus
    reason: str  # why native or skipped; the first error otherwise
    runs: tuple[DtypeRun, ...] = ()

    @classmethod
    def of(cls, item: KernelItem, runs: tuple[DtypeRun, ...], expected: str = "npu") -> KernelRun:
        """The status of `runs` of a recipe whose kernel should run on `expected` (npu; native for the CPU check)."""
        errors = [r for r in runs if r.error]
        if errors:
            return cls(item, KernelStatus.ERROR, errors[0].error, runs)
        wrong = [r for r in runs if r.verdict == "error"]
        if wrong:
            first = wrong[0]
            why = f"{first.dtype}: verdict error against float32 (cosine {first.cosine:.6f}, max abs err {first.max_abs_err:.3g})"
            return cls(item, KernelStatus.ERROR, why, runs)
        if expected == "native":
            return cls(item, KernelStatus.RAN, "", runs)
        if any("npu" not in r.backend.split(",") for r in runs):
            native = next(r for r in runs if "npu" not in r.backend.split(","))
            return cls(item, KernelStatus.NATIVE, native.reason or f"ran on {native.backend or 'no backend'}", runs)
        return cls(item, KernelStatus.RAN, "", runs)

    def to_dict(self) -> dict[str, Any]:
        item = self.item
        return {
            "op": item.op,
            "recipe": item.recipe,
            "kernel": item.kernel,
            "chip": item.chip.value,
            "other_chip": item.other_chip,
            "row": item.row,
            "citation": item.citation,
            "status": self.status.value,
            "reason": self.reason,
            "runs": [_finite(asdict(r)) for r in self.runs],
        }


@dataclass(frozen=True)
class ServeRun:
    """The backend inside vLLM: the plugin's registration line from the server log, and one served request."""

    status: KernelStatus
    reason: str
    url: str = ""
    plugin_line: str = ""
    checks: tuple[tuple[str, str, str], ...] = ()  # (check, outcome, detail) of the smoke request

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status.value, "checks": [list(c) for c in self.checks]}


@dataclass(frozen=True)
class SelftestReport:
    machine: dict[str, Any]  # the probe's facts: torch_npu status, autoload failure, ATB, device
    context: str  # the selection context, described
    limits: dict[str, int]  # kernels and limits in data/kernel_limits.json
    kernels: tuple[KernelRun, ...]
    native: tuple[KernelRun, ...]  # each op's native path on the CPU (float16/bfloat16 vs float32)
    serve: ServeRun
    needs_hardware: tuple[str, ...] = field(default_factory=tuple)

    @property
    def failed(self) -> bool:
        runs = (*self.kernels, *self.native)
        return any(r.status is KernelStatus.ERROR for r in runs) or self.serve.status is KernelStatus.ERROR

    def counts(self) -> dict[str, int]:
        return {s.value: sum(r.status is s for r in self.kernels) for s in KernelStatus}

    def to_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "context": self.context,
            "limits": self.limits,
            "counts": self.counts(),
            "kernels": [r.to_dict() for r in self.kernels],
            "native": [r.to_dict() for r in self.native],
            "serve": self.serve.to_dict(),
            "needs_hardware": list(self.needs_hardware),
        }

    def write(self, path: Path, provenance: dict[str, Any]) -> Path:
        return write_result(path, self.to_dict(), provenance, SELFTEST_KIND)

    def text(self) -> str:
        """The summary a terminal shows: the machine, the counts, one line per kernel that did not run clean."""
        status = self.machine.get("npu_status", {})
        lines = [
            f"torch_npu: {status.get('kind')} ({status.get('detail')})"
            + (f"; fix: {status['fix']}" if status.get("fix") else ""),
            f"selection: {self.context}",
            f"limits: {self.limits['limits']} documented limits of {self.limits['kernels']} kernels",
            "kernels: " + ", ".join(f"{n} {s}" for s, n in self.counts().items() if n),
        ]
        skipped: dict[str, list[str]] = {}
        for run in self.kernels:
            if run.status is KernelStatus.SKIPPED:
                skipped.setdefault(run.reason, []).append(run.item.key)
            elif run.status is not KernelStatus.RAN:
                lines.append(f"  {run.status.value:7} {run.item.key}: {run.reason[:160]}")
        for reason, keys in skipped.items():
            lines.append(f"  skipped ({reason}): {', '.join(keys)}")
        bad_native = [r for r in self.native if r.status is KernelStatus.ERROR]
        lines.append(
            f"native paths on the CPU: {len(self.native) - len(bad_native)} of {len(self.native)} within tolerance"
        )
        lines += [f"  error   {r.item.op}: {r.reason[:160]}" for r in bad_native]
        lines.append(
            f"served request: {self.serve.status.value}" + (f" ({self.serve.reason})" if self.serve.reason else "")
        )
        lines += [f"needs hardware: {text}" for text in self.needs_hardware]
        return "\n".join(lines)


def _finite(row: dict[str, Any]) -> dict[str, Any]:
    """NaN -> None, so the JSON stays standard (a kernel that raised has no numbers)."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}


def read_selftest(path: Path | str) -> dict[str, Any]:
    """A selftest report as written (refuses another kind or a newer layout with the fix)."""
    return SELFTEST_KIND.read(path)


__all__ = ["SELFTEST_KIND", "KernelRun", "KernelStatus", "SelftestReport", "ServeRun", "read_selftest"]
