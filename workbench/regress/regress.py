"""`regress`: runs against a stored baseline, series by series, with the stack difference beside each finding.

A regression line carries what changed between the two fingerprints, so "throughput -15% while CANN went
from A to B" is one line (docs/METHOD.md §16). Results of different workloads cannot be compared: when
no series of the results is in the baseline, that is one error naming both sides' workloads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.regress.compare import (
    Change,
    MetricComparison,
    VerdictComparison,
    compare_metrics,
    compare_status,
    compare_verdicts,
)
from workbench.regress.results import Run
from workbench.regress.stackdiff import StackChange, diff_fingerprints, kernel_changes
from workbench.regress.thresholds import Thresholds
from workbench.results.envelope import DocumentKind

REGRESS_KIND = DocumentKind("regress")

SHOWN_CHANGES = 3  # stack changes written out on a regression line; the full list follows the table


@dataclass(frozen=True)
class SeriesReport:
    """One series (workload [+ sweep params]) compared: metrics or verdicts, and the stack between."""

    series: str
    family: str
    n_baseline: int
    n_current: int
    metrics: tuple[MetricComparison, ...] = ()
    verdicts: tuple[VerdictComparison, ...] = ()
    stack_changes: tuple[StackChange, ...] = ()
    kernel_lines: tuple[str, ...] | None = None  # None: the stack did not change, so kernels were not compared

    @property
    def stack_changed(self) -> bool:
        """True when the software or hardware moved (not just the configuration or the model files)."""
        return any(stack_key(c.key) and c.counts for c in self.stack_changes)

    @property
    def findings(self) -> list[MetricComparison | VerdictComparison]:
        return [*self.metrics, *self.verdicts]

    def while_text(self) -> str:
        """'while cann.toolkit 8.1.RC1 -> 8.2.RC1; versions.torch-npu ...' (changes that count), or 'stack unchanged'."""
        counting = [c for c in self.stack_changes if c.counts]
        if not counting:
            return "with the stack and configuration unchanged"
        shown = "; ".join(c.short for c in counting[:SHOWN_CHANGES])
        more = f" (+{len(counting) - SHOWN_CHANGES} more)" if len(counting) > SHOWN_CHANGES else ""
        return f"while {shown}{more}"


@dataclass(frozen=True)
class RegressReport:
    baseline: str
    thresholds: Thresholds
    series: tuple[SeriesReport, ...]
    only_in_baseline: tuple[str, ...] = ()
    only_in_current: tuple[str, ...] = ()
    fail_on_thin: bool = False
    notes: tuple[str, ...] = field(default=())

    def _with(self, finding: Change, worse_only: bool = False) -> list[tuple[SeriesReport, Any]]:
        return [
            (s, f)
            for s in self.series
            for f in s.findings
            if f.finding is finding and (not worse_only or getattr(f, "worse", True))
        ]

    @property
    def regressions(self) -> list[tuple[SeriesReport, Any]]:
        return self._with(Change.REGRESSION)

    @property
    def thin_worse(self) -> list[tuple[SeriesReport, Any]]:
        return self._with(Change.THIN, worse_only=True)

    @property
    def failed(self) -> bool:
        return bool(self.regressions) or (self.fail_on_thin and bool(self.thin_worse))

    def table(self) -> Any:
        """Every compared metric and verdict as one DataFrame (the notebook's baseline-vs-run table)."""
        import pandas as pd

        return pd.DataFrame([f.row() for s in self.series for f in s.findings])

    def stack_table(self) -> Any:
        import pandas as pd

        rows = [{"series": s.series, **c.row()} for s in self.series for c in s.stack_changes]
        return pd.DataFrame(rows, columns=["series", "key", "before", "after", "what", "action", "counts"])

    def write(self, path: Path, results: list[Path]) -> Path:
        """`regress --json`: the report and the result files it read, stamped as a `regress` document."""
        from workbench.results.envelope import write_result
        from workbench.stack.provenance import provenance

        document = self.to_dict() | {"results": [str(p) for p in results]}
        return write_result(path, document, provenance(), REGRESS_KIND)

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "thresholds": self.thresholds.name,
            "regressions": len(self.regressions),
            "thin_evidence_worse": len(self.thin_worse),
            "failed": self.failed,
            "findings": _json_rows(self.table().to_dict(orient="records")),
            "stack_changes": self.stack_table().to_dict(orient="records"),
            "kernel_changes": {s.series: list(s.kernel_lines) for s in self.series if s.kernel_lines is not None},
            "only_in_baseline": list(self.only_in_baseline),
            "only_in_current": list(self.only_in_current),
        }


def _json_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """NaN/inf (no spread with one run, zero spread) as null / 'inf', so the report is strict JSON."""

    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return value

    return [{k: clean(v) for k, v in row.items()} for row in rows]


def _group(runs: Sequence[Run]) -> dict[str, list[Run]]:
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.series, []).append(run)
    return groups


def _latest(runs: Sequence[Run]) -> dict[str, Any]:
    return max(runs, key=lambda r: r.created_at).provenance


def stack_key(key: str) -> bool:
    """A fingerprint key of the stack itself (not the serving recipe, the model files or the device)."""
    return not key.startswith(("recipe.", "model.", "device", "server_vllm_version"))


def _mixed(side: str, runs: Sequence[Run]) -> str | None:
    """A note when runs of one series on one side come from different stacks or models (e.g. repeats
    appended after an upgrade): their spread then measures the upgrade as well as the noise."""
    keys: set[str] = set()
    for members in _group(runs).values():
        stamped = sorted((r for r in members if r.provenance), key=lambda r: r.created_at)
        for run in stamped[1:]:
            keys |= {c.key for c in diff_fingerprints(stamped[0].provenance, run.provenance) if c.counts}
    return f"{side} mixes runs of different stacks ({', '.join(sorted(keys))} differ among them)" if keys else None


def _different_workloads(name: str, baseline: dict[str, list[Run]], current: dict[str, list[Run]]) -> WorkbenchError:
    def listing(groups: dict[str, list[Run]]) -> str:
        return "; ".join(f"{s} ({groups[s][0].kind.value}, {len(groups[s])} run(s))" for s in groups)

    return WorkbenchError(
        f"the results measure different workloads than baseline {name!r}: baseline has {listing(baseline)}; "
        f"the results have {listing(current)}. Compare runs of the same workload (same lengths, --num-prompts, "
        f"--concurrency/--request-rate, and the same kind of result)"
    )


def _series_report(series: str, baseline: list[Run], current: list[Run], thresholds: Thresholds) -> SeriesReport:
    family = baseline[0].kind.family
    before, after = _latest(baseline), _latest(current)
    changes = tuple(diff_fingerprints(before, after)) if before and after else ()
    kernels = None
    if before.get("stack") and after.get("stack") and any(stack_key(c.key) and c.counts for c in changes):
        kernels = tuple(kernel_changes(before["stack"], after["stack"]))
    status = compare_status(series, baseline, current)
    if family == "load":
        return SeriesReport(
            series,
            family,
            len(baseline),
            len(current),
            metrics=tuple(compare_metrics(series, baseline, current, thresholds)),
            verdicts=(status,) if status else (),
            stack_changes=changes,
            kernel_lines=kernels,
        )
    verdicts = compare_verdicts(series, baseline, current)
    return SeriesReport(
        series,
        family,
        len(baseline),
        len(current),
        verdicts=tuple(verdicts),
        stack_changes=changes,
        kernel_lines=kernels,
    )


def regress(
    baseline_name: str,
    baseline: Sequence[Run],
    current: Sequence[Run],
    thresholds: Thresholds,
    *,
    fail_on_thin: bool = False,
) -> RegressReport:
    """Compare `current` runs with the baseline's, series by series; raise when no series is shared."""
    base_groups, current_groups = _group(baseline), _group(current)
    common = [s for s in current_groups if s in base_groups]
    if not common:
        raise _different_workloads(baseline_name, base_groups, current_groups)
    notes = [_mixed(f"baseline {baseline_name!r}", baseline), _mixed("the results", current)]
    if any(not r.provenance for r in (*baseline, *current)):
        notes.append("some results carry no provenance stamp: their stack difference is unknown")
    return RegressReport(
        baseline_name,
        thresholds,
        tuple(_series_report(s, base_groups[s], current_groups[s], thresholds) for s in common),
        only_in_baseline=tuple(s for s in base_groups if s not in current_groups),
        only_in_current=tuple(s for s in current_groups if s not in base_groups),
        fail_on_thin=fail_on_thin,
        notes=tuple(n for n in notes if n),
    )
