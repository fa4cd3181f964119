"""The text `regress` prints: one line per finding that matters, the table, the stack difference, the verdict."""

from __future__ import annotations

import math

from workbench.regress.compare import Change, MetricComparison, VerdictComparison
from workbench.regress.regress import RegressReport, SeriesReport


def _pct(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{100.0 * value:+.1f}%" if math.isfinite(value) else "inf"


def _number(value: float) -> str:
    return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"


def finding_line(series: SeriesReport, item: MetricComparison | VerdictComparison) -> str:
    """'REGRESSION [series] output tokens/s -61.3% (1843 -> 712; spread 1.2% / 0.8%, 51x the noise) while ...'."""
    head = f"{item.finding.value.upper():<12} [{series.series}]"
    if isinstance(item, VerdictComparison):
        return f"{head} {item.case}: {item.before} -> {item.after} {series.while_text()}"
    values = f"{_number(item.baseline_median)} -> {_number(item.current_median)}"
    if item.finding is Change.THIN:
        evidence = (
            f"{len(item.baseline)} baseline run(s), {len(item.current)} current run(s): the noise is unknown; "
            "repeat both sides, 3 runs each or more, to judge it"
        )
        return f"{head} {item.label} {_pct(item.change)} ({values}; {evidence}) {series.while_text()}"
    spread = f"spread {_pct(item.spread(item.baseline)).lstrip('+')} / {_pct(item.spread(item.current)).lstrip('+')}"
    margin = item.margin
    beyond = f", {margin:.1f}x the noise" if margin is not None and math.isfinite(margin) else ""
    return f"{head} {item.label} {_pct(item.change)} ({values}; {spread}{beyond}) {series.while_text()}"


def _table(series: SeriesReport) -> str:
    import pandas as pd

    rows = [f.row() for f in series.findings]
    if not rows:
        return "  (nothing to compare)"
    frame = pd.DataFrame(rows).drop(columns=["series"])
    if "change_pct" in frame:
        frame = frame.drop(columns=["worse", "threshold_pct"]).round(
            {
                "baseline": 2,
                "current": 2,
                "change_pct": 1,
                "spread_baseline_pct": 1,
                "spread_current_pct": 1,
                "margin": 1,
            }
        )
        frame = frame.rename(
            columns={
                "n_baseline": "n",
                "n_current": "n ",
                "change_pct": "change %",
                "spread_baseline_pct": "spread b %",
                "spread_current_pct": "spread c %",
            }
        )
    else:
        frame = frame[frame["finding"] != Change.UNCHANGED.value]
        if frame.empty:
            return f"  every one of {len(rows)} verdicts unchanged"
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        return "\n".join("  " + line for line in frame.to_string(index=False).splitlines())


def _stack_section(series: SeriesReport) -> list[str]:
    if not series.stack_changes:
        return ["  stack difference: none (same stack, model and configuration)"]
    lines = ["  stack difference (baseline -> current):"]
    lines += [f"    {'DIFF' if c.counts else 'note'}  {c.describe()}" for c in series.stack_changes]
    if not series.stack_changed:
        return lines
    if series.kernel_lines:
        lines.append("  kernels that changed:")
        lines += [f"    {line}" for line in series.kernel_lines]
    else:
        lines.append("  kernels that changed: none (every op and attention state runs the same kernel)")
    return lines


def format_report(report: RegressReport) -> str:
    lines = [
        f"regress against baseline {report.baseline!r} (thresholds: {report.thresholds.name}, "
        f"default {100 * report.thresholds.default_threshold:g}%, repeats needed per side: {report.thresholds.min_repeats})"
    ]
    flagged = [*report.regressions, *report._with(Change.THIN, worse_only=True)]
    lines += [finding_line(s, f) for s, f in flagged]
    for series in report.series:
        lines.append(
            f"\nseries {series.series}: {series.n_baseline} baseline run(s), {series.n_current} current run(s)"
        )
        lines.append(_table(series))
        lines += _stack_section(series)
    for label, names in (
        ("only in the baseline (not compared)", report.only_in_baseline),
        ("only in the results (not compared)", report.only_in_current),
    ):
        lines += [f"{label}: {name}" for name in names]
    lines += [f"note: {note}" for note in report.notes]
    lines.append("")
    lines.append(verdict_line(report))
    return "\n".join(lines)


def verdict_line(report: RegressReport) -> str:
    regressions, thin = len(report.regressions), len(report.thin_worse)
    if regressions:
        return f"REGRESSION: {regressions} finding(s) beyond threshold and noise (exit 1)"
    if thin and report.fail_on_thin:
        return f"REGRESSION (thin evidence): {thin} metric(s) worse on a single run (--fail-on-thin; exit 1)"
    if thin:
        return f"no regression shown; {thin} metric(s) worse on thin evidence: repeat the runs to decide (exit 0)"
    return "no regression (exit 0)"
