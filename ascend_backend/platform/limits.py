"""The documented limits of each torch_npu kernel, as data (`ascend_backend/data/kernel_limits.json`), and the check.

    violation(("_npu_flash_attention_qlens",), CallShape(head_size=128, block_size=32, ...), ChipFamily.A2)
    # 'block size 32: the ATB prefix encoder (_npu_flash_attention_qlens) takes block size 128 only (...)'

The NPU guard asks `violation` for every call its recipe would make; a limit broken sends the call to the
native path with the returned text as the reason (the registry logs it once). The shape is what the
adapter reads off the op's arguments (`CallShape`); a field left None is not checked. Every limit names
where it is stated; where vllm-ascend departs from it the file says so (`vllm_ascend`). Torch-free: a
shape is plain numbers and names.

`quant_matmul_combinations(chip)` is the dtype table of npu_quant_matmul (x1, x2, scale, offset, bias,
pertoken_scale, output_dtype) for a chip family, which the contract tests hold every W8A8 call to.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ascend_backend.platform.kernels.table import ChipFamily

LIMITS_FILE = "kernel_limits.json"
CHECKS = frozenset(
    {
        "block_size_in",
        "block_size_multiple",
        "block_size_range",
        "head_size_max",
        "head_size_in",
        "head_size_multiple",
        "rotary_dim_multiple",
        "rotary_dim_le_head",
        "block_times_head_max",
        "prefix_multiple",
        "heads_divisible",
        "num_heads_max",
        "chips",
        "pertoken",
    }
)
WHEN_KEYS = frozenset({"queries", "paged", "dtypes", "head_size_gt", "pertoken", "chips"})


@dataclass(frozen=True)
class CallShape:
    """What a call hands a kernel, as far as limits are stated on it (None: not applicable or unknown)."""

    dtype: str | None = None  # 'float16' | 'bfloat16' | 'float32': the activation's dtype
    head_size: int | None = None
    rotary_dim: int | None = None
    block_size: int | None = None  # the paged KV cache's block size
    num_heads: int | None = None
    num_kv_heads: int | None = None
    max_query_len: int | None = None  # the longest query of the batch (1 = every sequence decodes one token)
    prefix_lens: tuple[int, ...] | None = None  # per sequence: context length minus query length
    paged: bool | None = None  # K/V read through a block table
    pertoken: bool | None = None  # a quantized matmul with a per-token activation scale


@dataclass(frozen=True)
class Limit:
    id: str
    kernel: str
    check: str
    value: Any
    when: tuple[tuple[str, Any], ...]
    text: str
    source: str
    vllm_ascend: str = ""

    @property
    def citation(self) -> str:
        return f"{self.id}: {self.source}"


def _limit(kernel: str, raw: Mapping[str, Any]) -> Limit:
    where = f"{LIMITS_FILE} {kernel} limit {raw.get('id', '?')!r}"
    missing = [k for k in ("id", "check", "value", "text", "source") if k not in raw]
    if missing:
        raise ValueError(f"{where}: missing {missing}")
    if raw["check"] not in CHECKS:
        raise ValueError(f"{where}: unknown check {raw['check']!r}; known: {sorted(CHECKS)}")
    unknown = set(raw.get("when", {})) - WHEN_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown condition(s) {sorted(unknown)}; known: {sorted(WHEN_KEYS)}")
    value = tuple(raw["value"]) if isinstance(raw["value"], list) else raw["value"]
    when = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in raw.get("when", {}).items()))
    return Limit(raw["id"], kernel, raw["check"], value, when, raw["text"], raw["source"], raw.get("vllm_ascend", ""))


def _read() -> dict[str, Any]:
    text = resources.files("ascend_backend").joinpath("data", LIMITS_FILE).read_text(encoding="utf-8")
    return json.loads(text)


@functools.cache
def limits() -> dict[str, tuple[Limit, ...]]:
    """kernel -> its limits, in file order (cached: package data cannot change while the process runs)."""
    return {
        kernel: tuple(_limit(kernel, raw) for raw in entry.get("limits", ()))
        for kernel, entry in _read()["kernels"].items()
    }


def _applies(limit: Limit, shape: CallShape, chip: ChipFamily) -> bool:
    for key, value in limit.when:
        if key == "queries":
            if shape.max_query_len is None or (shape.max_query_len > 1) != (value == "multi"):
                return False
        elif key == "paged":
            if shape.paged is None or shape.paged != value:
                return False
        elif key == "dtypes":
            if shape.dtype is None or shape.dtype not in value:
                return False
        elif key == "head_size_gt":
            if shape.head_size is None or shape.head_size <= value:
                return False
        elif key == "pertoken":
            if shape.pertoken is None or shape.pertoken != value:
                return False
        elif key == "chips" and chip.value not in value:
            return False
    return True


def _broken(limit: Limit, shape: CallShape, chip: ChipFamily) -> str | None:
    """What of `shape` breaks `limit` ('block size 32'), or None when it holds or cannot be told."""
    check, value = limit.check, limit.value
    block, head = shape.block_size, shape.head_size
    if check == "chips":
        return None if chip.value in value else f"chip {chip.value}"
    if check == "pertoken":
        return "a per-token scale" if shape.pertoken and not value else None
    if check == "heads_divisible":
        heads, kv = shape.num_heads, shape.num_kv_heads
        return None if heads is None or not kv or heads % kv == 0 else f"{heads} heads over {kv} KV heads"
    if check == "prefix_multiple":
        odd = [p for p in shape.prefix_lens or () if p % value]
        return f"a cached prefix not a multiple of {value}" if odd else None
    if check == "rotary_dim_le_head":
        rot = shape.rotary_dim
        return f"rotary_dim {rot} > head size {head}" if rot is not None and head is not None and rot > head else None
    if check == "num_heads_max":
        return f"{shape.num_heads} heads" if shape.num_heads is not None and shape.num_heads > value else None
    if check == "block_times_head_max":
        ok = block is None or head is None or block * head <= value
        return None if ok else f"block size {block} x head size {head}"
    return _size_broken(check, value, shape)


def _size_broken(check: str, value: Any, shape: CallShape) -> str | None:
    subject, size = {
        "block": ("block size", shape.block_size),
        "head_": ("head size", shape.head_size),
        "rotar": ("rotary_dim", shape.rotary_dim),
    }[check[:5]]
    if size is None:
        return None
    if check.endswith("_in"):
        ok = size in value
    elif check.endswith("_multiple"):
        ok = size % value == 0
    elif check.endswith("_range"):
        ok = value[0] <= size <= value[1]
    else:  # _max
        ok = size <= value
    return None if ok else f"{subject} {size}"


def violation(kernels: tuple[str, ...], shape: CallShape, chip: ChipFamily) -> str | None:
    """The first documented limit of `kernels` this call breaks, as a reason; None when the call is within them."""
    for kernel in kernels:
        for limit in limits().get(kernel, ()):
            if not _applies(limit, shape, chip):
                continue
            broken = _broken(limit, shape, chip)
            if broken is not None:
                return f"{broken}: {limit.text} ({limit.citation})"
    return None


def quant_matmul_combinations(chip: ChipFamily) -> tuple[tuple[tuple[str | None, ...], ...], ...]:
    """npu_quant_matmul's documented dtype rows for `chip`: each a tuple of allowed dtype names (None = not
    passed) for x1, x2, scale, offset, bias, pertoken_scale and output_dtype."""
    table = _read()["kernels"]["npu_quant_matmul"]["dtypes"]
    family = table["same_as"].get(chip.value, chip.value)
    return tuple(tuple(tuple(cell) for cell in row) for row in table["tables"][family])


__all__ = ["CallShape", "Limit", "limits", "quant_matmul_combinations", "violation"]
