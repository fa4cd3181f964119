"""ipywidgets panels: controls bound to pure render functions.

Under papermill no callback ever fires, so every panel renders its default selection immediately;
interactive sessions get the same view for whatever the user picks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import ipywidgets as widgets
from IPython.display import display


def choice_panel(label: str, options: Sequence[tuple[str, object]], render: Callable[[object], object],
                 default: object | None = None) -> widgets.Widget:
    """A dropdown over `options` ((text, value) pairs) whose output area shows render(value)."""
    values = [value for _, value in options]
    dropdown = widgets.Dropdown(options=list(options), value=default if default in values else values[0],
                                description=label, layout={"width": "80%"}, style={"description_width": "initial"})

    def show(value: object) -> None:
        display(render(value))

    return widgets.VBox([dropdown, widgets.interactive_output(show, {"value": dropdown})])


def feature_toggles(names: Sequence[str], selected: Sequence[str], descriptions: dict[str, str] | None = None):
    """One checkbox per feature; returns (panel, read) where read() gives the checked names in order."""
    descriptions = descriptions or {}
    boxes = [widgets.Checkbox(value=name in selected, description=name, indent=False,
                              tooltip=descriptions.get(name, "")) for name in names]
    panel = widgets.VBox([widgets.HTML("<b>features to bisect</b>"), *boxes])

    def read() -> list[str]:
        return [box.description for box in boxes if box.value]

    return panel, read
