"""The workbench's own environment variables and default locations, read in one place.

ASCEND_WORKBENCH_CACHE  where prepared models and other derived artefacts live
                        (default ~/.cache/ascend-workbench; safe to delete, rebuilt on demand)
ASCEND_WORKBENCH_DATA   what the workbench keeps on purpose: stored baselines for `regress`
                        (default ~/.local/share/ascend-workbench; not a cache: do not delete casually)
ASCEND_WORKBENCH_IMAGE  the container image this process runs in (name@sha256:digest), for the stack
                        fingerprint; docker does not tell a container its image, so set it in the
                        image (ENV) or the entrypoint
ASCEND_WORKBENCH_RUNS   where results of runs go: the main job's report, sweeps, bisects, dumps, server logs
                        (default: the project's runs/ in a source checkout — also when a notebook runs
                        in JupyterLab, whose working directory is notebooks/ — else ./runs)
ASCEND_WORKBENCH_ASCEND_ROOT
                        the Ascend install root the pre-flight inspects (default /usr/local/Ascend);
                        read by workbench.check from its environment snapshot so tests can point
                        the checks at fake trees
ASCEND_WORKBENCH_SERVER_STARTS
                        a JSON-lines file every server start of this process and its children is
                        recorded in (configuration, seconds to ready, who started it); set by the main
                        job and the test session, which report them
ASCEND_WORKBENCH_STARTED_BY
                        who is starting servers now (a notebook's file name, a test's id), for that record
ASCEND_WORKBENCH_ENGINE_POOL
                        the engine pool folder launches lease servers from (workbench.serving.pool); set
                        by the pool's owner (the main job, a test session) for itself and its children
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    return Path(os.environ.get("ASCEND_WORKBENCH_CACHE") or Path.home() / ".cache" / "ascend-workbench")


def embedded_model_dir(name: str) -> Path:
    """`<cache>/models/<name>`: where embedded model `name` is prepared (whether or not it is built yet)."""
    return cache_dir() / "models" / name


def data_dir() -> Path:
    return Path(os.environ.get("ASCEND_WORKBENCH_DATA") or Path.home() / ".local" / "share" / "ascend-workbench")


def container_image() -> str | None:
    return os.environ.get("ASCEND_WORKBENCH_IMAGE") or None


def runs_dir() -> Path:
    if os.environ.get("ASCEND_WORKBENCH_RUNS"):
        return Path(os.environ["ASCEND_WORKBENCH_RUNS"])
    in_checkout = (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "notebooks").is_dir()
    return REPO_ROOT / "runs" if in_checkout else Path.cwd() / "runs"


def server_starts_file() -> Path | None:
    value = os.environ.get("ASCEND_WORKBENCH_SERVER_STARTS")
    return Path(value) if value else None


def engine_pool_dir() -> Path | None:
    value = os.environ.get("ASCEND_WORKBENCH_ENGINE_POOL")
    return Path(value) if value else None


def started_by() -> str | None:
    return os.environ.get("ASCEND_WORKBENCH_STARTED_BY") or None


def utc_stamp() -> str:
    """'20261201T153000Z': the one timestamp in names of run folders and log files (sorts by time)."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def run_dir(kind: str, name: str | None = None, *, fresh: bool = False, root: Path | None = None) -> Path:
    """The one naming rule for folders under runs/:

        runs/<kind>/<name>            a named job (a sweep spec, a bisect of a recipe): rerunning resumes it
        runs/<kind>/<name>-<stamp>    fresh=True: a new folder each time (created here, so two runs
        runs/<kind>/<stamp>           started in the same second still get distinct ones: '-1', '-2')
        runs/<kind>                   no name and not fresh: one shared folder (e.g. repros)

    Named and shared folders are returned, not created; fresh ones are created. `root` replaces runs/.
    """
    base = (root or runs_dir()) / kind
    if not fresh:
        return base / name if name else base
    stem = f"{name}-{utc_stamp()}" if name else utc_stamp()
    candidate, suffix = base / stem, 1
    base.mkdir(parents=True, exist_ok=True)
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            candidate, suffix = base / f"{stem}-{suffix}", suffix + 1


def notebooks_dir() -> Path:
    return REPO_ROOT / "notebooks"


def recipes_dir() -> Path:
    """What to run: serving recipes, sweep specs, feature plans, op suites, version matrices."""
    return REPO_ROOT / "recipes"


def policy_dir() -> Path:
    """How results are judged and explained: thresholds, the CUDA mapping, the error-code knowledge base."""
    return REPO_ROOT / "policy"
