"""The main-job API: what `ascend-workbench run` (and `make run`) calls."""

from __future__ import annotations

from workbench.run.runner import DEFAULT_CELL_TIMEOUT_S, discover, run_notebooks

__all__ = [
    "DEFAULT_CELL_TIMEOUT_S",
    "discover",
    "run_notebooks",
]
