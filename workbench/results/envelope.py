"""The result envelope: what a document is, which layout it has, and where it came from.

    {"kind": "twin", "schema_version": 1, "provenance": {"created_at": ..., "stack": {...}, ...},
     ...the payload's own keys}

A result says what it is (docs/METHOD.md §16): every document the workbench writes is stamped with the
`DocumentKind` its producer declares, so a reader dispatches on `kind` instead of sniffing keys, and a
document written by a newer layout than the reader knows is refused with the fix rather than misread.
The producer owns the kind and its reader (`DocumentKind.read`); the rule for versions is one line:
a change that a reader of the previous version would misread bumps `version`; adding a key does not.

A number without its stack is an orphan (docs/METHOD.md §2, §16): the provenance stamp
`workbench.stack.provenance.provenance()` builds always sits under `"provenance"`. Files written before
the key was unified carry it under `"meta"` (bench JSON) or `"fingerprint"` (sweep points), and files
written before kinds existed carry no `kind`: `provenance_of` and `kind_of` read both, so old results
still compare.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.results.files import write_json

PROVENANCE_KEY = "provenance"
KIND_KEY = "kind"
VERSION_KEY = "schema_version"
LEGACY_PROVENANCE_KEYS = ("meta", "fingerprint")  # bench JSON, sweep points, before the key was one
_RESERVED = (KIND_KEY, VERSION_KEY, PROVENANCE_KEY)


@dataclass(frozen=True)
class DocumentKind:
    """One kind of result document and the newest layout its producer writes.

    name      what the document is ("bench", "sweep-point", "twin", ...): one word per task
    version   the layout's number; readers take every version up to this one
    """

    name: str
    version: int = 1

    def __post_init__(self) -> None:
        if not self.name or self.version < 1:
            raise ValueError(f"a document kind needs a name and a version >= 1, not {self!r}")

    def stamp(self) -> dict[str, Any]:
        return {KIND_KEY: self.name, VERSION_KEY: self.version}

    def matches(self, data: Any) -> bool:
        """True for a document stamped with this kind (any version)."""
        return isinstance(data, Mapping) and data.get(KIND_KEY) == self.name

    def check(self, data: Any, source: str | Path) -> dict[str, Any]:
        """`data` as a document of this kind, or one WorkbenchError naming the file and the fix."""
        if not isinstance(data, Mapping):
            raise WorkbenchError(f"{source}: not a {self.name} result (a JSON object was expected)")
        stamped = kind_of(data)
        if stamped is None:
            raise WorkbenchError(
                f"{source}: carries no '{KIND_KEY}'; it is not a {self.name} result the workbench wrote"
            )
        name, version = stamped
        if name != self.name:
            raise WorkbenchError(f"{source}: is a {name!r} result, not a {self.name!r} one; pass a {self.name} result")
        if version > self.version:
            raise WorkbenchError(
                f"{source}: {self.name} schema version {version} is newer than this workbench reads (up to "
                f"{self.version}); upgrade the workbench to read it"
            )
        return dict(data)

    def read(self, path: Path | str) -> dict[str, Any]:
        """Read and check one JSON document of this kind."""
        return self.check(read_json_document(path), path)


def read_json_document(path: Path | str) -> Any:
    """The parsed JSON of `path`, or one WorkbenchError naming the file and what is wrong with it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WorkbenchError(f"{path}: file not found; check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkbenchError(f"{path}: cannot be read as text ({exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise WorkbenchError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None


def envelope(payload: Mapping[str, Any], provenance: Mapping[str, Any], kind: DocumentKind) -> dict[str, Any]:
    """The payload with its kind, version and stamp first; a payload may not bring any of them itself."""
    clash = [key for key in _RESERVED if key in payload]
    if clash:
        raise ValueError(f"the payload already has {clash}; the envelope adds them")
    return {**kind.stamp(), PROVENANCE_KEY: dict(provenance), **payload}


def kind_of(data: Any) -> tuple[str, int] | None:
    """(kind, schema version) of a stamped document; None for one written before kinds existed."""
    if not isinstance(data, Mapping) or not isinstance(data.get(KIND_KEY), str):
        return None
    version = data.get(VERSION_KEY)
    return data[KIND_KEY], int(version) if isinstance(version, int) and not isinstance(version, bool) else 1


def provenance_of(data: Mapping[str, Any]) -> dict[str, Any]:
    """The stamp of a result document (new or old key); {} when it has none."""
    for key in (PROVENANCE_KEY, *LEGACY_PROVENANCE_KEYS):
        value = data.get(key)
        if isinstance(value, Mapping) and value:
            return dict(value)
    return {}


def write_result(path: Path, payload: Mapping[str, Any], provenance: Mapping[str, Any], kind: DocumentKind) -> Path:
    """Write one enveloped result document atomically; returns `path`."""
    return write_json(Path(path), envelope(payload, provenance, kind))
