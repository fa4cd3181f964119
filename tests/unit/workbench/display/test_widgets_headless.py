"""Panels give controls in interactive sessions and their default view as plain output when headless."""

from __future__ import annotations

import ipywidgets
from IPython.display import HTML

from workbench.display import widgets


def test_choice_panel_is_a_widget_interactively_and_the_default_view_headless(monkeypatch):
    options = [("one", 1), ("two", 2)]
    monkeypatch.delenv(widgets.HEADLESS_ENV, raising=False)
    assert isinstance(widgets.choice_panel("n", options, lambda v: f"view {v}", default=2), ipywidgets.VBox)
    monkeypatch.setenv(widgets.HEADLESS_ENV, "1")
    assert widgets.choice_panel("n", options, lambda v: f"view {v}", default=2) == "view 2"
    assert widgets.choice_panel("n", options, lambda v: f"view {v}", default=9) == "view 1"  # unknown default


def test_feature_toggles_headless_lists_the_selection_and_reads_it_back(monkeypatch):
    monkeypatch.setenv(widgets.HEADLESS_ENV, "1")
    panel, read = widgets.feature_toggles(["a", "b<c", "d"], ["d", "b<c"])
    assert isinstance(panel, HTML) and "b&lt;c" in panel.data
    assert read() == ["b<c", "d"]  # plan order, not selection order
    monkeypatch.delenv(widgets.HEADLESS_ENV)
    panel, read = widgets.feature_toggles(["a", "b"], ["b"])
    assert isinstance(panel, ipywidgets.VBox) and read() == ["b"]
