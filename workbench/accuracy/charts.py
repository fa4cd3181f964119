"""Pure functions: result table -> plotly figure. No I/O, no state; notebooks display what they return."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from workbench.results.verdict import Verdict

VERDICT_COLOURS = [[0.0, "#2da44e"], [0.5, "#d4a72c"], [1.0, "#cf222e"]]


def verdict_heatmap(table: pd.DataFrame, title: str = "Op suite verdicts") -> go.Figure:
    """Rows: op [case]; columns: dtype; colour: worst verdict; hover: cosine and max errors.

    `table` is `SuiteResult.table()` (columns op, case, dtype, verdict, cosine, max_abs_err, max_rel_err).
    """
    if table.empty:
        return go.Figure(layout={"title": f"{title}: no results"})
    frame = table.assign(
        row=table["op"] + " [" + table["case"] + "]", level=table["verdict"].map(lambda v: Verdict(v).severity)
    )
    rows = list(dict.fromkeys(frame["row"]))
    cols = list(dict.fromkeys(frame["dtype"]))
    level = frame.pivot_table(index="row", columns="dtype", values="level", aggfunc="max").reindex(
        index=rows, columns=cols
    )
    hover = (
        frame.assign(
            text=frame["verdict"]
            + "<br>cosine "
            + frame["cosine"].map("{:.6f}".format)
            + "<br>max abs "
            + frame["max_abs_err"].map("{:.2e}".format)
            + "<br>max rel "
            + frame["max_rel_err"].map("{:.2e}".format)
        )
        .pivot_table(index="row", columns="dtype", values="text", aggfunc="first")
        .reindex(index=rows, columns=cols)
    )
    fig = go.Figure(
        go.Heatmap(
            z=level.values,
            x=cols,
            y=rows,
            text=hover.values,
            hoverinfo="text+x+y",
            colorscale=VERDICT_COLOURS,
            zmin=0,
            zmax=2,
            xgap=2,
            ygap=2,
            colorbar={"tickvals": [0, 1, 2], "ticktext": ["pass", "warning", "error"]},
        )
    )
    fig.update_layout(title=title, height=max(300, 28 * len(rows) + 120), yaxis={"autorange": "reversed"})
    return fig
