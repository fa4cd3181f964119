"""Suite-wide settings: `npu`-marked tests skip unless an Ascend NPU is usable here; every vLLM server the
session starts is recorded (who started it, seconds to ready) and the slowest starts are printed at the end."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

# Before any test module imports torch: the session's first `import torch` goes through the guard of
# torch's autoload of torch_npu, so a torch_npu that cannot load (CANN not sourced, the driver not
# mounted) becomes the `npu` tests' skip reason (the device probe's diagnosis), not a collection error.
import ascend_backend  # noqa: F401

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "tests" / "fixtures"
# The first test that asks for `notebook_run` pays for executing every notebook (pytest-timeout counts
# fixture set-up in the test's time), so those tests get the whole run's budget, not the per-test one.
NOTEBOOK_RUN_TIMEOUT_S = 3600  # a hang guard; each cell has its own timeout in the runner


STARTS_ENV = "ASCEND_WORKBENCH_SERVER_STARTS"  # workbench.settings: where server starts are recorded
STARTED_BY_ENV = "ASCEND_WORKBENCH_STARTED_BY"
SLOWEST_STARTS = 10


def pytest_configure(config: pytest.Config) -> None:
    # Set before xdist starts its workers and before any server: every process of the session inherits it.
    if STARTS_ENV not in os.environ:
        handle, path = tempfile.mkstemp(prefix="server-starts-", suffix=".jsonl")
        os.close(handle)
        os.environ[STARTS_ENV] = path


def pytest_runtest_setup(item: pytest.Item) -> None:
    os.environ[STARTED_BY_ENV] = item.nodeid  # the main job's runner names each notebook while it runs


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """The slowest server starts of this session (pytest's --durations shows the slowest tests)."""
    if hasattr(config, "workerinput"):  # an xdist worker: the controller reports for the session
        return
    from workbench.serving.starts import read_starts

    path = Path(os.environ.get(STARTS_ENV, ""))
    starts = read_starts(path) if path.is_file() else []
    real = [s for s in starts if s.ready_s >= 1.0]  # the unit tier's stand-in servers answer at once
    if not real:
        return
    terminalreporter.section("slowest server starts")
    terminalreporter.write_line(
        f"{len(real)} server starts, {sum(s.ready_s for s in real):.0f} s to ready in all "
        f"({sum(s.in_process_worker for s in real)} engines with the worker in-process)"
    )
    for start in sorted(real, key=lambda s: -s.ready_s)[:SLOWEST_STARTS]:
        mode = "worker in EngineCore" if start.in_process_worker else "worker process"
        terminalreporter.write_line(
            f"{start.ready_s:7.1f}s {start.recipe} TP={start.tensor_parallel_size} {mode} "
            f"[{start.configuration}] {start.started_by}"
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from ascend_backend.platform.device import npu_status

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
        # Notebook 11's module stage runs here whether or not TP=2 diverges (its default skips it when nothing
        # did, to keep the main job under eight minutes): the only check of gathered TP=2 rank dumps end to end.
        report = run_notebooks(
            discover(settings.notebooks_dir()),
            run_dir,
            {"locate_prompt": 0},
            cwd=REPO_ROOT,
            progress=False,
            cell_timeout_s=900,
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
