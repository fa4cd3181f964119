"""Pure functions: a twin run's tables -> plotly figures. No I/O, no state; notebook 11 displays them."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

OUTCOME_COLOURS = {"identical": "#2da44e", "near tie": "#d4a72c", "diverged": "#cf222e", "failed": "#6e7781"}


def divergence_chart(table: pd.DataFrame, max_tokens: int, title: str = "Where each prompt's sides part") -> go.Figure:
    """One bar per prompt: the tokens both sides generated alike (full length when identical), coloured by
    outcome; hover: the two tokens, the gap and the drift. `table` is `TwinResult.prompt_table()`."""
    if table.empty:
        return go.Figure(layout={"title": f"{title}: no prompts"})
    labels = [
        f"{p}" + (f" {i}" if "id" in table else "") for p, i in zip(table["prompt"], table.get("id", table["prompt"]))
    ]
    figure = go.Figure()
    for outcome, colour in OUTCOME_COLOURS.items():
        part = table[table["outcome"] == outcome]
        if part.empty:
            continue
        hover = [
            f"{row.outcome}: {row.detail}<br>tokens A/B: {row.token_a} / {row.token_b}<br>drift {row.drift:.3g} nats"
            for row in part.itertuples()
        ]
        figure.add_bar(
            x=[labels[i] for i in part.index],
            y=part["common"],
            name=outcome,
            marker_color=colour,
            hovertext=hover,
            hoverinfo="text",
        )
    figure.update_layout(
        title=title,
        xaxis_title="prompt",
        yaxis_title=f"tokens alike (of {max_tokens})",
        barmode="overlay",
        yaxis_range=[0, max_tokens],
        legend_title="outcome",
    )
    return figure


def cosine_by_kind_chart(worst: dict[str, float], title: str = "Worst cosine per module kind") -> go.Figure:
    """The module stage's lowest cosine per module kind (every layer together), lowest first."""
    if not worst:
        return go.Figure(layout={"title": f"{title}: nothing compared"})
    kinds = list(worst)
    distance = [max(1.0 - worst[k], 1e-16) for k in kinds]
    figure = go.Figure(
        go.Bar(
            x=distance, y=kinds, orientation="h", hovertext=[f"cosine {worst[k]:.9f}" for k in kinds], hoverinfo="text"
        )
    )
    figure.update_layout(title=title, xaxis_title="1 - cosine (log)", xaxis_type="log", yaxis_autorange="reversed")
    return figure


BUCKET_COLOURS = {
    "kernel": "#0969da",
    "communication": "#8250df",
    "host idle": "#cf222e",
    "scheduling": "#d4a72c",
    "queueing": "#bc4c00",
    "prefill": "#1a7f37",
    "outside the engine": "#6e7781",
}


def bucket_chart(table: pd.DataFrame, title: str = "Where B's extra time went") -> go.Figure:
    """One stacked bar per metric (TPOT, TTFT): each bucket's share of B minus A, in ms, with its interval on
    hover. `table` is `PerfTwinResult.buckets_table()`; the buckets of a bar add up to the metric's difference."""
    if table.empty:
        return go.Figure(layout={"title": f"{title}: nothing measured"})
    figure = go.Figure()
    for bucket, part in table.groupby("bucket", sort=False):
        hover = [
            f"{bucket}: {r.delta_ms:+.3f} ms ({r.share:.0%})<br>interval {r.low_ms:+.3f} .. {r.high_ms:+.3f}"
            for r in part.itertuples()
        ]
        colour = BUCKET_COLOURS.get(str(bucket), "#57606a")
        figure.add_bar(x=part["metric"], y=part["delta_ms"], name=str(bucket), marker_color=colour, hovertext=hover)
    figure.update_layout(title=title, barmode="relative", yaxis_title="B - A (ms)", legend_title="bucket")
    return figure


__all__ = ["bucket_chart", "cosine_by_kind_chart", "divergence_chart"]
