"""The result envelope: a payload and where it came from, with the provenance stamp under one key.

    {"provenance": {"created_at": ..., "stack": {...}, "recipe": {...}, ...}, ...the payload's own keys}

A number without its stack is an orphan (docs/METHOD.md §2, §16): every result file the workbench
writes carries the stamp `workbench.stack.provenance.provenance()` builds, and always under
`"provenance"`. Files written before the key was unified carry it under `"meta"` (bench JSON) or
`"fingerprint"` (sweep points); `provenance_of` reads all three, so old results still compare.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workbench.results.files import write_json

PROVENANCE_KEY = "provenance"
LEGACY_PROVENANCE_KEYS = ("meta", "fingerprint")  # bench JSON, sweep points, before the key was one


def envelope(payload: Mapping[str, Any], provenance: Mapping[str, Any]) -> dict[str, Any]:
    """The payload with its stamp first; a payload may not bring a stamp of its own."""
    if PROVENANCE_KEY in payload:
        raise ValueError(f"the payload already has a {PROVENANCE_KEY!r} key; pass the stamp separately")
    return {PROVENANCE_KEY: dict(provenance), **payload}


def provenance_of(data: Mapping[str, Any]) -> dict[str, Any]:
    """The stamp of a result document (new or old key); {} when it has none."""
    for key in (PROVENANCE_KEY, *LEGACY_PROVENANCE_KEYS):
        value = data.get(key)
        if isinstance(value, Mapping) and value:
            return dict(value)
    return {}


def write_result(path: Path, payload: Mapping[str, Any], provenance: Mapping[str, Any]) -> Path:
    """Write one enveloped result document atomically; returns `path`."""
    return write_json(Path(path), envelope(payload, provenance))
