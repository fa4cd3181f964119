"""The portable dump directory: one safetensors file per captured tensor plus a JSON manifest.

Layout (format "ascend-workbench-dump", version 1):

    DIR/manifest.json     header: mode, prompt token ids, versions, device, module patterns; `complete`
                          is false while capturing and becomes true (with `record_count`) at the end
    DIR/records.jsonl     one JSON record per captured tensor, appended (and flushed) as it is captured,
                          in execution order (the order in which module outputs were produced)
    DIR/tensors/000000.safetensors   the tensor of record 0 under the key "tensor" (absent in stats mode)

Why this shape: records are appended as the forward runs, so an interrupted capture keeps everything
already written and is recognisably incomplete; one file per tensor lets a compare stream tensor by
tensor with memory near two tensors; safetensors loads without pickle and from any framework.

A record's `key` identifies "the same tensor" across two dumps: `<module>.output.<i>` for a module's
first call, `<module>.call<k>.output.<i>` for later calls; `<i>` counts tensors in the (flattened) output.
"""

from __future__ import annotations

import enum
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from workbench.errors import WorkbenchError

FORMAT_NAME = "ascend-workbench-dump"
FORMAT_VERSION = 1
MANIFEST_FILE = "manifest.json"
RECORDS_FILE = "records.jsonl"
TENSORS_DIR = "tensors"
TENSOR_KEY = "tensor"


class DumpMode(str, enum.Enum):
    """TENSORS keeps every captured tensor; STATS keeps only Max/Min/Mean/Norm (for big models)."""

    TENSORS = "tensors"
    STATS = "stats"


def record_key(module: str, call: int, output_index: int) -> str:
    """`model.layers.0.mlp.output.0` for the first call, `...mlp.call1.output.0` for the second."""
    return f"{module}.output.{output_index}" if call == 0 else f"{module}.call{call}.output.{output_index}"


@dataclass(frozen=True)
class TensorStats:
    """msprobe's per-tensor statistics (computed in float64); NaN/Inf propagate into them."""

    max: float
    min: float
    mean: float
    norm: float

    @classmethod
    def of(cls, tensor: torch.Tensor) -> TensorStats:
        if tensor.numel() == 0:
            return cls(math.nan, math.nan, math.nan, math.nan)
        t = tensor.detach().to(torch.float64)
        return cls(float(t.max()), float(t.min()), float(t.mean()), float(torch.linalg.vector_norm(t)))


@dataclass(frozen=True)
class DumpRecord:
    """One captured tensor. `file` is relative to the dump directory, None for stats-only records.

    `nonfinite` / `inputs_nonfinite`: whether this output / any tensor input of the module call held
    NaN or Inf (None when the source cannot tell, e.g. a msprobe dump without input statistics).
    """

    index: int
    module: str
    call: int
    output_index: int
    dtype: str
    shape: tuple[int, ...]
    stats: TensorStats
    nan_count: int | None
    inf_count: int | None
    nonfinite: bool | None
    inputs_nonfinite: bool | None
    file: str | None
    device: str = ""

    @property
    def key(self) -> str:
        return record_key(self.module, self.call, self.output_index)

    def to_json(self) -> dict:
        return {
            "index": self.index,
            "module": self.module,
            "call": self.call,
            "output_index": self.output_index,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "Max": _json_float(self.stats.max),
            "Min": _json_float(self.stats.min),
            "Mean": _json_float(self.stats.mean),
            "Norm": _json_float(self.stats.norm),
            "nan_count": self.nan_count,
            "inf_count": self.inf_count,
            "nonfinite": self.nonfinite,
            "inputs_nonfinite": self.inputs_nonfinite,
            "file": self.file,
            "device": self.device,
        }

    @classmethod
    def from_json(cls, raw: dict) -> DumpRecord:
        return cls(
            index=int(raw["index"]),
            module=str(raw["module"]),
            call=int(raw["call"]),
            output_index=int(raw["output_index"]),
            dtype=str(raw["dtype"]),
            shape=tuple(int(s) for s in raw["shape"]),
            stats=TensorStats(*(_float_from_json(raw[k]) for k in ("Max", "Min", "Mean", "Norm"))),
            nan_count=raw["nan_count"],
            inf_count=raw["inf_count"],
            nonfinite=raw["nonfinite"],
            inputs_nonfinite=raw["inputs_nonfinite"],
            file=raw["file"],
            device=str(raw.get("device", "")),
        )


def _json_float(value: float) -> float | str:
    """JSON has no NaN/Inf: write them as the strings msprobe also uses ("nan", "inf", "-inf")."""
    return value if math.isfinite(value) else str(value)


def _float_from_json(value: float | str | None) -> float:
    return math.nan if value is None else float(value)


@dataclass(frozen=True)
class DumpHeader:
    """What was captured and how; compared before any tensor is read."""

    mode: DumpMode
    prompt_token_ids: tuple[int, ...] | None
    prompt: str | None
    model: str
    device: str
    module_patterns: tuple[str, ...]
    versions: dict[str, str] = field(default_factory=dict)

    def to_json(self, *, complete: bool, record_count: int | None) -> dict:
        return {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "complete": complete,
            "record_count": record_count,
            "mode": self.mode.value,
            "prompt_token_ids": list(self.prompt_token_ids) if self.prompt_token_ids is not None else None,
            "prompt": self.prompt,
            "model": self.model,
            "device": self.device,
            "module_patterns": list(self.module_patterns),
            "versions": dict(self.versions),
        }


def _write_json_atomically(path: Path, payload: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1))
    os.replace(tmp, path)


class DumpWriter:
    """Creates a new dump directory and appends records as they are captured.

    Refuses a directory that exists and is not empty, so a capture never overwrites an earlier dump.
    """

    def __init__(self, directory: str | os.PathLike, header: DumpHeader) -> None:
        self.directory = Path(directory)
        if self.directory.exists() and (not self.directory.is_dir() or any(self.directory.iterdir())):
            raise WorkbenchError(
                f"dump directory {self.directory} already exists and is not empty; choose a new --out "
                "directory (nothing was written, the existing files are untouched)"
            )
        self.header = header
        (self.directory / TENSORS_DIR).mkdir(parents=True, exist_ok=True)
        _write_json_atomically(self.directory / MANIFEST_FILE, header.to_json(complete=False, record_count=None))
        self._records = open(self.directory / RECORDS_FILE, "a", encoding="utf-8")  # noqa: SIM115 (closed in finish)
        self.count = 0

    def add(
        self, module: str, call: int, output_index: int, tensor: torch.Tensor, inputs_nonfinite: bool
    ) -> DumpRecord:
        """Record one output tensor: stats always, the tensor itself unless in stats mode."""
        tensor = tensor.detach()
        floating = tensor.is_floating_point()
        nan_count = int(tensor.isnan().sum()) if floating else 0
        inf_count = int(tensor.isinf().sum()) if floating else 0
        file = None
        if self.header.mode is DumpMode.TENSORS:
            file = f"{TENSORS_DIR}/{self.count:06d}.safetensors"
            save_file({TENSOR_KEY: tensor.to("cpu").contiguous()}, str(self.directory / file))
        record = DumpRecord(
            index=self.count,
            module=module,
            call=call,
            output_index=output_index,
            dtype=str(tensor.dtype),
            shape=tuple(int(s) for s in tensor.shape),
            stats=TensorStats.of(tensor),
            nan_count=nan_count,
            inf_count=inf_count,
            nonfinite=bool(nan_count or inf_count),
            inputs_nonfinite=inputs_nonfinite,
            file=file,
            device=str(tensor.device),
        )
        self._records.write(json.dumps(record.to_json()) + "\n")
        self._records.flush()
        self.count += 1
        return record

    def finish(self) -> None:
        """Close the record stream and mark the dump complete."""
        self._records.close()
        _write_json_atomically(
            self.directory / MANIFEST_FILE, self.header.to_json(complete=True, record_count=self.count)
        )

    def abandon(self) -> None:
        """Close without marking complete (the capture failed); what was written stays readable as partial."""
        self._records.close()


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
        self.header = DumpHeader(
            mode=DumpMode(raw["mode"]),
            prompt_token_ids=tuple(int(i) for i in ids) if ids is not None else None,
            prompt=raw.get("prompt"),
            model=str(raw.get("model", "")),
            device=str(raw.get("device", "")),
            module_patterns=tuple(raw.get("module_patterns", ())),
            versions=dict(raw.get("versions", {})),
        )
        self.records = self._read_records(int(raw["record_count"]))

    def _read_records(self, expected: int) -> list[DumpRecord]:
        path = self.path / RECORDS_FILE
        records = []
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise WorkbenchError(f"cannot read {path}: {exc.strerror}; the dump is incomplete") from exc
        for number, line in enumerate(lines, start=1):
            try:
                records.append(DumpRecord.from_json(json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise WorkbenchError(f"{path} line {number} is corrupt ({exc}); capture the dump again") from exc
        if len(records) != expected:
            raise WorkbenchError(
                f"{path} holds {len(records)} records but {MANIFEST_FILE} says {expected}: the dump is truncated; "
                "capture it again"
            )
        return records

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
