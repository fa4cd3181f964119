"""The regression gate: compare runs with a baseline metric by metric, without crying wolf on noise.

The noise rule, for one metric of one series (B = the baseline's repeats, C = the current repeats):

    change  = median(C) - median(B), relative to median(B)
    spread  = max - min of the repeats on one side (the run-to-run spread)

    |change| <= threshold                                  -> unchanged
    fewer than `min_repeats` runs on either side           -> thin evidence (the noise is unknown)
    |change| > spread(B) and |change| > spread(C)          -> regression (worse) / improvement (better)
    otherwise                                              -> within noise

so a change counts only when it is beyond the threshold (default 5%, per metric in
`policy/regress/thresholds.yaml`) and larger than how much the same configuration moves from run to
run on both sides. `margin` = |change| / the larger spread says how clearly it stands out (the
confidence column: 1 is the edge of the noise, 5 is far outside it).

Accuracy reports compare verdicts case by case (msprobe's pass < warning < error): a case whose worst
verdict got worse is a regression; verdicts are deterministic, so no noise rule applies. A run that did
not measure (a sweep point that failed to start, failed requests) where the baseline measured is a
regression too.
"""

from __future__ import annotations

import enum
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.errors import WorkbenchError
from workbench.regress.results import Run
from workbench.regress.thresholds import Better, Thresholds
from workbench.results.verdict import Verdict


class Change(str, enum.Enum):
    """What the noise rule made of one metric or verdict between the baseline and the current runs."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    NOISE = "within noise"
    UNCHANGED = "unchanged"
    THIN = "thin evidence"
    MISSING = "missing"


@dataclass(frozen=True)
class MetricComparison:
    """One metric of one series: both sides' values and what the noise rule made of them."""

    series: str
    metric: str
    label: str
    better: Better
    threshold: float
    baseline: tuple[float, ...]
    current: tuple[float, ...]
    finding: Change

    @property
    def baseline_median(self) -> float:
        return statistics.median(self.baseline)

    @property
    def current_median(self) -> float:
        return statistics.median(self.current)

    @property
    def change(self) -> float:
        """Relative change of the medians (+0.10 = 10% higher), 0 when both are 0."""
        base, now = self.baseline_median, self.current_median
        if base == 0:
            return 0.0 if now == 0 else float("inf") if now > 0 else float("-inf")
        return (now - base) / abs(base)

    @property
    def worse(self) -> bool:
        return self.change < 0 if self.better is Better.HIGHER else self.change > 0

    def spread(self, side: Sequence[float]) -> float:
        """max - min of one side's repeats, relative to the baseline median (comparable with `change`)."""
        base = abs(self.baseline_median) or 1.0
        return (max(side) - min(side)) / base if len(side) > 1 else float("nan")

    @property
    def margin(self) -> float | None:
        """|change| / the larger relative spread; None without repeats on both sides, inf with zero spread."""
        if len(self.baseline) < 2 or len(self.current) < 2:
            return None
        widest = max(self.spread(self.baseline), self.spread(self.current))
        return abs(self.change) / widest if widest > 0 else float("inf")

    def row(self) -> dict[str, object]:
        margin = self.margin
        return {
            "series": self.series,
            "metric": self.metric,
            "baseline": self.baseline_median,
            "n_baseline": len(self.baseline),
            "current": self.current_median,
            "n_current": len(self.current),
            "change_pct": 100.0 * self.change,
            "spread_baseline_pct": 100.0 * self.spread(self.baseline),
            "spread_current_pct": 100.0 * self.spread(self.current),
            "threshold_pct": 100.0 * self.threshold,
            "margin": margin if margin is not None else float("nan"),
            "finding": self.finding.value,
            "worse": self.worse,
        }


def judge(
    baseline: Sequence[float], current: Sequence[float], *, better: Better, threshold: float, min_repeats: int
) -> Change:
    """The noise rule (module docstring) for one metric's two sides of values."""
    if not baseline or not current:
        return Change.MISSING
    base, now = statistics.median(baseline), statistics.median(current)
    delta = now - base
    relative = abs(delta) / abs(base) if base else (0.0 if delta == 0 else float("inf"))
    if relative <= threshold:
        return Change.UNCHANGED
    if len(baseline) < min_repeats or len(current) < min_repeats:
        return Change.THIN
    if abs(delta) > max(baseline) - min(baseline) and abs(delta) > max(current) - min(current):
        worse = delta < 0 if better is Better.HIGHER else delta > 0
        return Change.REGRESSION if worse else Change.IMPROVEMENT
    return Change.NOISE


def compare_metrics(
    series: str, baseline: Sequence[Run], current: Sequence[Run], thresholds: Thresholds
) -> list[MetricComparison]:
    """Every metric of the thresholds file for one series (only runs that measured contribute values)."""
    found = []
    for metric, rule in thresholds.metrics.items():
        b = tuple(r.metrics[metric] for r in baseline if r.status == "ok" and metric in r.metrics)
        c = tuple(r.metrics[metric] for r in current if r.status == "ok" and metric in r.metrics)
        limit = thresholds.threshold(metric)
        finding = judge(b, c, better=rule.better, threshold=limit, min_repeats=thresholds.min_repeats)
        found.append(MetricComparison(series, metric, thresholds.label(metric), rule.better, limit, b, c, finding))
    return found


# -- accuracy verdicts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class VerdictComparison:
    series: str
    case: str
    before: str | None
    after: str | None
    finding: Change

    def row(self) -> dict[str, object]:
        return {
            "series": self.series,
            "case": self.case,
            "baseline": self.before,
            "current": self.after,
            "finding": self.finding.value,
        }


def compare_verdicts(series: str, baseline: Sequence[Run], current: Sequence[Run]) -> list[VerdictComparison]:
    """Case by case, the worst verdict of each side (msprobe's order: pass < warning < error)."""
    cases = sorted({c for r in (*baseline, *current) for c in r.verdicts})
    found = []
    for case in cases:
        try:
            before = [Verdict(r.verdicts[case]) for r in baseline if case in r.verdicts]
            after = [Verdict(r.verdicts[case]) for r in current if case in r.verdicts]
        except ValueError as exc:
            raise WorkbenchError(f"{series} {case}: {exc}; verdicts are pass, warning or error") from None
        b, a = (Verdict.worst(before) if before else None), (Verdict.worst(after) if after else None)
        if b is None or a is None:
            finding = Change.MISSING
        elif a.severity != b.severity:
            finding = Change.REGRESSION if a.severity > b.severity else Change.IMPROVEMENT
        else:
            finding = Change.UNCHANGED
        found.append(VerdictComparison(series, case, b and b.value, a and a.value, finding))
    return found


def compare_status(series: str, baseline: Sequence[Run], current: Sequence[Run]) -> VerdictComparison | None:
    """A regression when the baseline measured and some current run did not (start or requests failed)."""
    failed = [r for r in current if r.status != "ok"]
    if not failed or not any(r.status == "ok" for r in baseline):
        return None
    return VerdictComparison(
        series, "run status", "ok", "; ".join(sorted({r.status for r in failed})), Change.REGRESSION
    )
