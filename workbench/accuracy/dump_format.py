"""Reading the portable dump directory (the layout and the writer live in `ascend_backend.dump_format`).

The writer is in the backend because the vLLM plugin writes dumps from inside a serving engine, where
`workbench` is never imported; this module re-exports its types, so `workbench.accuracy.dump_format`
stays the one name the workbench uses, and adds the reader: `WorkbenchDump(directory)` checks the
manifest, reads the records (and, for engine dumps, the steps) and loads tensors one at a time.

A manifest marked complete with `record_count` N means the first N records are final; records after
them belong to an engine step that never finished (the server stopped mid-step) and are ignored.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from ascend_backend.dump_format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST_FILE,
    RECORDS_FILE,
    SOURCE_ENGINE,
    SOURCE_MODULE,
    STEPS_FILE,
    TENSOR_KEY,
    TENSORS_DIR,
    DumpDirectoryNotEmpty,
    DumpHeader,
    DumpMode,
    DumpRecord,
    ParallelInfo,
    ShardKind,
    ShardLayout,
    StepRecord,
    TensorStats,
    any_nonfinite,
    record_key,
    stack_versions,
    tensors_in,
)
from ascend_backend.dump_format import DumpWriter as _BackendDumpWriter
from workbench.errors import WorkbenchError

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MANIFEST_FILE",
    "RECORDS_FILE",
    "SOURCE_ENGINE",
    "SOURCE_MODULE",
    "STEPS_FILE",
    "TENSORS_DIR",
    "TENSOR_KEY",
    "DumpHeader",
    "DumpMode",
    "DumpRecord",
    "ParallelInfo",
    "ShardKind",
    "ShardLayout",
    "StepRecord",
    "TensorStats",
    "WorkbenchDump",
    "any_nonfinite",
    "open_writer",
    "record_key",
    "stack_versions",
    "tensors_in",
]


def open_writer(directory: str | os.PathLike, header: DumpHeader) -> _BackendDumpWriter:
    """A new dump writer; a directory that holds files already is a user error naming the fix."""
    try:
        return _BackendDumpWriter(directory, header)
    except DumpDirectoryNotEmpty as exc:
        raise WorkbenchError(str(exc)) from None


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise WorkbenchError(f"{path} is not valid JSON ({exc}); the dump is corrupt, capture it again") from exc
    except OSError as exc:
        raise WorkbenchError(f"cannot read {path}: {exc.strerror}") from exc


class WorkbenchDump:
    """A workbench dump opened for reading; tensors are loaded one at a time by `load`."""

    kind = "workbench"

    def __init__(self, directory: str | os.PathLike) -> None:
        self.path = Path(directory)
        raw = _read_json(self.path / MANIFEST_FILE)
        if raw.get("format") != FORMAT_NAME:
            raise WorkbenchError(
                f"{self.path / MANIFEST_FILE} is not an {FORMAT_NAME} manifest (format={raw.get('format')!r})"
            )
        if raw.get("format_version") != FORMAT_VERSION:
            raise WorkbenchError(
                f"{self.path / MANIFEST_FILE} has format_version {raw.get('format_version')}, this workbench reads "
                f"{FORMAT_VERSION}; re-capture the dump with this version"
            )
        if not raw.get("complete"):
            raise WorkbenchError(
                f"dump {self.path} is incomplete: its capture did not finish (interrupted or failed); "
                "capture it again into a new directory"
            )
        ids = raw.get("prompt_token_ids")
        try:
            parallel = ParallelInfo.from_json(raw["parallel"]) if raw.get("parallel") else None
            module_ops = {str(m): tuple(str(o) for o in ops) for m, ops in raw.get("module_ops", {}).items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise WorkbenchError(
                f"{self.path / MANIFEST_FILE}: its parallel / module_ops entries are corrupt ({exc}); capture it again"
            ) from None
        self.header = DumpHeader(
            mode=DumpMode(raw["mode"]),
            prompt_token_ids=tuple(int(i) for i in ids) if ids is not None else None,
            prompt=raw.get("prompt"),
            model=str(raw.get("model", "")),
            device=str(raw.get("device", "")),
            module_patterns=tuple(raw.get("module_patterns", ())),
            versions=dict(raw.get("versions", {})),
            source=str(raw.get("source") or SOURCE_MODULE),
            parallel=parallel,
            module_ops=module_ops,
        )
        self.records = self._read_records(int(raw["record_count"]))
        self.steps = self._read_steps() if self.header.source == SOURCE_ENGINE else ()

    def _read_records(self, expected: int) -> list[DumpRecord]:
        path = self.path / RECORDS_FILE
        records = []
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise WorkbenchError(f"cannot read {path}: {exc.strerror}; the dump is incomplete") from exc
        if len(lines) < expected:
            raise WorkbenchError(
                f"{path} holds {len(lines)} records but {MANIFEST_FILE} says {expected}: the dump is truncated; "
                "capture it again"
            )
        for number, line in enumerate(lines[:expected], start=1):  # later lines: a step that never finished
            try:
                records.append(DumpRecord.from_json(json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise WorkbenchError(f"{path} line {number} is corrupt ({exc}); capture the dump again") from exc
        return records

    def _read_steps(self) -> tuple[StepRecord, ...]:
        """The engine steps that own at least one final record (a step cut short owns none)."""
        path = self.path / STEPS_FILE
        owned = {r.step for r in self.records}
        try:
            lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
            steps = tuple(StepRecord.from_json(json.loads(line)) for line in lines if line.strip())
        except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise WorkbenchError(f"{path} is corrupt or unreadable ({exc}); capture the engine dump again") from exc
        missing = sorted(s for s in owned - {s.step for s in steps} if s is not None)
        if missing:
            raise WorkbenchError(f"{path} lacks steps {missing} that records refer to; capture the engine dump again")
        return tuple(s for s in steps if s.step in owned)

    @property
    def source(self) -> str:
        return self.header.source

    @property
    def mode(self) -> DumpMode:
        return self.header.mode

    @property
    def prompt_token_ids(self) -> tuple[int, ...] | None:
        return self.header.prompt_token_ids

    def load(self, record: DumpRecord) -> torch.Tensor:
        """The tensor of `record`, checked against the manifest's dtype and shape."""
        if record.file is None:
            raise WorkbenchError(f"dump {self.path} is stats-only: it holds no tensor for {record.key}")
        path = self.path / record.file
        try:
            tensor = load_file(str(path))[TENSOR_KEY]
        except FileNotFoundError as exc:
            raise WorkbenchError(f"tensor file {path} for {record.key} is missing; the dump is incomplete") from exc
        except (SafetensorError, KeyError, OSError) as exc:
            raise WorkbenchError(f"tensor file {path} for {record.key} is corrupt ({exc}); capture it again") from exc
        if str(tensor.dtype) != record.dtype or tuple(tensor.shape) != record.shape:
            raise WorkbenchError(
                f"tensor file {path} holds {tensor.dtype} {list(tensor.shape)} but the manifest says "
                f"{record.dtype} {list(record.shape)} for {record.key}; the dump is corrupt"
            )
        return tensor

    def __iter__(self) -> Iterator[DumpRecord]:
        return iter(self.records)
