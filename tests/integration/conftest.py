"""Integration fixtures: one real vLLM CPU server on the tiny model, shared by the whole session.

Every server these tests launch carries a per-session marker in its environment; at the end of the
session no process with that marker may be alive (API server, EngineCore and workers alike), whatever
the tests did to them.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from workbench.recipes import ServingRecipe, load_serving_recipe
from workbench.serving.pool import EnginePool
from workbench.serving.server import Server, launch
from workbench.settings import REPO_ROOT

MARKER_VAR = "ASCEND_WORKBENCH_TEST_SESSION"
# A test's own servers carry a case marker too, so it can wait for exactly them while the session's shared
# tiny server (carrying only the session's) is up beside them.
CASE_VAR = "ASCEND_WORKBENCH_TEST_CASE"


def processes_with_marker(marker: str, variable: str = MARKER_VAR) -> list[int]:
    """Live processes whose environment holds variable=marker (environ is inherited by children)."""
    needle = f"{variable}={marker}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def orphaned_vllm_processes(root: Path = REPO_ROOT) -> list[int]:
    """vLLM processes (they rename themselves "VLLM::...") working in `root` whose parent is gone.

    A renamed process's /proc/PID/environ no longer shows the marker (setproctitle overwrites that
    block), so an EngineCore whose API server died is invisible to `processes_with_marker`; an orphan
    is what such a leak looks like (a live server's EngineCore has its API server as parent)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if not (entry / "cmdline").read_bytes().startswith(b"VLLM::"):
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[1]) == 1 and cwd.is_relative_to(root):
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="session")
def session_marker() -> Iterator[str]:
    marker = uuid.uuid4().hex
    yield marker
    assert processes_with_marker(marker) == [], "a vLLM process launched by the integration tests is still running"
    deadline = time.monotonic() + 30  # a group being stopped right now can leave an orphan for a moment
    while orphaned_vllm_processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert orphaned_vllm_processes() == [], "an orphaned vLLM process (its API server gone) is still running"


@pytest.fixture(scope="session", autouse=True)
def engine_pool(session_marker: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EnginePool]:
    """One engine pool for the session: every launch of the same configuration shares one server (tests that
    need a server of their own launch with pooled=False). It closes before the marker check runs."""
    with EnginePool.open(tmp_path_factory.mktemp("engine-pool")) as pool:
        yield pool


@pytest.fixture(scope="session")
def server_env(session_marker: str) -> dict[str, str]:
    """extra_env for every launch in these tests."""
    return {MARKER_VAR: session_marker}


@pytest.fixture(scope="session")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("server-logs")


@pytest.fixture(scope="session")
def tiny_recipe() -> ServingRecipe:
    return load_serving_recipe("cpu-tiny")


@pytest.fixture(scope="session")
def tiny_server(tiny_recipe: ServingRecipe, server_env: dict[str, str], log_dir: Path) -> Iterator[Server]:
    with launch(tiny_recipe, extra_env=server_env, log_dir=log_dir, progress=False) as server:
        yield server
