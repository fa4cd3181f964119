"""Pure functions: a replay's tables -> plotly figures. No I/O, no state; notebook 12 displays them."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

PARITY_COLOURS = {
    "identical": "#2da44e",
    "near_tie": "#8cc265",
    "same_tool_call": "#57ab5a",
    "schema_valid": "#d4a72c",
    "different": "#e16f24",
    "broken": "#cf222e",
    "no_reference": "#6e7781",
}


def parity_chart(class_table: pd.DataFrame, title: str = "How each kind of request came back") -> go.Figure:
    """Stacked bars: per request class, how many requests of each parity class (`ReplayResult.class_table()`)."""
    if class_table.empty:
        return go.Figure(layout={"title": f"{title}: nothing replayed"})
    figure = go.Figure()
    for parity in class_table.columns:
        figure.add_bar(
            x=list(class_table.index),
            y=class_table[parity],
            name=parity,
            marker_color=PARITY_COLOURS.get(parity, "#888"),
        )
    figure.update_layout(title=title, barmode="stack", xaxis_title="request class", yaxis_title="requests")
    return figure


def latency_chart(latency_table: pd.DataFrame, quantile: float = 50.0, title: str | None = None) -> go.Figure:
    """Replayed / recorded ratio of one quantile per class and metric, with its bootstrap interval; 1 = as before."""
    title = title or f"p{quantile:g} latency, replayed / recorded"
    if latency_table.empty:
        return go.Figure(layout={"title": f"{title}: no latency measured on both sides"})
    rows = latency_table[latency_table["quantile"] == quantile]
    figure = go.Figure()
    for metric in ("ttft", "tpot", "e2el"):
        part = rows[rows["metric"] == metric]
        if part.empty:
            continue
        figure.add_bar(
            x=list(part["request_class"]),
            y=part["ratio"],
            name=metric,
            error_y={
                "type": "data",
                "symmetric": False,
                "array": part["high"] - part["ratio"],
                "arrayminus": part["ratio"] - part["low"],
            },
            hovertext=[
                f"{r.recorded_ms:.0f} -> {r.replayed_ms:.0f} ms ({r.requests} requests)" for r in part.itertuples()
            ],
        )
    figure.add_hline(y=1.0, line_dash="dot")
    figure.update_layout(title=title, barmode="group", xaxis_title="request class", yaxis_title="ratio")
    return figure


__all__ = ["PARITY_COLOURS", "latency_chart", "parity_chart"]
