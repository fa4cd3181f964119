"""Small notebook-facing helpers that would otherwise be logic inside notebook cells."""

from __future__ import annotations

import time
from pathlib import Path

from workbench.settings import runs_dir
from workbench.sweep.spec import SweepSpec


def output_dir(spec: SweepSpec, out_dir: str | Path = "", resume: bool = True) -> Path:
    """Where a sweep writes: `out_dir` if given, else runs/sweeps/<name>; a timestamped sibling if not resuming.

    Resuming (the default) means re-running the notebook reads the points already measured instead of
    measuring them again.
    """
    base = Path(out_dir) if out_dir else runs_dir() / "sweeps" / spec.name
    return base if resume else base.with_name(f"{base.name}-{time.strftime('%Y%m%d-%H%M%S')}")
