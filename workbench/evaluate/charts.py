"""Pure functions: evaluation table -> plotly figure (no I/O; notebooks display what they return)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

VERDICT_COLOURS = {"pass": "#2da44e", "warning": "#d4a72c", "error": "#cf222e", "no data": "#8c959f"}


def comparison_figure(table: pd.DataFrame, reference: str = "reference", test: str = "test") -> go.Figure:
    """Side by side per data set: mean NLL per token, pass@1, greedy agreement; titles carry the verdicts.

    `table` is `Comparison.table()` (columns dataset, verdict, nll_reference, nll_test, pass_at_1_reference,
    pass_at_1_test, greedy_agreement, greedy_exact_match).
    """
    if table.empty:
        return go.Figure(layout={"title": "No data set measured on both sides"})
    fig = make_subplots(
        rows=1,
        cols=3,
        subplot_titles=("NLL (nats/token, lower is better)", "pass@1", "greedy agreement with the reference"),
    )
    names = [f"{row.dataset} ({row.verdict})" for row in table.itertuples()]
    for column, label, colour in (("nll_reference", reference, "#0969da"), ("nll_test", test, "#bf3989")):
        fig.add_bar(x=names, y=table[column], name=label, marker_color=colour, legendgroup=label, row=1, col=1)
    code = table[table["kind"] == "code"]
    code_names = [f"{row.dataset} ({row.verdict})" for row in code.itertuples()]
    for column, label, colour in (("pass_at_1_reference", reference, "#0969da"), ("pass_at_1_test", test, "#bf3989")):
        fig.add_bar(
            x=code_names,
            y=code[column],
            name=label,
            marker_color=colour,
            legendgroup=label,
            showlegend=False,
            row=1,
            col=2,
        )
    fig.add_bar(
        x=names,
        y=table["greedy_agreement"],
        name="mean common prefix",
        row=1,
        col=3,
        marker_color=[VERDICT_COLOURS.get(v, "#8c959f") for v in table["verdict"]],
    )
    fig.add_scatter(
        x=names,
        y=table["greedy_exact_match"],
        mode="markers",
        name="exact match rate",
        marker={"symbol": "diamond", "size": 11, "color": "#24292f"},
        row=1,
        col=3,
    )
    for row in code.itertuples():  # pass@1 that cannot drop (the reference passes nothing) says so
        if row.pass_at_1_reference == 0:
            fig.add_annotation(
                x=f"{row.dataset} ({row.verdict})",
                y=0.5,
                text="no problem passes on the<br>reference side: pass@1 is<br>not informative here",
                showarrow=False,
                row=1,
                col=2,
            )
    fig.update_yaxes(range=[0, 1.05], row=1, col=2)
    fig.update_yaxes(range=[0, 1.05], row=1, col=3)
    fig.update_layout(barmode="group", height=420, title=f"{test} against {reference}")
    return fig
