"""One data set's results on one server: a JSONL file, a header line, then one line per finished request.

    {"kind": "header", "key": {...}, "provenance": {...}, "dataset": {...}, "settings": {...}}
    {"kind": "nll", "id": "HumanEval/0", ...}
    {"kind": "greedy", "id": "HumanEval/0", ...}
    {"kind": "execution", "id": "HumanEval/0", ...}

Each line is encoded whole and written with one `os.write` on an O_APPEND descriptor, then fsynced, so an
interruption leaves at most a torn last line without its newline; reading ignores it and the next append
cuts it off (the rule of the sweep's result store). The header's `key` says what the lines measure (data
set digest, served model and its directory, generation settings): a rerun with the same key resumes, a
different key is refused so two models' results never mix in one file. For a (kind, id) written twice,
the later line wins (a retried request that failed before).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError


class RecordFile:
    """Not thread-safe: one thread of one process appends (the evaluation's main thread).

    The file is read once; later appends also update the in-memory index, so looking a record up does not
    re-read the file.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._index: dict[str, dict[str, dict[str, Any]]] | None = None  # kind -> id -> last record

    def __repr__(self) -> str:
        return f"RecordFile({self.path})"

    def start(self, header: dict[str, Any]) -> bool:
        """Write the header of a new file, or check an existing one's key; True when resuming."""
        existing = self.header()
        if existing is None:
            self.append({"kind": "header", **header})
            return False
        if existing.get("key") != header.get("key"):
            raise WorkbenchError(
                f"{self.path} holds results of another run ({_differences(existing.get('key'), header.get('key'))}); "
                "pass another --out, or delete that file to measure again"
            )
        return True

    def header(self) -> dict[str, Any] | None:
        lines = self._complete_lines()
        return lines[0] if lines and lines[0].get("kind") == "header" else None

    def append(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, separators=(",", ":"), ensure_ascii=False, default=str) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._cut_torn_tail()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if os.write(fd, line) != len(line):  # a short write to a regular file means a full disk
                raise WorkbenchError(f"{self.path}: could not write a whole record (disk full?); free space and rerun")
            os.fsync(fd)
        finally:
            os.close(fd)
        if self._index is not None and "id" in record:
            self._index.setdefault(record["kind"], {})[record["id"]] = record

    def records(self, kind: str) -> dict[str, dict[str, Any]]:
        """The last record of `kind` for each problem id, in file order of first appearance."""
        if self._index is None:
            self._index = {}
            for record in self._complete_lines():
                if "id" in record:
                    self._index.setdefault(record.get("kind", ""), {})[record["id"]] = record
        return self._index.get(kind, {})

    def _complete_lines(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        complete = self.path.read_bytes().split(b"\n")[:-1]  # after the last newline: b"" or a torn write
        records = []
        for number, line in enumerate(complete, start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except ValueError as exc:
                raise WorkbenchError(
                    f"{self.path}: line {number} is not a result record ({exc}); delete that line and rerun to "
                    "measure that problem again"
                ) from None
        return records

    def _cut_torn_tail(self) -> None:
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
            handle.truncate(handle.read().rfind(b"\n") + 1)
            handle.flush()
            os.fsync(handle.fileno())


def _differences(old: Any, new: Any) -> str:
    if not isinstance(old, dict) or not isinstance(new, dict):
        return "no run key"
    changed = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return "; ".join(f"{k}: {old.get(k)!r} there, {new.get(k)!r} now" for k in changed[:3])
