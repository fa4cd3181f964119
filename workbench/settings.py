"""The workbench's own environment variables and default locations, read in one place.

ASCEND_WORKBENCH_CACHE  where prepared models and other derived artefacts live
                        (default ~/.cache/ascend-workbench; safe to delete, rebuilt on demand)
ASCEND_WORKBENCH_DATA   what the workbench keeps on purpose: stored baselines for `regress`
                        (default ~/.local/share/ascend-workbench; not a cache: do not delete casually)
ASCEND_WORKBENCH_IMAGE  the container image this process runs in (name@sha256:digest), for the stack
                        fingerprint; docker does not tell a container its image, so set it in the
                        image (ENV) or the entrypoint
ASCEND_WORKBENCH_RUNS   where `ascend-workbench run` writes executed notebooks (default ./runs)
ASCEND_WORKBENCH_ASCEND_ROOT
                        the Ascend install root the pre-flight inspects (default /usr/local/Ascend);
                        read by workbench.envcheck from its environment snapshot so tests can point
                        the checks at fake trees
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    return Path(os.environ.get("ASCEND_WORKBENCH_CACHE") or Path.home() / ".cache" / "ascend-workbench")


def data_dir() -> Path:
    return Path(os.environ.get("ASCEND_WORKBENCH_DATA") or Path.home() / ".local" / "share" / "ascend-workbench")


def container_image() -> str | None:
    return os.environ.get("ASCEND_WORKBENCH_IMAGE") or None


def runs_dir() -> Path:
    return Path(os.environ.get("ASCEND_WORKBENCH_RUNS") or Path.cwd() / "runs")


def notebooks_dir() -> Path:
    return REPO_ROOT / "notebooks"


def recipes_dir() -> Path:
    return REPO_ROOT / "recipes"
