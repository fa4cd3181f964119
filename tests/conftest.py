"""Suite-wide settings: `npu`-marked tests skip unless an Ascend NPU is usable here."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "tests" / "fixtures"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from ascend_backend.device import npu_status

    status = npu_status()
    if status.available:
        return
    skip = pytest.mark.skip(reason=f"needs an Ascend NPU: {status.kind.value} ({status.detail})")
    for item in items:
        if "npu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def notebook_run(tmp_path_factory: pytest.TempPathFactory):
    """Every notebook executed once, headless, by the main job's own runner (what `make run` does):
    the notebooks tier asserts each passed, the browser tier opens the report pages it wrote."""
    import os

    from workbench import settings
    from workbench.notebook_runner import discover, run_notebooks

    # The kernels' results and stored baselines go to the session's folders, not the user's.
    private = {"ASCEND_WORKBENCH_RUNS": tmp_path_factory.mktemp("runs"), "ASCEND_WORKBENCH_DATA": tmp_path_factory.mktemp("data")}
    saved = {name: os.environ.get(name) for name in private}
    os.environ.update({name: str(path) for name, path in private.items()})
    try:
        run_dir = settings.run_dir("notebooks", fresh=True)
        return run_notebooks(discover(settings.notebooks_dir()), run_dir, cwd=REPO_ROOT, progress=False,
                             cell_timeout_s=900)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
