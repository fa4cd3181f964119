"""Every server start, recorded: what was started, by whom, and how long it took to answer /health.

Server starts are most of the main job's and the test suite's time (a vLLM CPU server is ~30-45 s of
mostly single-threaded imports and engine start-up on 2 cores), so the run report and the test session
show them: which notebook or test started which configuration, and how long each took to be ready.
A process records its starts (and its children's: the variable is inherited) when
ASCEND_WORKBENCH_SERVER_STARTS names a file (`workbench.settings`); without it nothing is written.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workbench import settings
from workbench.results.jsonl import JsonlLog


@dataclass(frozen=True)
class ServerStart:
    """One start. `ready_s`: from launching the process to the first 200 from /health."""

    recipe: str
    configuration: str  # the launch fingerprint (workbench.serving.server.LaunchPlan.fingerprint)
    ready_s: float
    started_by: str | None  # a notebook file name or a test id (ASCEND_WORKBENCH_STARTED_BY)
    tensor_parallel_size: int
    in_process_worker: bool  # the worker ran inside the EngineCore (VLLM_ENABLE_V1_MULTIPROCESSING=0)
    at: float  # epoch seconds when it became ready (or was leased)
    reused: bool = False  # leased from the engine pool, already running: `ready_s` is 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServerStart:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def record_start(
    recipe: str, configuration: str, ready_s: float, tensor_parallel_size: int, in_process_worker: bool
) -> ServerStart | None:
    """Append one start to the file named by ASCEND_WORKBENCH_SERVER_STARTS (None when it is not set)."""
    path = settings.server_starts_file()
    if path is None:
        return None
    start = ServerStart(
        recipe,
        configuration,
        round(ready_s, 2),
        settings.started_by(),
        tensor_parallel_size,
        in_process_worker,
        time.time(),
    )
    JsonlLog(path, fsync=False).append(start.to_dict())  # a report of timings, not a measured result
    return start


def record_lease(record: Any) -> ServerStart | None:
    """Record a lease of a running pooled server (a `workbench.serving.pool.PoolRecord`) as a start of 0 s."""
    path = settings.server_starts_file()
    if path is None:
        return None
    start = ServerStart(
        record.recipe,
        record.fingerprint,
        0.0,
        settings.started_by(),
        record.tensor_parallel_size,
        record.in_process_worker,
        time.time(),
        reused=True,
    )
    JsonlLog(path, fsync=False).append(start.to_dict())
    return start


def read_starts(path: Path) -> list[ServerStart]:
    return list(JsonlLog(path).read(ServerStart.from_dict).records)
