"""The kernel-selection table and the release list, read once from `ascend_backend/data/` and validated.

`kernel_table.json` holds one row per (vllm-ascend release range, chip families, op or attention state,
graph mode and call conditions where they matter): the torch_npu call vllm-ascend makes there, our
argument recipe for it, and where in vllm-ascend's source it was read (file, tag, function).
`vllm_ascend_releases.json` lists the releases the table knows with their torch_npu and CANN, so the
release can be inferred when vllm-ascend is not installed. Both are package data: the backend never
reads `recipes/` (that belongs to the workbench).

A malformed file raises ValueError naming the row and the field: it ships with the package, so a
mistake there is a bug to fix here, not a user error.
"""

from __future__ import annotations

import enum
import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from packaging.version import InvalidVersion, Version

from ascend_backend.platform.kernels.recipes import RECIPES, kernel_of

TABLE_FILE = "kernel_table.json"
RELEASES_FILE = "vllm_ascend_releases.json"
WHEN_KEYS = frozenset(
    {
        "head_size",
        "rotary_dim",
        "neox",
        "partial_rotary",
        "pa_shape",
        "mrope_section",
        "cann_prefix",
        "sliding_window",  # bool: the attention layer has a sliding window (Mistral, Gemma 2/3, Qwen2 with use_sliding_window)
        "last_dim_multiple",  # int: the input's last dimension is a multiple of it (310P npu_swiglu needs 32)
        "architecture",  # list: the model's architecture is one of these (vLLM's architectures[0])
        "checkpoint",  # str: the quantized checkpoint's format, "msmodelslim" or "compressed-tensors"
        "prequantized",  # bool: a quantized linear's activation arrives already int8 (fused norm-quant before it)
        "scheme",  # list: the quantization scheme of a weight ("W8A8", "W8A8_DYNAMIC")
    }
)


class ChipFamily(str, enum.Enum):
    """vllm-ascend's device types (vllm_ascend/utils.py AscendDeviceType, v0.12.0rc1+)."""

    A2 = "A2"  # Ascend910B*  (soc_version 220-225)
    A3 = "A3"  # Ascend910_93* (250-255)
    A5 = "A5"  # Ascend950*   (260)
    P310 = "310P"  # Ascend310P* (200-205)


class GraphMode(str, enum.Enum):
    """vLLM's CUDAGraphMode names, as vllm-ascend reads them for ACL graphs, and torchair's graph mode.

    TORCHAIR is vllm-ascend's other graph mode (additional_config torchair_graph_config.enabled, v0.9.0rc1
    to v0.11.0) and XLITE its xlite runtime (xlite_graph_config.enabled, v0.12.0rc1 on): the model runs as a
    whole elsewhere; the table refuses both (`selection.WHOLE_MODEL_MODES`).
    """

    NONE = "NONE"
    PIECEWISE = "PIECEWISE"
    FULL = "FULL"
    FULL_DECODE_ONLY = "FULL_DECODE_ONLY"
    FULL_AND_PIECEWISE = "FULL_AND_PIECEWISE"
    TORCHAIR = "TORCHAIR"
    XLITE = "XLITE"


@dataclass(frozen=True)
class KernelRow:
    """One row of the table; `when` is a tuple of (key, value) pairs (see the file's `fields`)."""

    id: str
    op: str
    releases: tuple[tuple[Version, Version | None], ...]
    chips: frozenset[ChipFamily]
    graph: frozenset[GraphMode] | None
    when: tuple[tuple[str, Any], ...]
    kernel: str
    recipe: str
    vllm_ascend: str
    source: str
    tag: str
    where: str
    note: str = ""
    line: int | None = None  # the line of `source` at `tag` where the call is made
    vllm_default: str = ""  # vllm-ascend's own compiled (_C_ascend) or Triton kernel, where that is its default
    differs: str = ""  # why ascend_backend deliberately runs something else than vllm-ascend here (the audit lists it)

    def covers(self, release: Version) -> bool:
        return any(first <= release and (last is None or release <= last) for first, last in self.releases)

    @property
    def citation(self) -> str:
        """'vllm_ascend/attention/attention_v1.py@v0.11.0:489 (_forward_decode_only)'."""
        line = f":{self.line}" if self.line else ""
        return f"{self.source}@{self.tag}{line} ({self.where})"

    @property
    def reference(self) -> str:
        """'v0.11.0:vllm_ascend/attention/attention_v1.py:489', the TAG:path:line form."""
        return f"{self.tag}:{self.source}" + (f":{self.line}" if self.line else "")

    @property
    def release_span(self) -> str:
        """'v0.7.3-v0.12.0rc1, v0.14.0rc1+' for tables."""
        parts = [
            f"v{first}" + ("+" if last is None else "" if last == first else f"-v{last}")
            for first, last in self.releases
        ]
        return ", ".join(parts)


@dataclass(frozen=True)
class Torchair:
    """Which releases have vllm-ascend's torchair graph mode, and where that was read."""

    releases: tuple[tuple[Version, Version | None], ...]
    citation: str

    def covers(self, release: Version) -> bool:
        return any(first <= release and (last is None or release <= last) for first, last in self.releases)


@dataclass(frozen=True)
class ChipSupport:
    """The releases in which vllm-ascend knows a chip family (a device type in its source, or its FAQ's list)."""

    chip: ChipFamily
    releases: tuple[tuple[Version, Version | None], ...]
    citation: str

    def covers(self, release: Version) -> bool:
        return any(first <= release and (last is None or release <= last) for first, last in self.releases)


@functools.cache
def chip_support() -> dict[ChipFamily, ChipSupport]:
    """Per chip family, where vllm-ascend knows it (`chips` in the table file)."""
    out = {}
    for name, raw in _read(TABLE_FILE)["chips"].items():
        chip = ChipFamily(name)
        spans = tuple(
            (
                _version(a, f"{TABLE_FILE} chips.{name}"),
                None if b is None else _version(b, f"{TABLE_FILE} chips.{name}"),
            )
            for a, b in raw["releases"]
        )
        out[chip] = ChipSupport(chip, spans, raw["citation"])
    return out


@functools.cache
def torchair() -> Torchair:
    raw = _read(TABLE_FILE)["torchair"]
    spans = tuple(
        (_version(a, f"{TABLE_FILE} torchair"), None if b is None else _version(b, f"{TABLE_FILE} torchair"))
        for a, b in raw["releases"]
    )
    return Torchair(spans, raw["citation"])


@dataclass(frozen=True)
class ReleaseInfo:
    """A vllm-ascend release with the torch_npu and CANN it was verified with (CANN None = not stated)."""

    release: Version
    torch_npu: str
    cann: str | None
    in_matrix: bool


def _version(text: str, where: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise ValueError(f"{where}: {text!r} is not a version") from None


def _row(raw: dict[str, Any]) -> KernelRow:
    where = f"{TABLE_FILE} row {raw.get('id', '?')!r}"
    missing = [
        k
        for k in ("id", "op", "releases", "chips", "kernel", "recipe", "vllm_ascend", "source", "tag", "where")
        if k not in raw
    ]
    if missing:
        raise ValueError(f"{where}: missing {missing}")
    if raw["op"] not in RECIPES:
        raise ValueError(f"{where}: unknown op {raw['op']!r}; ops: {sorted(RECIPES)}")
    if kernel_of(raw["op"], raw["recipe"]) != raw["kernel"]:
        raise ValueError(
            f"{where}: recipe {raw['recipe']!r} calls {kernel_of(raw['op'], raw['recipe'])}, not {raw['kernel']}"
        )
    unknown = set(raw.get("when", {})) - WHEN_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown condition(s) {sorted(unknown)}; known: {sorted(WHEN_KEYS)}")
    releases = tuple(
        (_version(first, where), None if last is None else _version(last, where)) for first, last in raw["releases"]
    )
    graph = raw.get("graph")
    return KernelRow(
        id=raw["id"],
        op=raw["op"],
        releases=releases,
        chips=frozenset(ChipFamily(c) for c in raw["chips"]),
        graph=None if graph is None else frozenset(GraphMode(g) for g in graph),
        when=tuple(sorted((k, _frozen(v)) for k, v in raw.get("when", {}).items())),
        kernel=raw["kernel"],
        recipe=raw["recipe"],
        vllm_ascend=raw["vllm_ascend"],
        source=raw["source"],
        tag=raw["tag"],
        where=raw["where"],
        note=raw.get("note", ""),
        line=raw.get("line"),
        vllm_default=raw.get("vllm_default", ""),
        differs=raw.get("differs", ""),
    )


def _frozen(value: Any) -> Any:
    """JSON lists -> tuples (rows are hashable and immutable)."""
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def _read(name: str) -> dict[str, Any]:
    return json.loads(resources.files("ascend_backend").joinpath("data", name).read_text(encoding="utf-8"))


@functools.cache
def kernel_table() -> tuple[KernelRow, ...]:
    """Every row, in file order (cached: package data cannot change while the process runs)."""
    rows = tuple(_row(raw) for raw in _read(TABLE_FILE)["rows"])
    ids = [r.id for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{TABLE_FILE}: row ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
    return rows


@functools.cache
def releases() -> tuple[ReleaseInfo, ...]:
    """The releases the table knows, oldest first."""
    items = [
        ReleaseInfo(_version(r["release"], RELEASES_FILE), r["torch_npu"], r["cann"], bool(r["in_matrix"]))
        for r in _read(RELEASES_FILE)["releases"]
    ]
    return tuple(sorted(items, key=lambda r: r.release))


def rows_for(op: str) -> tuple[KernelRow, ...]:
    return tuple(r for r in kernel_table() if r.op == op)
