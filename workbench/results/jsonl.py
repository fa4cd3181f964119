"""The one append-only JSON-lines log: every result store of the workbench (sweep points, bisect steps,
evaluation records) is one of these.

Writing: each record is encoded whole first, then written with a single `os.write` on an O_APPEND
descriptor and fsynced. A process killed in the middle of that write leaves at most a torn last line
without its newline; nothing else can be half written.

The damaged-line policy, the same for every store:
- a torn last line (no newline) is not a record: reading ignores it, and the next append cuts it off
  first, so a new record is never glued to a fragment;
- a complete line that does not decode (not JSON, not an object, or refused by the store's own
  decoder) is **kept in the file** and reported with its line number (in `LogContents.damaged` and as
  one `DamagedLineWarning`); the good lines around it are read as usual. Nothing measured is ever
  deleted, and the record that line held is simply missing, so a resumed run measures it again.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from workbench.errors import WorkbenchError

T = TypeVar("T")
DECODE_ERRORS = (ValueError, KeyError, TypeError)  # what a store's decoder raises for a record it refuses


class DamagedLineWarning(UserWarning):
    """A complete line of a results log could not be read; the file keeps it, the reader skips it."""


@dataclass(frozen=True)
class DamagedLine:
    path: Path
    number: int  # 1-based line number in the file
    reason: str

    def describe(self) -> str:
        return (
            f"{self.path}: line {self.number} is damaged ({self.reason}); it is kept in the file and skipped, "
            "so what it held is measured again; delete the line once you no longer need it"
        )


@dataclass(frozen=True)
class LogContents(Generic[T]):
    records: tuple[T, ...]
    damaged: tuple[DamagedLine, ...] = ()


class JsonlLog:
    """Not thread-safe, by design: one writer per log (the driver thread of a sweep, bisect or evaluation)."""

    def __init__(self, path: Path, *, fsync: bool = True):
        """`fsync=False` for a log that is not the durable record (a per-request trace written hundreds of
        times a second): each line is still one whole write, but not forced to disk before the next."""
        self.path = Path(path)
        self.fsync = fsync

    def __repr__(self) -> str:
        return f"JsonlLog({self.path})"

    def exists(self) -> bool:
        return self.path.exists()

    def append(self, record: dict[str, Any]) -> None:
        """Write one record durably: cut a torn tail, then one write + fsync of the whole line."""
        line = (json.dumps(record, separators=(",", ":"), ensure_ascii=False, default=str) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._cut_torn_tail()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, line)
            if written != len(line):  # regular files write all or fail: a short write means a full disk
                raise WorkbenchError(
                    f"{self.path}: wrote {written} of {len(line)} bytes (disk full?); free space and rerun: the "
                    "torn line is ignored and that record is measured again"
                )
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def read(self, decode: Callable[[dict[str, Any]], T] = dict) -> LogContents[T]:  # type: ignore[assignment]
        """Every complete record in file order, decoded by `decode`; damaged lines reported, not raised."""
        if not self.path.exists():
            return LogContents(())
        records: list[T] = []
        damaged: list[DamagedLine] = []
        # Everything after the last newline is b"" or a torn write, never a finished record.
        for number, line in enumerate(self.path.read_bytes().split(b"\n")[:-1], start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise ValueError(f"a JSON {type(data).__name__}, not an object")
                records.append(decode(data))
            except DECODE_ERRORS as exc:
                damaged.append(DamagedLine(self.path, number, f"{type(exc).__name__}: {exc}"[:200]))
        for item in damaged:
            warnings.warn(item.describe(), DamagedLineWarning, stacklevel=2)
        return LogContents(tuple(records), tuple(damaged))

    def _cut_torn_tail(self) -> None:
        """If the last line has no newline (a write cut short), truncate the file after the last newline."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size == 0:
            return
        with self.path.open("rb+") as handle:
            handle.seek(size - 1)
            if handle.read(1) == b"\n":
                return
            handle.seek(0)
            handle.truncate(handle.read().rfind(b"\n") + 1)  # 0 when the only line is torn
            handle.flush()
            os.fsync(handle.fileno())
