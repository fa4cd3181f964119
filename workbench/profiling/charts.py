"""Pure functions: profile tables -> plotly figures. No I/O, no state; callers display or save.

Inputs are `Profile.steps_frame()`, `ranks_frame()`, `ops_frame()`, `kinds_frame()` and
`GraphModeResult.ratios()`. Every time-share chart carries the profile's device mapping in its title,
so a CPU chart never passes for an NPU one.
"""

from __future__ import annotations

import textwrap

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

SHARES = (
    ("computing_share", "Computing", "#1f77b4"),
    ("communication_share", "Communication (not overlapped)", "#d62728"),
    ("free_share", "Free", "#c7c7c7"),
)


def _empty(title: str) -> go.Figure:
    return go.Figure(layout={"title": f"{title}: nothing to show"})


SUBTITLE_CHARACTERS = 110  # what fits one line of a figure's subtitle at the notebook's width


def _subtitle(mapping: str) -> str:
    """The mapping sentence under a title, wrapped: plotly draws a title on one line and cuts what overflows."""
    if not mapping:
        return ""
    lines = textwrap.wrap(mapping, SUBTITLE_CHARACTERS)
    return "".join(f"<br><sup>{line}</sup>" for line in lines)


def rank_share_bars(
    ranks: pd.DataFrame, mapping: str = "", title: str = "Where the step time goes, per rank"
) -> go.Figure:
    """Stacked bars, one per rank: Computing / Communication (not overlapped) / Free shares of its steps."""
    if ranks.empty:
        return _empty(title)
    fig = go.Figure()
    labels = [f"rank {r}" for r in ranks["rank"]]
    for column, name, color in SHARES:
        fig.add_trace(go.Bar(x=labels, y=ranks[column], name=name, marker_color=color, hovertemplate="%{x}: %{y:.1%}"))
    fig.update_layout(
        barmode="stack",
        title=title + _subtitle(mapping),
        yaxis_tickformat=".0%",
        yaxis_title="share of step time",
        legend_orientation="h",
    )
    return fig


def step_share_bars(steps: pd.DataFrame, mapping: str = "", title: str = "Time shares per step") -> go.Figure:
    """Stacked bars per step (milliseconds), one row of panels per rank; hover names the step's phase."""
    if steps.empty:
        return _empty(title)
    ranks = list(dict.fromkeys(steps["rank"]))
    fig = make_subplots(rows=len(ranks), cols=1, shared_xaxes=True, subplot_titles=[f"rank {r}" for r in ranks])
    for row, rank in enumerate(ranks, start=1):
        own = steps[steps["rank"] == rank]
        for (_column, name, color), us in zip(SHARES, ("computing_us", "communication_not_overlapped_us", "free_us")):
            fig.add_trace(
                go.Bar(
                    x=own["step"],
                    y=own[us] / 1000.0,
                    name=name,
                    marker_color=color,
                    customdata=own["phase"],
                    showlegend=row == 1,
                    legendgroup=name,
                    hovertemplate="step %{x} %{customdata}: %{y:.2f} ms",
                ),
                row=row,
                col=1,
            )
        fig.update_yaxes(title_text="ms", row=row, col=1)
    fig.update_layout(
        barmode="stack", title=title + _subtitle(mapping), legend_orientation="h", height=260 * len(ranks) + 120
    )
    fig.update_xaxes(title_text="engine step", row=len(ranks), col=1)
    return fig


def top_ops_bars(ops: pd.DataFrame, title: str = "Top ops by self time") -> go.Figure:
    """Horizontal bars of self time (ms) per op, coloured by kind of work, largest on top."""
    if ops.empty:
        return _empty(title)
    fig = go.Figure()
    for kind, part in ops.groupby("kind", sort=False):
        fig.add_trace(
            go.Bar(
                y=part["name"],
                x=part["self_us"] / 1000.0,
                orientation="h",
                name=str(kind),
                customdata=part[["calls", "share"]],
                hovertemplate="%{y}: %{x:.2f} ms, %{customdata[0]} calls, %{customdata[1]:.1%} of op time",
            )
        )
    order = list(ops.sort_values("self_us")["name"])
    fig.update_layout(
        title=title,
        xaxis_title="self time (ms)",
        yaxis={"categoryorder": "array", "categoryarray": order},
        height=max(320, 24 * len(ops) + 120),
        barmode="stack",
    )
    return fig


def kind_bars(kinds: pd.DataFrame, title: str = "Op time by kind of work, per rank") -> go.Figure:
    """Stacked shares of op self time by kind (aten / vLLM C++ op / collective; AI_CORE / AI_CPU / HCCL ...)."""
    if kinds.empty:
        return _empty(title)
    fig = go.Figure()
    for kind, part in kinds.groupby("kind", sort=False):
        fig.add_trace(
            go.Bar(
                x=[f"rank {r}" for r in part["rank"]], y=part["share"], name=str(kind), hovertemplate="%{x}: %{y:.1%}"
            )
        )
    fig.update_layout(barmode="stack", title=title, yaxis_tickformat=".0%", legend_orientation="h")
    return fig


def compare_share_bars(
    ranks_by_label: dict[str, pd.DataFrame], mapping: str = "", title: str = "Time shares side by side"
) -> go.Figure:
    """Several profiles' per-rank shares in one stacked chart (e.g. 'TP=1' and 'TP=2')."""
    rows = [
        frame.assign(label=[f"{label} rank {r}" for r in frame["rank"]])
        for label, frame in ranks_by_label.items()
        if not frame.empty
    ]
    if not rows:
        return _empty(title)
    frame = pd.concat(rows, ignore_index=True)
    fig = go.Figure()
    for column, name, color in SHARES:
        fig.add_trace(
            go.Bar(x=frame["label"], y=frame[column], name=name, marker_color=color, hovertemplate="%{x}: %{y:.1%}")
        )
    fig.update_layout(barmode="stack", title=title + _subtitle(mapping), yaxis_tickformat=".0%", legend_orientation="h")
    return fig


def graph_mode_bars(ratios: pd.DataFrame, title: str = "Eager against compiled (graph mode)") -> go.Figure:
    """Grouped bars of output throughput per workload, eager and compiled, with the ratio on top."""
    if ratios.empty:
        return _empty(title)
    fig = go.Figure()
    fig.add_trace(go.Bar(x=ratios["workload"], y=ratios["eager_tok_s"], name="eager (enforce_eager: true)"))
    fig.add_trace(
        go.Bar(
            x=ratios["workload"],
            y=ratios["compiled_tok_s"],
            name="compiled (enforce_eager: false)",
            text=[f"x{r:.2f}" for r in ratios["ratio"]],
            textposition="outside",
        )
    )
    fig.update_layout(barmode="group", title=title, yaxis_title="output tokens/s", xaxis_title="prompt lengths")
    return fig
