"""Small notebook-facing helpers that would otherwise be logic inside notebook cells."""

from __future__ import annotations

from pathlib import Path

from workbench.settings import run_dir
from workbench.sweep.spec import SweepSpec


def output_dir(spec: SweepSpec, out_dir: str | Path = "", resume: bool = True) -> Path:
    """Where a sweep writes: `out_dir` if given, else runs/sweeps/<name>; runs/sweeps/<name>-<stamp> if not resuming.

    Resuming (the default) means re-running the notebook reads the points already measured instead of
    measuring them again.
    """
    if out_dir:
        return Path(out_dir)
    return run_dir("sweeps", spec.name, fresh=not resume)
