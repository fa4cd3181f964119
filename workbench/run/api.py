"""The main-job API: what `ascend-workbench run` (and `make run`) calls.

report = run_main_job(RunRequest(jobs=2))      # every notebook, headless, into runs/notebooks/<stamp>/
report.ok; report.failures(); report.run_dir / "index.html"
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench import settings
from workbench.errors import WorkbenchError
from workbench.run.runner import DEFAULT_CELL_TIMEOUT_S, RunReport, discover, run_notebooks

__all__ = ["DEFAULT_CELL_TIMEOUT_S", "RunReport", "RunRequest", "default_jobs", "discover", "run_main_job"]


def default_jobs() -> int:
    """Notebooks at once: two where there are two cores or more (a lane mostly waits on one core), else one."""
    return 2 if len(os.sched_getaffinity(0)) >= 2 else 1


@dataclass(frozen=True)
class RunRequest:
    """notebooks   the notebook folder (default notebooks/)
    out         the runs root; the report goes to OUT/notebooks/<UTC stamp>/ (default runs/)
    only        run only the notebooks whose name contains one of these
    parameters  notebook parameters, applied to every notebook that declares them
    cell_timeout_s  a cell running longer fails its notebook; None = no limit
    jobs        notebooks at once"""

    notebooks: Path | None = None
    out: Path | None = None
    only: tuple[str, ...] = ()
    parameters: dict[str, Any] = field(default_factory=dict)
    kernel: str = "python3"
    cell_timeout_s: float | None = DEFAULT_CELL_TIMEOUT_S
    jobs: int = field(default_factory=default_jobs)

    def __post_init__(self) -> None:
        if self.cell_timeout_s is not None and self.cell_timeout_s <= 0:
            raise WorkbenchError(f"--cell-timeout {self.cell_timeout_s:g}: give a number of seconds, or 0 for no limit")
        if self.jobs < 1:
            raise WorkbenchError(f"--jobs {self.jobs}: give 1 or more notebooks to run at once")


def run_main_job(request: RunRequest, *, progress: bool = True, on_start=None) -> RunReport:
    """Discover, then execute every notebook into a fresh run folder; `on_start(paths, run_dir)` is told first."""
    notebooks = discover(request.notebooks or settings.notebooks_dir(), request.only)
    run_dir = settings.run_dir("notebooks", fresh=True, root=request.out)
    if on_start is not None:
        on_start(notebooks, run_dir)
    return run_notebooks(
        notebooks,
        run_dir,
        request.parameters,
        request.kernel,
        cwd=settings.REPO_ROOT,
        progress=progress,
        cell_timeout_s=request.cell_timeout_s,
        jobs=request.jobs,
    )
