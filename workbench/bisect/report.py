"""Bisect results as tables and charts (pure functions of the step records)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from workbench.bisect.runner import BisectOutcome, StepRecord

COLUMNS = [
    "kind",
    "features",
    "passed",
    "started",
    "request_ok",
    "match",
    "max_drift",
    "crash_kind",
    "detail",
    "fix",
    "start_s",
    "probe_s",
]


def steps_table(records: Sequence[StepRecord]) -> pd.DataFrame:
    """One row per step in the order they finished."""
    rows = [r.row() for r in sorted(records, key=lambda r: r.finished_at)]
    return (
        pd.DataFrame(rows, columns=COLUMNS + ["log_path"])[COLUMNS + ["log_path"]]
        if rows
        else pd.DataFrame(columns=COLUMNS)
    )


def verdict_table(verdict: BisectOutcome) -> pd.DataFrame:
    """The verdict: each culprit with its crash class, fix and log excerpt."""
    rows = []
    for name in verdict.culprits:
        # The smallest failing feature set that contains the culprit explains it best.
        failing = [r for r in verdict.records if name in r.features and not r.passed]
        record = min(failing, key=lambda r: len(r.features)) if failing else None
        rows.append(
            {
                "culprit": name,
                "status": verdict.status.value,
                "failing_set": "+".join(record.features) if record else None,
                "crash_kind": record.crash_kind if record else None,
                "match": record.match if record else None,
                "fix": record.fix if record else None,
                "log_excerpt": (record.log_excerpt or "")[:300] if record else None,
            }
        )
    if not rows:
        baseline = next((r for r in verdict.records if r.kind == "baseline"), None)
        rows.append(
            {
                "culprit": "-",
                "status": verdict.status.value,
                "failing_set": None,
                "crash_kind": baseline.crash_kind if baseline else None,
                "match": None,
                "fix": baseline.fix if baseline else None,
                "log_excerpt": (baseline.log_excerpt or "")[:300] if baseline else None,
            }
        )
    return pd.DataFrame(rows)


def timeline(records: Sequence[StepRecord]) -> go.Figure:
    """Each step as a bar: server start then probe, green when it passed, red when not."""
    ordered = sorted(records, key=lambda r: r.finished_at)
    labels = [f"{r.kind}: {'+'.join(r.features) or 'baseline'}" for r in ordered]
    colours = ["#2da44e" if r.passed else "#cf222e" for r in ordered]
    fig = go.Figure()
    fig.add_bar(
        y=labels,
        x=[r.start_s for r in ordered],
        orientation="h",
        name="server start",
        marker_color=colours,
        opacity=0.55,
    )
    fig.add_bar(
        y=labels,
        x=[r.probe_s for r in ordered],
        orientation="h",
        name="greedy probe",
        marker_color=colours,
        hovertext=[r.detail for r in ordered],
    )
    fig.update_layout(
        barmode="stack",
        title="Bisect timeline (seconds per step)",
        xaxis_title="seconds",
        yaxis={"autorange": "reversed"},
        height=max(300, 40 * len(ordered) + 120),
    )
    return fig
