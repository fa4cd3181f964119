"""Pure functions: scan tables -> plotly figures (no I/O, no state)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from workbench.scan.report import SEVERITY_ORDER

SEVERITY_COLOURS = {"blocks": "#cf222e", "unknown": "#8250df", "change": "#d4a72c", "works": "#2da44e"}


def _stacked(table: pd.DataFrame, label: str, title: str) -> go.Figure:
    if table.empty:
        return go.Figure(layout={"title": f"{title}: no findings"})
    rows = table.iloc[::-1]  # plotly draws the first bar at the bottom; keep the worst on top
    fig = go.Figure(
        [
            go.Bar(
                y=rows[label], x=rows[s.value], name=s.value, orientation="h", marker_color=SEVERITY_COLOURS[s.value]
            )
            for s in SEVERITY_ORDER
        ]
    )
    fig.update_layout(
        title=title,
        barmode="stack",
        height=max(300, 26 * len(rows) + 140),
        xaxis_title="findings",
        legend={"orientation": "h", "y": -0.15},
        margin={"l": 10},
    )
    return fig


def severity_by_category(by_category: pd.DataFrame, title: str = "CUDA ties by category") -> go.Figure:
    """Stacked bars: one per category, split by severity. `by_category` is `ScanReport.by_category()`."""
    return _stacked(by_category, "category", title)


def top_files(by_file: pd.DataFrame, limit: int = 15, title: str = "Files with the most CUDA ties") -> go.Figure:
    """Stacked bars for the `limit` files with the most work. `by_file` is `ScanReport.by_file()`."""
    return _stacked(by_file.head(limit), "file", title)
