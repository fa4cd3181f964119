"""Suite-wide settings: `npu`-marked tests skip unless an Ascend NPU is usable here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "tests" / "fixtures"
# The first test that asks for `notebook_run` pays for executing every notebook (pytest-timeout counts
# fixture set-up in the test's time), so those tests get the whole run's budget, not the per-test one.
NOTEBOOK_RUN_TIMEOUT_S = 2400


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from ascend_backend.npu.device import npu_status

    for item in items:
        if "notebook_run" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(NOTEBOOK_RUN_TIMEOUT_S))

    status = npu_status()
    if status.available:
        return
    skip = pytest.mark.skip(reason=f"needs an Ascend NPU: {status.kind.value} ({status.detail})")
    for item in items:
        # the marker itself, not `"npu" in item.keywords`: keywords also hold the names of the item's
        # folders, and tests/unit/ascend_backend/npu/ is CPU-runnable (contract checks against op-plugin)
        if item.get_closest_marker("npu") is not None:
            item.add_marker(skip)


@dataclass(frozen=True)
class NotebookRun:
    """The headless run's report, and the runs/ and data folders its kernels wrote to (env var -> path)."""

    run_dir: Path
    outcomes: tuple
    private_dirs: dict[str, str]


@pytest.fixture(scope="session")
def notebook_run(tmp_path_factory: pytest.TempPathFactory):
    """Every notebook executed once, headless, by the main job's own runner (what `make run` does):
    the notebooks tier asserts each passed, the browser tier opens the report pages it wrote."""
    import os

    from workbench import settings
    from workbench.run.runner import discover, run_notebooks

    reuse = os.environ.get("ASCEND_WORKBENCH_TEST_NOTEBOOK_RUN")
    if reuse:  # iterate on the browser tier: a finished headless run's folder (runs/notebooks/<stamp>)
        return _finished_run(Path(reuse))
    # The kernels' results and stored baselines go to the session's folders, not the user's.
    private = {
        name: str(tmp_path_factory.mktemp(kind))
        for name, kind in (("ASCEND_WORKBENCH_RUNS", "runs"), ("ASCEND_WORKBENCH_DATA", "data"))
    }
    saved = {name: os.environ.get(name) for name in private}
    os.environ.update(private)
    try:
        run_dir = settings.run_dir("notebooks", fresh=True)
        report = run_notebooks(
            discover(settings.notebooks_dir()), run_dir, cwd=REPO_ROOT, progress=False, cell_timeout_s=900
        )
        return NotebookRun(report.run_dir, report.outcomes, private)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _finished_run(run_dir: Path) -> NotebookRun:
    import json

    from workbench.run.runner import NotebookOutcome

    summary = run_dir / "summary.json"
    if not summary.is_file():
        pytest.fail(
            f"ASCEND_WORKBENCH_TEST_NOTEBOOK_RUN={run_dir}: no summary.json; name a runs/notebooks/<stamp> folder"
        )
    outcomes = tuple(NotebookOutcome(**o) for o in json.loads(summary.read_text())["notebooks"])
    return NotebookRun(run_dir, outcomes, {"ASCEND_WORKBENCH_RUNS": str(run_dir.parent.parent)})
