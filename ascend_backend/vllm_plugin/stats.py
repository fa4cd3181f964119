"""Op call statistics of vLLM processes, written per process and aggregated from outside the server.

Writing (inside every vLLM process that loaded the plugin, when ASCEND_BACKEND_STATS_FILE=<prefix>):
each process writes `<prefix>.<pid>.json` (`REGISTRY.write_stats`: {"pid", "stats": {op: {backend:
calls, "faulted": n}}}) every `interval_s` seconds while its counts change, and once more at exit
with a log line; so a running server can be inspected and a stopped one leaves final numbers.

Why two exit hooks: vLLM's EngineCore and workers are `multiprocessing` children, which leave
through `os._exit` and skip `atexit`; `multiprocessing.util.Finalize` runs there. The API-server
process exits normally (`atexit`). A process that is SIGKILLed keeps its last periodic file.

Why a fork hook: with the default `fork` start method a child inherits the plugin as already loaded
(vLLM does not call it again) but not the writer thread, and it inherits the parent's counters. The
hook restarts the thread in the child and zeroes the counters there, so each call is counted in the
file of the process that made it.

Reading: `read_op_stats(prefix)` sums every `<prefix>.<pid>.json` into an `OpStats`.
"""

from __future__ import annotations

import atexit
import json
import logging
import multiprocessing.util
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ascend_backend.registry import REGISTRY, Backend, OpRegistry

if TYPE_CHECKING:
    import pandas as pd

logger = logging.getLogger("vllm.ascend_backend.stats")

DEFAULT_INTERVAL_S = 1.0


def stats_path(prefix: str | os.PathLike[str], pid: int) -> Path:
    """`<prefix>.<pid>.json`."""
    return Path(f"{os.fspath(prefix)}.{pid}.json")


# ----------------------------------------------------------------------------- writing
class StatsFileWriter:
    """Keeps `<prefix>.<this pid>.json` up to date for one registry (see module docstring)."""

    def __init__(
        self, prefix: str | os.PathLike[str], registry: OpRegistry = REGISTRY, interval_s: float = DEFAULT_INTERVAL_S
    ) -> None:
        self.prefix = os.fspath(prefix)
        self.registry = registry
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._last_written: dict[str, dict[str, int]] | None = None
        self._closed = False
        self._thread: threading.Thread | None = None

    @property
    def path(self) -> Path:
        return stats_path(self.prefix, os.getpid())

    def write(self, *, force: bool = False) -> bool:
        """Write the current counts if they changed since the last write (or `force`); True if written."""
        with self._lock:
            snapshot = self._snapshot()
            if not force and snapshot == self._last_written:
                return False
            Path(self.prefix).parent.mkdir(parents=True, exist_ok=True)
            self.registry.write_stats(self.path)
            self._last_written = snapshot
            return True

    def _snapshot(self) -> dict[str, dict[str, int]]:
        # Another thread may be dispatching ops (adding counter keys) while we copy: retry briefly.
        for _ in range(5):
            try:
                return self.registry.stats()
            except RuntimeError:
                continue
        return self.registry.stats()

    def start(self) -> StatsFileWriter:
        """Start the periodic writer thread and hook process exit and fork."""
        self._start_thread()
        atexit.register(self.close)
        self._register_finalizer()
        # A multiprocessing child clears the finalizer table it inherited, then runs after-fork hooks.
        multiprocessing.util.register_after_fork(self, StatsFileWriter._register_finalizer)
        os.register_at_fork(after_in_child=self._after_fork_in_child)
        return self

    def _register_finalizer(self) -> None:
        multiprocessing.util.Finalize(self, self.close, exitpriority=100)

    def _start_thread(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ascend-backend-stats", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.write()
            except OSError as exc:  # a full disk must not take the server down
                logger.warning("ascend_backend: cannot write op stats to %s: %s", self.path, exc)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()  # the parent's lock may have been held at fork time
        self._last_written = None
        self._closed = False
        self.registry.reset_stats()
        self._start_thread()

    def close(self) -> None:
        """Final write plus one log line with this process's counts; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        try:
            self.write(force=True)
        except OSError as exc:
            logger.warning("ascend_backend: cannot write op stats to %s: %s", self.path, exc)
            return
        logger.info(
            "ascend_backend op calls in pid %d: %s (written to %s)",
            os.getpid(),
            format_counts(self._last_written or {}),
            self.path,
        )


def format_counts(stats: Mapping[str, Mapping[str, int]]) -> str:
    """{'rms_norm': {'native': 3}} -> 'rms_norm native=3'; 'none' when empty."""
    parts = [
        f"{op} " + " ".join(f"{kind}={n}" for kind, n in sorted(counts.items())) for op, counts in sorted(stats.items())
    ]
    return "; ".join(parts) or "none"


# ----------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class ProcessStats:
    pid: int
    path: Path
    stats: Mapping[str, Mapping[str, int]]  # {op: {backend or 'faulted': count}}


@dataclass(frozen=True)
class OpStats:
    """Per-process op counts found under one prefix, and their sums."""

    prefix: str
    processes: tuple[ProcessStats, ...]

    @property
    def totals(self) -> dict[str, dict[str, int]]:
        """{op: {backend or 'faulted': count summed over processes}}."""
        result: dict[str, dict[str, int]] = {}
        for process in self.processes:
            for op, counts in process.stats.items():
                slot = result.setdefault(op, {})
                for kind, count in counts.items():
                    slot[kind] = slot.get(kind, 0) + int(count)
        return result

    def calls(self, op: str) -> int:
        """Calls of `op` over all implementations and processes (faulted calls are among them)."""
        return sum(n for kind, n in self.totals.get(op, {}).items() if kind != "faulted")

    def faulted(self, op: str) -> int:
        return self.totals.get(op, {}).get("faulted", 0)

    def to_frame(self) -> pd.DataFrame:
        """One row per (pid, op): columns pid, op, one per backend (native, npu, cuda, vllm_cpu), faulted.

        Missing counts are 0.
        """
        import pandas as pd

        columns = ["pid", "op", *(b.value for b in Backend), "faulted"]
        rows = [
            {"pid": p.pid, "op": op, **{k: int(counts.get(k, 0)) for k in columns[2:]}}
            for p in self.processes
            for op, counts in sorted(p.stats.items())
        ]
        return pd.DataFrame(rows, columns=columns)


class StatsFileError(ValueError):
    """A stats file that is not what `REGISTRY.write_stats` writes; the message names the file."""


def read_op_stats(prefix: str | os.PathLike[str]) -> OpStats:
    """Collect every `<prefix>.<pid>.json`; no files yields an OpStats with no processes."""
    prefix = os.fspath(prefix)
    base = Path(prefix)
    processes = []
    for path in sorted(base.parent.glob(f"{base.name}.*.json")):
        pid_text = path.name[len(base.name) + 1 : -len(".json")]
        if not pid_text.isdigit():
            continue
        processes.append(_read_one(path, int(pid_text)))
    return OpStats(prefix, tuple(processes))


def _read_one(path: Path, pid: int) -> ProcessStats:
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        stats = payload["stats"]
        if not isinstance(stats, dict) or not all(isinstance(v, dict) for v in stats.values()):
            raise TypeError("'stats' must map op -> {backend: count}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StatsFileError(
            f"{path}: not an ascend_backend stats file ({exc}); delete it or point "
            f"ASCEND_BACKEND_STATS_FILE at a fresh prefix"
        ) from exc
    return ProcessStats(pid, path, stats)
