"""ipywidgets explorer for a sweep report: pick the axes and filter by any swept value.

`select` and `explorer_figure` are pure (report + choices -> table / figure), so the notebook shows
the default view in a plain cell and the widget only re-renders for other choices; under papermill
no callback fires and nothing is lost.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import plotly.graph_objects as go

from workbench.sweep import charts
from workbench.sweep.analysis import param_columns, varying, workload_columns
from workbench.sweep.report import SweepReport

ALL = "(all)"
LATENCY_AXES = ("p99_ttft_ms", "p99_e2el_ms", "p99_tpot_ms", "p50_ttft_ms", "p50_e2el_ms", "mean_ttft_ms")
BENEFIT_AXES = ("output_throughput", "request_throughput", "total_token_throughput", "request_goodput")


def factors(report: SweepReport) -> list[str]:
    """Swept engine arguments and workload columns that take more than one value."""
    configs = report.configs
    return varying(configs, [*param_columns(configs), *workload_columns(configs)]) if not configs.empty else []


def select(frame: pd.DataFrame, selections: Mapping[str, object]) -> pd.DataFrame:
    """Rows whose column equals the selected value for every selection other than ALL (compared as text)."""
    keep = pd.Series(True, index=frame.index)
    for column, value in selections.items():
        if value != ALL:
            keep &= frame[column].astype(str) == str(value)
    return frame[keep]


def explorer_figure(
    report: SweepReport,
    x: str = "p99_ttft_ms",
    y: str = "output_throughput",
    selections: Mapping[str, object] | None = None,
) -> go.Figure:
    """The Pareto scatter of the configurations that match `selections`."""
    return charts.pareto_scatter(select(report.configs, selections or {}), x, y, limits=report.limits)


def explorer(report: SweepReport):
    """Dropdowns for x, y and each factor, bound to `explorer_figure` (interactive sessions).

    Headless (see `workbench.display.widgets.headless`): a note instead, since the default view is the chart above.
    """
    import ipywidgets as widgets
    from IPython.display import Markdown, display

    from workbench.display.widgets import headless

    if headless():
        return Markdown(
            "*Interactive explorer: open this notebook in JupyterLab to pick the axes and filter by each swept value.*"
        )

    configs = report.configs
    xs = [c for c in LATENCY_AXES if c in configs.columns] or ["p99_ttft_ms"]
    ys = [c for c in BENEFIT_AXES if c in configs.columns] or ["output_throughput"]
    controls = {
        "x": widgets.Dropdown(options=xs, value=xs[0], description="x"),
        "y": widgets.Dropdown(options=ys, value=ys[0], description="y"),
    }
    for factor in factors(report):
        values = [ALL, *sorted({str(v) for v in configs[factor]})]
        controls[factor] = widgets.Dropdown(
            options=values, value=ALL, description=factor, style={"description_width": "initial"}
        )

    def show(x: str, y: str, **selections: object) -> None:
        display(explorer_figure(report, x, y, selections))

    return widgets.VBox([widgets.HBox(list(controls.values())), widgets.interactive_output(show, controls)])
