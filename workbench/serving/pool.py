"""The engine pool: a server for one launch configuration is started once and leased to every notebook
and test that asks for the same configuration, then stopped when the run or the test session ends.

Why: most of the main job's and the suite's time is vLLM servers starting (~30-45 s each on 2 cores), and
several notebooks and tests start the very same server. A lease changes nothing a caller measures: it is
the same command and environment (`LaunchPlan.fingerprint` decides), on an idle server.

    with EnginePool.open(directory) as pool:       # the owner: the main job's runner, a test session
        ...                                         # every launch() below it, in this process or in a
                                                    # child (a notebook kernel), leases from the pool
    # here every pooled server has been stopped

The pool is a folder (named by ASCEND_WORKBENCH_ENGINE_POOL, which children inherit) holding one record
per running server (`<fingerprint>.json`: URL, served model, pid, seconds it took to start) and a lock per
configuration, so two processes asking for the same one at once start it once. Guarantees:

- never left behind: the owner's orphan guard marks every pooled server, so if the owner is killed
  (SIGKILL included) the guard stops them; a normal close stops them itself;
- never shared when configurations differ: the fingerprint is the whole command line and environment;
- few idle servers: a waiting server holds memory (device memory on an accelerator), so starting a new
  configuration first stops the pooled servers nobody holds beyond the launcher's budget (`make_room`).

A leased `Server` does not own its process: leaving its `with` block ends the lease, not the server.
Callers whose measurement needs a fresh process (a dump counting steps from the start, a profiling
window, a start-up time, a server a test kills) launch with `pooled=False`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workbench import settings
from workbench.errors import WorkbenchError
from workbench.results.files import exclusive_lock, write_json
from workbench.serving.processes import TERM_GRACE_S, alive, live_processes
from workbench.serving.reaper import REAPER_VAR, OrphanReaper

POOL_ENV = "ASCEND_WORKBENCH_ENGINE_POOL"  # read by workbench.settings.engine_pool_dir
OWNER_FILE = "owner.json"  # {"pid": ..., "guard": REAPER_VAR=token for the pooled servers}


@dataclass(frozen=True)
class PoolRecord:
    """One pooled server, as its `<fingerprint>.json` holds it."""

    fingerprint: str
    recipe: str
    url: str
    model: str
    pid: int  # the API server; it leads its own process group (start_new_session)
    ready_s: float
    log_path: str
    tensor_parallel_size: int = 1
    in_process_worker: bool = False
    holders: tuple[int, ...] = ()  # pids of the processes holding a lease now
    extra_pids: tuple[int, ...] = ()  # a cluster's other nodes, each leading its own group (serving.cluster)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"holders": list(self.holders), "extra_pids": list(self.extra_pids)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PoolRecord:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(
            **known | {"holders": tuple(known.get("holders", ())), "extra_pids": tuple(known.get("extra_pids", ()))}
        )


class EnginePool:
    """A pool folder. `open()` makes this process its owner; any process may `lease()` from it."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    def __repr__(self) -> str:
        return f"EnginePool({self.directory})"

    # -- the owner -----------------------------------------------------------------------------------
    @classmethod
    @contextlib.contextmanager
    def open(cls, directory: Path) -> Iterator[EnginePool]:
        """Own a pool for the `with` block: children inherit it; on exit every pooled server is stopped."""
        pool = cls(directory)
        pool.directory.mkdir(parents=True, exist_ok=True)
        guard = OrphanReaper()
        write_json(pool.directory / OWNER_FILE, {"pid": os.getpid(), "guard": guard.token})
        previous = os.environ.get(POOL_ENV)
        os.environ[POOL_ENV] = str(pool.directory)
        try:
            yield pool
        finally:
            if previous is None:
                os.environ.pop(POOL_ENV, None)
            else:
                os.environ[POOL_ENV] = previous
            pool.stop_all()
            guard.release()

    def guard_env(self) -> dict[str, str]:
        """The owner's orphan-guard mark, for a pooled server's environment."""
        try:
            owner = json.loads((self.directory / OWNER_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise WorkbenchError(
                f"engine pool {self.directory} has no owner ({exc}); unset {POOL_ENV} or open the pool with "
                "EnginePool.open (the main job and the test session do)"
            ) from None
        return {REAPER_VAR: owner["guard"]}

    def stop_all(self) -> list[PoolRecord]:
        """Stop every pooled server (its whole process group) and forget it."""
        stopped = []
        for record in self.records():
            with exclusive_lock(self._lock_path(record.fingerprint)):
                _stop_record(record)
                self._record_path(record.fingerprint).unlink(missing_ok=True)
            stopped.append(record)
        return stopped

    # -- leases --------------------------------------------------------------------------------------
    def records(self) -> list[PoolRecord]:
        found = []
        for path in sorted(self.directory.glob("*.json")):
            if path.name == OWNER_FILE:
                continue
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                found.append(PoolRecord.from_dict(json.loads(path.read_text(encoding="utf-8"))))
        return found

    @contextlib.contextmanager
    def holding(self, fingerprint: str) -> Iterator[PoolRecord | None]:
        """The live record of `fingerprint` under its lock (None when there is none), stale ones removed."""
        with exclusive_lock(self._lock_path(fingerprint)):
            record = self._read(fingerprint)
            if record is not None and not alive(record.pid):
                self._record_path(fingerprint).unlink(missing_ok=True)
                record = None
            yield record

    def add(self, record: PoolRecord) -> None:
        """Record a server this process just started for the pool (call inside `holding`)."""
        write_json(self._record_path(record.fingerprint), record.to_dict())

    def take(self, record: PoolRecord) -> PoolRecord:
        """Mark this process as holding `record` (call inside `holding`)."""
        holders = tuple(p for p in record.holders if alive(p) and p != os.getpid()) + (os.getpid(),)
        taken = PoolRecord(**{**asdict(record), "holders": holders})
        self.add(taken)
        return taken

    def give_back(self, fingerprint: str) -> None:
        """End this process's lease on `fingerprint` (the server keeps running for the next lease)."""
        with exclusive_lock(self._lock_path(fingerprint)):
            record = self._read(fingerprint)
            if record is not None:
                self.add(
                    PoolRecord(**{**asdict(record), "holders": tuple(p for p in record.holders if p != os.getpid())})
                )

    def retire(self, fingerprint: str) -> None:
        """Stop the pooled server of `fingerprint` and forget it, whoever holds it: it is unusable (hung)
        and must not be leased again."""
        with exclusive_lock(self._lock_path(fingerprint)):
            record = self._read(fingerprint)
            if record is not None:
                _stop_record(record)
                self._record_path(fingerprint).unlink(missing_ok=True)

    def make_room(self, keep: str, others: int = 0) -> list[PoolRecord]:
        """Before `keep` starts: stop the idle pooled servers (no live holder) beyond `others`, oldest first."""
        idle = [r for r in self.records() if r.fingerprint != keep and not any(alive(p) for p in r.holders)]
        idle.sort(key=lambda r: self._record_path(r.fingerprint).stat().st_mtime)  # last leased last
        stopped = []
        for record in idle[: max(0, len(idle) - others)]:
            with exclusive_lock(self._lock_path(record.fingerprint)):
                current = self._read(record.fingerprint)
                if current is not None and not any(alive(p) for p in current.holders):
                    _stop_record(current)
                    self._record_path(current.fingerprint).unlink(missing_ok=True)
                    stopped.append(current)
        return stopped

    def _read(self, fingerprint: str) -> PoolRecord | None:
        try:
            return PoolRecord.from_dict(json.loads(self._record_path(fingerprint).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _record_path(self, fingerprint: str) -> Path:
        return self.directory / f"{fingerprint}.json"

    def _lock_path(self, fingerprint: str) -> Path:
        return self.directory / f".{fingerprint}.lock"


def active_pool() -> EnginePool | None:
    """The pool this process leases from (ASCEND_WORKBENCH_ENGINE_POOL), or None."""
    directory = settings.engine_pool_dir()
    return EnginePool(directory) if directory is not None else None


def _stop_record(record: PoolRecord) -> None:
    """Stop a pooled server's group, and every other node's group of a pooled cluster."""
    for pgid in (*record.extra_pids, record.pid):
        _stop_group(pgid)


def _stop_group(pgid: int, grace_s: float = TERM_GRACE_S) -> None:
    """SIGTERM a pooled server's process group, wait for it to empty, SIGKILL what is left.

    The pool's owner is not the server's parent (a notebook kernel may have started it), so it cannot
    wait() for it: it watches the group in /proc instead (a zombie left for its parent counts as gone).
    """
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        if not live_processes(pgid):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + wait_s
        while live_processes(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
