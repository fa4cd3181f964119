"""Read an msprobe (MindStudio Probe) PyTorch dump as workbench dump records.

msprobe writes `step<N>/proc<PID>/dump.json` (or `rank<R>/dump.json`) with one entry per API or module
call, plus `dump_tensor_data/<data_name>.pt` in tensor mode. Entry names carry the call index:

    Functional.linear.0.forward          API `Functional.linear`, call 0          (level L1)
    Module.model.layers.0.mlp.LlamaMLP.forward.0   module `model.layers.0.mlp`, call 0   (level L0)

Each entry's `output` list (possibly nested) holds tensor descriptions with dtype, shape, Max/Min/Mean/
Norm and, in tensor mode, `data_name`. We keep forward outputs only (what a workbench dump holds), so
an msprobe dump can be compared with another msprobe dump or with a workbench dump of the same model:
module names then match (`model.layers.0.mlp`), API entries keep their msprobe name.

Whether a call's inputs held NaN/Inf is read from its input statistics (a NaN or infinite Max/Min), the
same evidence msprobe's own InfNanErrChecker uses.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import torch

from workbench.accuracy.dump_format import DumpHeader, DumpMode, DumpRecord, TensorStats
from workbench.errors import WorkbenchError

DUMP_JSON = "dump.json"
TENSOR_DATA_DIR = "dump_tensor_data"

_MODULE_ENTRY = re.compile(r"^(?:Module|Cell)\.(?P<name>.+)\.(?P<cls>[^.]+)\.forward\.(?P<call>\d+)$")
_API_ENTRY = re.compile(r"^(?P<name>.+)\.(?P<call>\d+)\.forward$")


def find_dump_json(directory: Path) -> Path | None:
    """`directory/dump.json`, or the single dump.json below it; None when there is none.

    Several (more steps or ranks) is a user choice we cannot make: the error lists them.
    """
    direct = directory / DUMP_JSON
    if direct.is_file():
        return direct
    found = sorted(directory.rglob(DUMP_JSON))
    if not found:
        return None
    if len(found) > 1:
        listing = ", ".join(str(p.parent) for p in found[:6])
        raise WorkbenchError(
            f"{directory} holds {len(found)} msprobe dumps ({listing}{', ...' if len(found) > 6 else ''}); "
            "pass the step/proc (or rank) directory of the one to compare"
        )
    return found[0]


def parse_entry_name(name: str) -> tuple[str, int] | None:
    """(module, call) of a forward entry name, None for backward / parameter entries."""
    match = _MODULE_ENTRY.match(name)
    if match:
        return match["name"], int(match["call"])
    match = _API_ENTRY.match(name)
    if match:
        return match["name"], int(match["call"])
    return None


def _tensors_in(node: object) -> list[dict]:
    """Tensor descriptions in an msprobe args/output structure, depth first."""
    if isinstance(node, dict):
        if node.get("type") == "torch.Tensor":
            return [node]
        return [t for value in node.values() for t in _tensors_in(value)]
    if isinstance(node, list | tuple):
        return [t for item in node for t in _tensors_in(item)]
    return []


def _stat(value: object) -> float:
    if value is None:
        return math.nan
    try:
        return float(value)  # msprobe writes "nan"/"inf" strings or JSON numbers
    except (TypeError, ValueError):
        return math.nan


def _stats_of(desc: dict) -> TensorStats:
    return TensorStats(*(_stat(desc.get(k)) for k in ("Max", "Min", "Mean", "Norm")))


def _desc_nonfinite(desc: dict) -> bool:
    """A NaN or infinite Max/Min (msprobe writes "nan"/"inf" or JSON numbers); absent stats prove nothing."""
    for key in ("Max", "Min"):
        value = desc.get(key)
        if value is None:
            continue
        try:
            if not math.isfinite(float(value)):
                return True
        except (TypeError, ValueError):
            continue
    return False


class MsprobeDump:
    """An msprobe dump opened for reading, with the same `records` / `load` interface as WorkbenchDump."""

    kind = "msprobe"

    def __init__(self, directory: str | os.PathLike, dump_json: Path | None = None) -> None:
        self.path = Path(directory)
        self.dump_json = dump_json or find_dump_json(self.path)
        if self.dump_json is None:
            raise WorkbenchError(f"{self.path} holds no msprobe {DUMP_JSON}")
        try:
            raw = json.loads(self.dump_json.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise WorkbenchError(f"{self.dump_json} is not valid JSON ({exc}); the msprobe dump is corrupt") from exc
        if not isinstance(raw, dict) or not isinstance(raw.get("data"), dict):
            raise WorkbenchError(f"{self.dump_json} has no 'data' object; is it an msprobe PyTorch dump.json?")
        self.tensor_dir = self.dump_json.parent / TENSOR_DATA_DIR
        task = str(raw.get("task", ""))
        self.header = DumpHeader(
            mode=DumpMode.TENSORS if task == "tensor" else DumpMode.STATS,
            prompt_token_ids=None,
            prompt=None,
            model=f"msprobe {raw.get('framework', '')} {task} {raw.get('level', '')}".strip(),
            device="",
            module_patterns=(),
            versions={},
        )
        self.records = self._records(raw["data"])

    def _records(self, data: dict) -> list[DumpRecord]:
        records: list[DumpRecord] = []
        for entry_name, entry in data.items():
            parsed = parse_entry_name(entry_name)
            if parsed is None or not isinstance(entry, dict):
                continue
            module, call = parsed
            inputs = _tensors_in(entry.get("input_args", [])) + _tensors_in(entry.get("input_kwargs", {}))
            inputs_nonfinite = any(_desc_nonfinite(d) for d in inputs)
            for output_index, desc in enumerate(_tensors_in(entry.get("output", []))):
                stats = _stats_of(desc)
                data_name = desc.get("data_name")
                records.append(
                    DumpRecord(
                        index=len(records),
                        module=module,
                        call=call,
                        output_index=output_index,
                        dtype=str(desc.get("dtype", "")),
                        shape=tuple(int(s) for s in desc.get("shape", [])),
                        stats=stats,
                        nan_count=None,
                        inf_count=None,
                        nonfinite=_desc_nonfinite(desc),
                        inputs_nonfinite=inputs_nonfinite,
                        file=f"{TENSOR_DATA_DIR}/{data_name}" if data_name and self.mode is DumpMode.TENSORS else None,
                    )
                )
        return records

    @property
    def mode(self) -> DumpMode:
        return self.header.mode

    @property
    def prompt_token_ids(self) -> tuple[int, ...] | None:
        return None

    def load(self, record: DumpRecord) -> torch.Tensor:
        """The `.pt` tensor of `record` (loaded with weights_only, so no code in it runs)."""
        if record.file is None:
            raise WorkbenchError(f"msprobe dump {self.path} holds no tensor for {record.key} (statistics mode?)")
        path = self.dump_json.parent / record.file
        try:
            tensor = torch.load(path, map_location="cpu", weights_only=True)
        except FileNotFoundError as exc:
            raise WorkbenchError(f"msprobe tensor file {path} for {record.key} is missing") from exc
        except Exception as exc:  # torch.load raises RuntimeError/UnpicklingError/EOFError for bad files
            raise WorkbenchError(f"msprobe tensor file {path} for {record.key} is corrupt ({exc})") from exc
        if not isinstance(tensor, torch.Tensor):
            raise WorkbenchError(f"msprobe file {path} holds a {type(tensor).__name__}, not a tensor")
        if tuple(tensor.shape) != record.shape:
            raise WorkbenchError(
                f"msprobe tensor file {path} has shape {list(tensor.shape)} but dump.json says "
                f"{list(record.shape)} for {record.key}; the dump is corrupt"
            )
        return tensor.detach()
