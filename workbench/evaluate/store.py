"""One data set's results on one server: a JSONL file, a header line, then one line per finished request.

    {"kind": "header", "key": {...}, "provenance": {...}, "dataset": {...}, "settings": {...}}
    {"kind": "nll", "id": "HumanEval/0", ...}
    {"kind": "greedy", "id": "HumanEval/0", ...}
    {"kind": "execution", "id": "HumanEval/0", ...}

The file is a `workbench.results.jsonl.JsonlLog`: an interruption leaves at most a torn last line, which
is ignored and cut, and a damaged line is kept, reported and skipped (its request is measured again).
The header's `key` says what the lines measure (data set digest, served model and its directory,
generation settings): a rerun with the same key resumes, a different key is refused so two models'
results never mix in one file. For a (kind, id) written twice,
the later line wins (a retried request that failed before).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.results.jsonl import JsonlLog


class RecordFile:
    """Not thread-safe: one thread of one process appends (the evaluation's main thread).

    The file is read once; later appends also update the in-memory index, so looking a record up does not
    re-read the file.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._log = JsonlLog(self.path)
        self._lines: tuple[dict[str, Any], ...] | None = None
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
        return next((line for line in self._complete_lines() if line.get("kind") == "header"), None)

    def append(self, record: dict[str, Any]) -> None:
        self._log.append(record)
        if self._lines is not None:
            self._lines = (*self._lines, record)
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

    def _complete_lines(self) -> tuple[dict[str, Any], ...]:
        if self._lines is None:
            self._lines = self._log.read().records
        return self._lines


def _differences(old: Any, new: Any) -> str:
    if not isinstance(old, dict) or not isinstance(new, dict):
        return "no run key"
    changed = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return "; ".join(f"{k}: {old.get(k)!r} there, {new.get(k)!r} now" for k in changed[:3])
