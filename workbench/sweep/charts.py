"""Pure functions: sweep results table -> plotly figure. No I/O, no state; callers display or save.

Inputs are `ResultStore.frame()` / `aggregate_repeats(...)` tables, the long per-request table from
`store.latencies_frame`, and `analysis.sensitivity(...)`.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import plotly.graph_objects as go

from workbench.sweep.analysis import THROUGHPUT, pareto_front, point_labels, slo_mask

AXIS_TITLES = {
    "output_throughput": "output throughput (tok/s)",
    "p99_ttft_ms": "p99 TTFT (ms)",
    "p99_e2el_ms": "p99 end-to-end latency (ms)",
    "p99_tpot_ms": "p99 TPOT (ms)",
}


def _empty(title: str) -> go.Figure:
    return go.Figure(layout={"title": f"{title}: no measured points"})


def pareto_scatter(
    frame: pd.DataFrame,
    x: str = "p99_ttft_ms",
    y: str = THROUGHPUT,
    limits: Mapping[str, float] | None = None,
    title: str | None = None,
) -> go.Figure:
    """Every measured point (x: a latency, y: throughput), the Pareto front as a line, the SLO limit on x.

    Points meeting the whole SLO are filled circles, the others open; hover shows the point's label.
    """
    title = title or f"{AXIS_TITLES.get(y, y)} vs {AXIS_TITLES.get(x, x)}"
    ok = frame[frame["status"] == "ok"] if "status" in frame.columns else frame
    if ok.empty:
        return _empty(title)
    front = pareto_front(ok, x, y)
    labels = point_labels(front)
    meets = slo_mask(front, limits or {})
    fig = go.Figure()
    for flag, name, symbol in ((True, "meets SLO", "circle"), (False, "misses SLO", "circle-open")):
        part = front[meets == flag]
        if not part.empty:
            fig.add_trace(
                go.Scatter(
                    x=part[x],
                    y=part[y],
                    mode="markers",
                    name=name,
                    text=labels[meets == flag],
                    marker={"size": 11, "symbol": symbol},
                    hovertemplate="%{text}<br>%{x:.1f}, %{y:.1f}",
                )
            )
    line = front[front["pareto"]]
    fig.add_trace(go.Scatter(x=line[x], y=line[y], mode="lines", name="Pareto front", line={"dash": "dot"}))
    if limits and x in limits:
        fig.add_vline(x=limits[x], line_dash="dash", line_color="#cf222e", annotation_text=f"SLO {limits[x]:g}")
    fig.update_layout(title=title, xaxis_title=AXIS_TITLES.get(x, x), yaxis_title=AXIS_TITLES.get(y, y))
    return fig


def param_heatmap(frame: pd.DataFrame, rows: str, columns: str, metric: str = THROUGHPUT) -> go.Figure:
    """Mean `metric` for each (rows value, columns value) pair, e.g. max_num_seqs x concurrency."""
    title = f"{AXIS_TITLES.get(metric, metric)}: {rows} x {columns}"
    ok = frame[frame["status"] == "ok"] if "status" in frame.columns else frame
    if ok.empty:
        return _empty(title)
    table = ok.pivot_table(index=rows, columns=columns, values=metric, aggfunc="mean").sort_index().sort_index(axis=1)
    fig = go.Figure(
        go.Heatmap(
            z=table.values,
            x=[str(c) for c in table.columns],
            y=[str(i) for i in table.index],
            text=table.map(lambda v: f"{v:.1f}").values,
            texttemplate="%{text}",
            colorscale="Viridis",
            colorbar={"title": metric},
        )
    )
    fig.update_layout(title=title, xaxis_title=columns, yaxis_title=rows)
    return fig


def latency_distribution(latencies: pd.DataFrame, metric: str = "ttft_ms", by: str = "label") -> go.Figure:
    """Box plots of one per-request latency (ttft_ms, tpot_ms or e2el_ms), one box per point."""
    title = f"{metric} per request"
    part = latencies[latencies["metric"] == metric] if not latencies.empty else latencies
    if part.empty:
        return _empty(title)
    fig = go.Figure()
    for name, group in part.groupby(by, sort=False):
        fig.add_trace(go.Box(y=group["value"], name=str(name), boxpoints="all", jitter=0.3, pointpos=0))
    fig.update_layout(title=title, yaxis_title=metric, showlegend=False)
    return fig


def sensitivity_bars(table: pd.DataFrame) -> go.Figure:
    """`analysis.sensitivity` as bars: how far the metric moves across each factor's values."""
    if table.empty:
        return go.Figure(layout={"title": "sensitivity: fewer than two values for every factor"})
    metric = table["metric"].iloc[0]
    fig = go.Figure(
        go.Bar(
            x=table["factor"],
            y=table["spread"] * 100.0,
            text=[f"best {v}" for v in table["best_value"]],
            textposition="outside",
        )
    )
    fig.update_layout(title=f"sensitivity of {metric} (relative spread, %)", yaxis_title="spread (%)")
    return fig


def timing_bars(frame: pd.DataFrame) -> go.Figure:
    """Where each point's wall time went: server start, prompts, warm-up, load, and the rest (sweep overhead)."""
    if frame.empty or "wall_s" not in frame.columns:
        return _empty("time per point")
    labels = point_labels(frame)
    start = frame["server_start_s"].fillna(0.0)

    def part(column: str) -> pd.Series:  # results stored before a column existed lack it
        return frame[column].fillna(0.0) if column in frame else 0.0 * start

    prompts, warm, load = part("prompts_s"), part("warmup_s"), part("load_s")
    other = frame["wall_s"].fillna(0.0) - start - prompts - warm - load
    fig = go.Figure()
    parts = (("server start", start), ("prompts", prompts), ("warm-up", warm), ("load", load))
    for name, values in (*parts, ("other overhead", other)):
        fig.add_trace(go.Bar(x=labels, y=values, name=name))
    fig.update_layout(barmode="stack", title="time per point (s)", yaxis_title="seconds")
    return fig
