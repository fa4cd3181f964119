"""The report `make run` writes shows every chart in a real browser, offline, with no page errors."""

from __future__ import annotations

import nbformat
import pytest

from workbench.run.html import PLOT_CLASS, chart_outputs

pytestmark = pytest.mark.browser

# Every plot div is drawn by plotly.js (it adds the class js-plotly-plot and an SVG root).
DRAWN = f"() => [...document.querySelectorAll('div.{PLOT_CLASS}.js-plotly-plot')].filter(d => d.querySelector('svg.main-svg')).length"


def _errors_of(page) -> list[str]:
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    page.on("console", lambda msg: errors.append(f"console: {msg.text}") if msg.type == "error" else None)
    return errors


def test_index_links_every_notebook(notebook_run, browser):
    page = browser.new_page()
    errors = _errors_of(page)
    page.goto((notebook_run.run_dir / "index.html").as_uri())
    links = page.eval_on_selector_all("table a[href$='.html']", "els => els.map(e => e.getAttribute('href'))")
    assert links == [o.html for o in notebook_run.outcomes]
    assert errors == []
    page.close()


def test_every_page_draws_every_chart(notebook_run, browser):
    shots = notebook_run.run_dir / "screenshots"
    shots.mkdir(exist_ok=True)
    total = 0
    for outcome in notebook_run.outcomes:
        expected = len(chart_outputs(nbformat.read(notebook_run.run_dir / outcome.executed, as_version=4)))
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors = _errors_of(page)
        page.goto((notebook_run.run_dir / outcome.html).as_uri())
        page.wait_for_load_state("load")
        if expected:
            page.wait_for_function(f"() => ({DRAWN})() >= {expected}", timeout=30_000)
        assert (
            page.evaluate(DRAWN)
            == expected
            == page.evaluate(f"() => document.querySelectorAll('div.{PLOT_CLASS}').length")
        )
        assert "is not able to be represented" not in page.content()
        page.screenshot(path=str(shots / f"{outcome.notebook}.png"), full_page=True)
        assert errors == [], f"{outcome.html}: {errors}"
        total += expected
        page.close()
    assert total > 0, "no notebook produced a chart: the test would prove nothing"
