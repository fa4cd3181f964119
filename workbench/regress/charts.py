"""Figures of the version-lock notebook (pure: a table in, a plotly figure out)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go


def metric_history(runs: pd.DataFrame, metric: str, *, title: str | None = None) -> go.Figure:
    """One marker per stored run (x: run order by time, y: `metric`), a trace per group (baseline name or
    'current'), each group's median as a dotted line: a drift or a step after an upgrade shows at a glance.

    `runs` is `workbench.regress.tables.runs_frame(...)`.
    """
    figure = go.Figure()
    for group, rows in runs.groupby("group", sort=False):
        rows = rows.dropna(subset=[metric])
        if rows.empty:
            continue
        figure.add_trace(
            go.Scatter(
                x=rows["run"],
                y=rows[metric],
                mode="markers+lines",
                name=str(group),
                text=rows["created_at"] + "<br>" + rows["source"].str.rsplit("/", n=1).str[-1],
                hovertemplate="%{text}<br>%{y:.4g}<extra>" + str(group) + "</extra>",
            )
        )
        median = float(rows[metric].median())
        figure.add_trace(
            go.Scatter(
                x=[rows["run"].min(), rows["run"].max()],
                y=[median, median],
                mode="lines",
                line={"dash": "dot"},
                name=f"{group} median",
                showlegend=False,
                hoverinfo="skip",
            )
        )
    figure.update_layout(
        title=title or f"{metric} across stored runs",
        xaxis_title="run (in time order)",
        yaxis_title=metric,
        template="plotly_white",
        height=380,
    )
    return figure
