"""Measurements kept by key in one JSONL log, so an interrupted autopilot resumes where it stopped.

Every costly number the autopilot makes (a proxy table, an oracle unit, a served evaluation of a plan) is
appended as `{"key": ..., **record}` as soon as it exists; a rerun with the same state directory reads
them back and measures only what is missing. The key names everything the number depends on (model,
texts' digest, scheme, plan), so a changed setting is a new measurement, never a stale hit. The log is a
`workbench.results.jsonl.JsonlLog`: a torn or damaged line is skipped and measured again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from workbench.results.jsonl import JsonlLog


def digest(value: Any) -> str:
    """16 hex digits of sha256 over `value` as canonical JSON."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class EvalCache:
    """key -> the last record stored under it (one writer per state directory)."""

    def __init__(self, path: Path):
        self.log = JsonlLog(Path(path))
        self._records: dict[str, dict[str, Any]] = {}
        for record in self.log.read().records:
            if isinstance(record.get("key"), str):
                self._records[record["key"]] = record

    def __contains__(self, key: str) -> bool:
        return key in self._records

    def __len__(self) -> int:
        return len(self._records)

    def get(self, key: str) -> dict[str, Any] | None:
        return self._records.get(key)

    def put(self, key: str, record: dict[str, Any]) -> dict[str, Any]:
        stored = {"key": key, **record}
        self.log.append(stored)
        self._records[key] = stored
        return stored
