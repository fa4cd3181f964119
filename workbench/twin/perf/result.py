"""A finished performance twin: the verdict, the tables behind it, and the `perf-twin` document it is saved as."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.errors import WorkbenchError
from workbench.profiling.buckets import Bucket
from workbench.profiling.idle_causes import CauseTotal
from workbench.results.envelope import DocumentKind, write_result
from workbench.stack.provenance import provenance
from workbench.twin.perf.attribution import Attribution, Split
from workbench.twin.perf.kernels import KernelChange, ModuleChange
from workbench.twin.perf.request import PerfTwinRequest
from workbench.twin.perf.windows import WindowRecord

# version 2: `workload` is the load's own `to_dict()` — a trace load stores `trace` (path, requests, digest,
# classes) in place of `input_lens` / `output_len`; version 1 documents (synthetic loads only) read the same
PERF_TWIN_KIND = DocumentKind("perf-twin", 2)
RESULT_FILE = "perf-twin.json"


@dataclass(frozen=True)
class PerfTwinResult:
    """The same load on sides A and B: where B's extra (or saved) time went."""

    directory: Path
    request: PerfTwinRequest
    windows: tuple[WindowRecord, ...]
    attribution: Attribution
    kernels: tuple[KernelChange, ...]  # every kernel, largest change per step first
    notable_kernels: tuple[KernelChange, ...]  # the changed ones worth naming (policy kernel_share)
    modules: tuple[ModuleChange, ...]
    idle: dict[str, tuple[CauseTotal, ...]]  # side -> per rank and cause
    slow_ranks: dict[str, str]  # side -> 'rank N: host|device (...)' when a side has a slow rank
    profiler_cost: dict[str, float | None]  # side -> step time inside the profiler's window, on / off, minus 1
    export_cost: dict[str, float | None]  # side -> the profiled load's TPOT over the unprofiled load's, minus 1
    notes: tuple[str, ...]
    wall_s: float

    @property
    def differs(self) -> bool:
        return self.attribution.differs

    def classes_table(self) -> pd.DataFrame:
        """ΔTTFT and ΔTPOT per request class with their family-wise intervals (ms)."""
        return pd.DataFrame([c.row() for c in self.attribution.classes])

    def buckets_table(self) -> pd.DataFrame:
        """ΔTPOT and ΔTTFT over every request, split into buckets that add up (ms)."""
        return pd.DataFrame(self.attribution.tpot.rows() + self.attribution.ttft.rows())

    def kernels_table(self, top: int = 15, changed_only: bool = True) -> pd.DataFrame:
        rows = [k.row() for k in self.kernels if not changed_only or k.status != "unchanged"]
        return pd.DataFrame(rows[:top])

    def modules_table(self) -> pd.DataFrame:
        return pd.DataFrame([m.row() for m in self.modules])

    def idle_table(self) -> pd.DataFrame:
        rows = [{"side": side, **c.row()} for side, causes in self.idle.items() for c in causes]
        return pd.DataFrame(rows)

    def windows_table(self) -> pd.DataFrame:
        rows = []
        for w in self.windows:
            buckets = w.step_buckets()
            rows.append(
                {
                    "window": w.name,
                    "requests": sum(t.success for t in w.requests),
                    "failed": sum(not t.success for t in w.requests),
                    "tpot_ms": 1000 * _mean([t.tpot_s for t in w.requests if t.success]),
                    "ttft_ms": 1000 * _mean([t.ttft_s for t in w.requests if t.success]),
                    "profiled_steps": buckets.steps if buckets else 0,
                    "step_ms": buckets.total_us / 1000 if buckets else None,
                    "others_cpu": w.others_cpu,
                    "attempts": w.attempts,
                    "seconds": w.seconds,
                }
            )
        return pd.DataFrame(rows)

    def headline(self) -> list[str]:
        """The verdict in words: no difference, or which metric moved, by how much, and where it went."""
        a, b = self.request.side_a.describe(), self.request.side_b.describe()
        if not self.differs:
            worst = max(self.attribution.classes, key=lambda c: abs(c.difference.relative), default=None)
            said = f"; largest change {_shown(worst)}" if worst else ""
            return [f"no difference between A ({a}) and B ({b}) beyond the measured noise{said}"]
        lines = []
        for split in (self.attribution.tpot, self.attribution.ttft):
            moved = [c for c in self.attribution.classes if c.metric == split.metric and c.differs]
            if not moved:
                continue
            way = "slower" if split.total.delta > 0 else "faster"
            lines.append(f"B is {way} on {split.metric}: {', '.join(_shown(c) for c in moved)}")
            basis = "typical steps" if split.metric == "TPOT" else "every request"
            lines.append(f"  where it went ({split.metric}, {basis}): {_split_text(split)}")
            lines += self._cause_detail(split)
        return lines

    def _cause_detail(self, split: Split) -> list[str]:
        if split.cause is Bucket.KERNEL and self.notable_kernels:
            named = [
                f"{k.name} ({k.status}{', op ' + k.op if k.op else ''}: {k.delta_us / 1000:+.3f} ms/step)"
                for k in self.notable_kernels[:4]
            ]
            return [f"  kernels: {'; '.join(named)}"]
        if split.cause in (Bucket.HOST_IDLE, Bucket.SCHEDULING):
            causes = [c for c in self.idle.get("B", ()) if c.share > 0.05]
            return [f"  B's idle time: {', '.join(f'{c.cause.value} {c.share:.0%}' for c in causes[:3])}"]
        return []

    def text(self) -> str:
        r = self.request
        w = r.workload
        lines = [
            f"performance twin {self.directory}",
            f"  A: {r.side_a.describe()}",
            f"  B: {r.side_b.describe()}",
            f"  load: {w.describe()}, concurrency {w.concurrency}; {r.windows_per_side} windows a side, profiler window "
            f"{r.window.delay_steps}+{r.window.max_steps} steps",
        ]
        lines += self.headline()
        cost = ", ".join(f"{s} {v:+.0%}" for s, v in self.profiler_cost.items() if v is not None)
        whole = ", ".join(f"{s} {v:+.0%}" for s, v in self.export_cost.items() if v is not None)
        if cost:
            lines.append(
                f"profiler's own cost on the step time inside its window: {cost} (whole profiled load: {whole})"
            )
        shares = sorted(w.others_cpu for w in self.windows if w.others_cpu is not None)
        if shares:
            retried = sum(w.attempts - 1 for w in self.windows)
            lines.append(
                f"other work on this machine during the windows: median {shares[len(shares) // 2]:.0%} of its cores, "
                f"at most {shares[-1]:.0%}; {retried} window(s) measured again for it"
            )
        lines += [f"slow rank on side {side}: {text}" for side, text in self.slow_ranks.items()]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        r = self.request
        return {
            "sides": [s.to_dict() for s in (r.side_a, r.side_b)],
            "workload": r.workload.to_dict(),
            "window": vars(r.window),
            "repeats": r.repeats,
            "differs": self.differs,
            "headline": self.headline(),
            "classes": [c.row() for c in self.attribution.classes],
            "buckets": self.buckets_table().to_dict("records"),
            "totals": {split.metric: split.total_row() for split in (self.attribution.tpot, self.attribution.ttft)},
            "causes": {"TPOT": _value(self.attribution.tpot.cause), "TTFT": _value(self.attribution.ttft.cause)},
            "kernels": [k.row() for k in self.kernels if k.status != "unchanged"],
            "modules": [m.row() for m in self.modules],
            "idle": {side: [c.row() for c in causes] for side, causes in self.idle.items()},
            "slow_ranks": self.slow_ranks,
            "profiler_cost": self.profiler_cost,
            "export_cost": self.export_cost,
            "windows": self.windows_table().to_dict("records"),
            "notes": list(self.notes),
            "wall_s": self.wall_s,
        }

    def write(self) -> Path:
        side = self.request.side_a
        stamp = provenance(recipe=side.recipe, url=side.url)
        return write_result(self.directory / RESULT_FILE, self.to_dict(), stamp, PERF_TWIN_KIND)


def read_perf_twin(directory: str | Path) -> dict[str, Any]:
    """A finished run's `perf-twin.json` (checked to be one)."""
    path = Path(directory) / RESULT_FILE
    if not path.is_file():
        raise WorkbenchError(f"{directory} holds no {RESULT_FILE}: run (or resume) the performance twin first")
    return PERF_TWIN_KIND.read(path)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _value(bucket: Bucket | None) -> str | None:
    return bucket.value if bucket is not None else None


def _shown(delta) -> str:
    d = delta.difference
    return (
        f"{delta.klass} {delta.metric} {d.delta:+.2f} ms ({d.relative:+.0%}; {d.a_mean:.2f} -> {d.b_mean:.2f} ms, "
        f"interval {d.low:+.2f}..{d.high:+.2f})"
    )


def _split_text(split: Split) -> str:
    parts = [f"{b.bucket.value} {b.difference.delta:+.2f} ms ({b.share:.0%})" for b in split.buckets]
    cause = f"; cause: {split.cause.value}" if split.cause is not None else "; no single bucket holds most of it"
    return ", ".join(parts) + cause


__all__ = ["PERF_TWIN_KIND", "RESULT_FILE", "PerfTwinResult", "read_perf_twin"]
