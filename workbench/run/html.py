"""Executed notebook -> an HTML page that shows its charts offline.

nbconvert cannot render plotly's own output type (`application/vnd.plotly.v1+json`): it logs "Your
element with mimetype(s) ... is not able to be represented" and leaves the cell blank, and its page
loads require.js and MathJax from a CDN that CI machines and most Ascend hosts cannot reach. So each
plotly output gets an HTML representation that draws the same figure with plotly.js, the CDN scripts
are dropped, and one copy of plotly.js (from the installed plotly package) is shipped in the run
directory and loaded by every page:

    runs/<ts>/plotly.min.js
    runs/<ts>/04_compare_ops.html   <script src="plotly.min.js"> ... <div class="wb-plot"> ...

Every chart output becomes exactly one `div.wb-plot`; the browser test counts them against the
rendered plots.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

PLOTLY_MIME = "application/vnd.plotly.v1+json"
PLOTLY_JS = "plotly.min.js"
PLOT_CLASS = "wb-plot"
# CDN scripts nbconvert's template adds; offline they only fail (require.js is for widget JS we do not
# ship, MathJax for LaTeX our notebooks do not use) ...
_CDN_SCRIPT = re.compile(r'<script[^>]+src="https?://[^"]+"[^>]*>\s*</script>', re.IGNORECASE)
# ... and a loader that fetches ipywidgets' HTML manager from unpkg at page load. The headless run draws
# widgets' default views as static output, so the live manager has nothing to add offline.
_WIDGET_LOADER = re.compile(r"<script>\s*\(function\(\) \{\s*function addWidgetsRenderer\(\).*?</script>", re.DOTALL)


def chart_outputs(nb: Any) -> list[dict[str, Any]]:
    """Every plotly figure output of an executed notebook (nbformat node), in page order."""
    return [
        output
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if PLOTLY_MIME in output.get("data", {})
    ]


def _figure_html(figure: dict[str, Any], index: int) -> str:
    """A div and the script that draws `figure` into it with the page's plotly.js."""
    div_id = f"{PLOT_CLASS}-{index}"
    height = (figure.get("layout") or {}).get("height") or 450
    payload = json.dumps(
        {"data": figure.get("data", []), "layout": figure.get("layout", {}), "config": figure.get("config", {})}
    ).replace("</", "<\\/")  # a '</script>' inside a label must not end the script element
    return (
        f'<div id="{div_id}" class="{PLOT_CLASS}" style="height:{int(height)}px;width:100%"></div>'
        f"<script>(function(){{var f={payload};"
        f'Plotly.newPlot("{div_id}",f.data,f.layout,Object.assign({{responsive:true}},f.config));}})();</script>'
    )


def add_chart_html(nb: Any) -> int:
    """Give every plotly output an HTML form nbconvert can show; returns how many charts there are."""
    charts = chart_outputs(nb)
    for index, output in enumerate(charts):
        output["data"]["text/html"] = _figure_html(output["data"][PLOTLY_MIME], index)
    return len(charts)


def ship_plotly_js(run_dir: Path) -> Path:
    """Copy the installed plotly package's plotly.js into `run_dir` once (pages load it from there)."""
    import plotly

    target = run_dir / PLOTLY_JS
    if not target.exists():
        shutil.copyfile(Path(plotly.__file__).parent / "package_data" / PLOTLY_JS, target)
    return target


def notebook_to_html(executed: Path) -> Path:
    """Write `<executed>.html` next to the executed notebook, charts and all; returns its path."""
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(executed, as_version=4)
    charts = add_chart_html(nb)
    body, _resources = HTMLExporter().from_notebook_node(nb)
    body = _WIDGET_LOADER.sub("", _CDN_SCRIPT.sub("", body))
    if charts:
        ship_plotly_js(executed.parent)
        body = re.sub(r"(<head[^>]*>)", rf'\1<script src="{PLOTLY_JS}"></script>', body, count=1)
    target = executed.with_suffix(".html")
    target.write_text(body, encoding="utf-8")
    return target
