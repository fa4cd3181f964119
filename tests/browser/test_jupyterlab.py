"""A guided session for real: JupyterLab on 127.0.0.1 (random port, token), notebooks run cell by cell in
headless Chromium, widgets and plots render, no cell errors. Screenshots land in runs/browser/.

The notebooks run from a copy of notebooks/ (JupyterLab saves outputs into the files it runs), with the
kernel's working directory in that copy — as in a real session, where it is notebooks/ and not the
project root — and interactive widgets (ASCEND_WORKBENCH_HEADLESS unset). The session writes into the
runs/ and data folders of the headless run (`notebook_run`), as a user reopening a notebook after
`make run` does: the sweep resumes the points that run stored instead of starting its servers again.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO_ROOT
from workbench import settings
from workbench.serving.processes import stop_process_group
from workbench.serving.reaper import OrphanReaper
from workbench.serving.server import free_port

pytestmark = pytest.mark.browser

# The overview (tables, markdown), the op suite (heatmap, choice widget) and the sweep (servers, widgets,
# charts): what a first guided session opens.
SESSION_NOTEBOOKS = ("01_kernels", "04_compare_ops", "07_sweep")
ALL_EXECUTED = """() => {
  const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')];
  return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
}"""
KERNEL_IDLE = "() => !!document.querySelector('.jp-Notebook') && !document.querySelector('.jp-mod-busy')"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, notebook_run) -> Iterator[tuple[str, str, Path]]:
    """A JupyterLab server on a copy of the notebooks; yields (base URL, token, workspace)."""
    workspace = tmp_path_factory.mktemp("lab")
    shutil.copytree(REPO_ROOT / "notebooks", workspace / "notebooks")
    state = tmp_path_factory.mktemp("lab-state")
    # JupyterLab 4 renders only the cells in view ("windowing"): the plots and widgets of a scrolled-away
    # cell would not be in the page to count. Render every cell, and do not ask about news.
    for plugin, settings_json in (
        ("notebook-extension/tracker", '{"windowingMode": "none"}'),
        ("apputils-extension/notification", '{"fetchNews": "false"}'),
    ):
        path = state / "settings" / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(settings_json)
    port, token = free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k != "ASCEND_WORKBENCH_HEADLESS"}
    env.update(JUPYTER_RUNTIME_DIR=str(state / "rt"), **notebook_run.private_dirs)
    argv = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={workspace}",
        "--ServerApp.allow_root=True",  # CI containers run as root
        f"--LabApp.workspaces_dir={state / 'workspaces'}",
        f"--LabApp.user_settings_dir={state / 'settings'}",
    ]
    log = (state / "jupyterlab.log").open("w")
    guard = OrphanReaper()  # JupyterLab and its kernels go even if this test process is killed
    process = subprocess.Popen(
        argv, env={**env, **guard.env()}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/api/status", params={"token": token}, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None, (state / "jupyterlab.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "JupyterLab did not answer within 120 s"
            time.sleep(0.5)
        yield base, token, workspace
    finally:
        stop_process_group(process)
        guard.release()
        log.close()


def _choose_kernel_if_asked(page) -> None:
    """A fresh JupyterLab asks which kernel to start for a notebook it has not seen: the default one."""
    dialog = page.locator(".jp-Dialog").filter(has_text="Select Kernel")
    try:
        dialog.wait_for(state="visible", timeout=15_000)
    except Exception:  # noqa: BLE001 - no dialog: the kernel started on its own
        return
    dialog.get_by_role("button", name="Select").click()


def _run_all_cells(page) -> None:
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()


def _saved_errors(path: Path) -> list[str]:
    nb = json.loads(path.read_text())
    return [
        f"cell {i}: {o.get('ename')}: {o.get('evalue')}"
        for i, cell in enumerate(nb["cells"])
        for o in cell.get("outputs", [])
        if o.get("output_type") == "error"
    ]


@pytest.mark.parametrize("name", SESSION_NOTEBOOKS)
def test_notebook_runs_in_jupyterlab(lab, browser, name):
    base, token, workspace = lab
    shots = settings.run_dir("browser", "jupyterlab")
    shots.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page_errors: list[str] = []
    page.on("pageerror", lambda exc: page_errors.append(str(exc)))
    # A workspace of its own, reset: otherwise JupyterLab restores the previous test's notebook beside this
    # one, and "Run All Cells" may run whichever of the two is active.
    page.goto(f"{base}/lab/workspaces/{name}/tree/notebooks/{name}.ipynb?reset&token={token}")
    page.wait_for_function(KERNEL_IDLE, timeout=120_000)
    _choose_kernel_if_asked(page)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
    _run_all_cells(page)
    page.wait_for_function(ALL_EXECUTED, timeout=900_000, polling=1000)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
    page.keyboard.press("Control+s")
    time.sleep(2)  # the save round trip
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)

    text = page.inner_text(".jp-Notebook")
    assert "Error displaying widget" not in text
    assert _saved_errors(workspace / "notebooks" / f"{name}.ipynb") == []
    widgets = page.locator(".jp-OutputArea-output .widget-box, .jp-OutputArea-output .jupyter-widgets").count()
    # jupyterlab-plotly draws into the output node itself; a FigureWidget draws inside the widget's box
    plots = page.locator(".jp-OutputArea-output.js-plotly-plot, .jp-OutputArea-output .js-plotly-plot").count()
    if name == "04_compare_ops":
        assert plots >= 1 and widgets >= 1, (plots, widgets)
    if name == "07_sweep":
        assert plots >= 1, plots
    assert page_errors == []
    page.close()
