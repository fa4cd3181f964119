"""ipywidgets panels: controls bound to pure render functions.

Interactive sessions get controls; every panel shows its default selection at once. Headless runs
(`ascend-workbench run` and the notebook tests set ASCEND_WORKBENCH_HEADLESS=1) get that default view
as plain output and no widget at all: nobody can click there, the HTML export cannot show widgets,
and nbclient can block on the widget messages of an output area (jupyter/nbclient#312), which
hung a headless run here once.
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable, Sequence

import ipywidgets as widgets
from IPython.display import HTML, display

HEADLESS_ENV = "ASCEND_WORKBENCH_HEADLESS"


def headless() -> bool:
    """True when the notebook runs without a frontend (set by the runner and the notebook tests)."""
    return os.environ.get(HEADLESS_ENV, "") == "1"


def choice_panel(
    label: str, options: Sequence[tuple[str, object]], render: Callable[[object], object], default: object | None = None
) -> widgets.Widget:
    """A dropdown over `options` ((text, value) pairs) whose output area shows render(value).

    Headless: render(default) itself, for the cell to display.
    """
    values = [value for _, value in options]
    if headless():
        return render(default if default in values else values[0])
    dropdown = widgets.Dropdown(
        options=list(options),
        value=default if default in values else values[0],
        description=label,
        layout={"width": "80%"},
        style={"description_width": "initial"},
    )

    def show(value: object) -> None:
        display(render(value))

    return widgets.VBox([dropdown, widgets.interactive_output(show, {"value": dropdown})])


def feature_toggles(names: Sequence[str], selected: Sequence[str], descriptions: dict[str, str] | None = None):
    """One checkbox per feature; returns (panel, read) where read() gives the checked names in order.

    Headless: the panel is a static list of the selected features, and read() returns them.
    """
    descriptions = descriptions or {}
    if headless():
        chosen = [name for name in names if name in selected]
        items = "".join(f"<li>{html.escape(name)}</li>" for name in chosen)
        return HTML(f"<b>features to bisect</b><ul>{items}</ul>"), lambda: list(chosen)
    boxes = [
        widgets.Checkbox(value=name in selected, description=name, indent=False, tooltip=descriptions.get(name, ""))
        for name in names
    ]
    panel = widgets.VBox([widgets.HTML("<b>features to bisect</b>"), *boxes])

    def read() -> list[str]:
        return [box.description for box in boxes if box.value]

    return panel, read
