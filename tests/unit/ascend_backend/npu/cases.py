"""Contract cases: for every kernel-table row, every release it covers, and every op-plugin commit the torch_npu
wheel of that release may have been built from, a stack and a call that reach the row; and the adapter's inputs.

A row is reachable at a release when some (chip, graph mode, call) makes it the first match; `reach(row, release)`
finds one or returns None (shadowed there by a row above). A row reached at no release is a table bug.
Releases are grouped by the op-plugin commit their wheel was built from (`schema.wheel_commits`): the adapter's
call depends on the row's recipe and the inputs, not on the release, so one case per (row, commit) checks every
release it stands for (listed in the case). Inputs are built on the `meta` device, which stands for the NPU:
shapes, dtypes and devices are real, data is absent, and any attempt to read device data on the host (a
hidden sync) raises. Lengths that vllm-ascend keeps on the host are CPU tensors; the quantized linears'
tensors are the buffers of the executor's own modules (`ascend_backend.models.quantized`), in the model dtype
they run in, so a float16 model hands the adapters float16 scales exactly as it would on the NPU.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Any

import torch
from packaging.version import Version

from ascend_backend.platform import kernels
from ascend_backend.platform.kernels import CallFacts, ChipFamily, GraphMode, KernelRow, SelectionContext, calls
from ascend_backend.platform.kernels.table import releases
from tests.unit.ascend_backend.npu.schema import available, schema_data, wheel_commits

DEVICE = torch.device("meta")
MAIN = "main"  # the wheel of releases newer than the last tag read: op-plugin master
CHIP_ORDER = (ChipFamily.A2, ChipFamily.A3, ChipFamily.A5, ChipFamily.P310)

# Call variants tried in order until the row is the first match (a Llama/Qwen layer first).
_BASE = CallFacts(
    head_size=128,
    rotary_dim=128,
    neox=True,
    mrope_section=(16, 24, 24),
    sliding_window=False,
    last_dim=512,
    num_tokens=3,
    prequantized=False,
    scheme="W8A8",
)
VARIANTS = (
    _BASE,
    replace(_BASE, head_size=64, rotary_dim=64, mrope_section=(8, 12, 12)),
    replace(_BASE, rotary_dim=64),
    replace(_BASE, neox=False),
    replace(_BASE, last_dim=500),
    replace(_BASE, scheme="W8A8_DYNAMIC"),
)


@dataclass(frozen=True)
class Case:
    row: KernelRow
    release: Version  # the first release of `releases`: its context drives the adapter
    releases: tuple[Version, ...]  # every release this case stands for (same row, same op-plugin commit)
    torch_npu: str  # the wheel of `release` ('main' after the last tag)
    commit: str  # the op-plugin commit the wheel was built from (one of its candidates)
    commits: tuple[str, ...]  # every commit of `releases`' wheels with the same interface for this row
    context: SelectionContext
    call: CallFacts

    @property
    def id(self) -> str:
        span = f"v{self.releases[0]}" + (f"..v{self.releases[-1]}" if len(self.releases) > 1 else "")
        return f"{self.row.id}@{span}[{self.context.chip.value},{self.torch_npu},{self.commit[:8]}]"

    @property
    def override(self) -> str:
        """The ASCEND_BACKEND_KERNELS value that recreates this context in the adapters."""
        c = self.context
        parts = [
            f"release={self.release}",
            f"chip={c.chip.value}",
            f"graph={c.graph_mode.value}",
            f"pa_shape={int(c.pa_shape)}",
        ]
        if c.cann:
            parts.append(f"cann={c.cann}")
        if c.architecture:
            parts.append(f"arch={c.architecture}")
        if c.checkpoint:
            parts.append(f"checkpoint={c.checkpoint}")
        return ",".join(parts)


def _context(row: KernelRow, release: Version, cann: str | None) -> SelectionContext:
    chip = next(c for c in CHIP_ORDER if c in row.chips)
    graph = sorted(row.graph, key=lambda m: m.value)[0] if row.graph else GraphMode.NONE
    when = dict(row.when)
    if "cann_prefix" in when:
        cann = f"{when['cann_prefix']}.RC1"
    context = SelectionContext(
        release, "contract case", (), chip, chip.value, cann, graph, bool(when.get("pa_shape", False))
    )
    if "architecture" in when:
        context = replace(context, architecture=when["architecture"][0].replace("*", "X"))
    if "checkpoint" in when:
        context = replace(context, checkpoint=when["checkpoint"])
    return context


def _with_when(call: CallFacts, row: KernelRow) -> CallFacts:
    when = dict(row.when)
    changes: dict[str, Any] = {}
    if "head_size" in when:
        changes["head_size"] = when["head_size"][0]
        changes["rotary_dim"] = when["head_size"][0]
    if "rotary_dim" in when:
        changes["rotary_dim"] = when["rotary_dim"][0]
    if "neox" in when:
        changes["neox"] = when["neox"]
    if when.get("partial_rotary"):
        changes["rotary_dim"] = (changes.get("head_size") or call.head_size) // 2
    if "mrope_section" in when:
        changes["mrope_section"] = tuple(when["mrope_section"][0])
    if "sliding_window" in when:
        changes["sliding_window"] = when["sliding_window"]
    if "last_dim_multiple" in when:
        changes["last_dim"] = 64 * int(when["last_dim_multiple"])
    if "prequantized" in when:
        changes["prequantized"] = when["prequantized"]
    if "scheme" in when:
        changes["scheme"] = when["scheme"][0]
    return replace(call, **changes)


def reach(row: KernelRow, release: Version, cann: str | None) -> tuple[SelectionContext, CallFacts] | None:
    context = _context(row, release, cann)
    for variant in VARIANTS:
        call = _with_when(variant, row)
        choice = kernels.select(row.op, context, call)
        if choice.row is not None and choice.row.id == row.id:
            return context, call
    # An M-RoPE row for other sections: any non-[16, 24, 24] section reaches it.
    if row.op == "mrope":
        call = CallFacts(head_size=64, rotary_dim=64, neox=True, mrope_section=(8, 12, 12))
        if (choice := kernels.select(row.op, context, call)).row is not None and choice.row.id == row.id:
            return context, call
    return None


def _releases_of(row: KernelRow) -> list[tuple[Version, str, str | None]]:
    """(release, torch_npu, cann) for every known release the row covers, plus main for open rows."""
    known = [(r.release, r.torch_npu, r.cann) for r in releases() if row.covers(r.release)]
    newest = releases()[-1]
    if any(last is None for _first, last in row.releases):
        first_open = max(first for first, last in row.releases if last is None)
        main = max(
            first_open, Version(f"{newest.release}.post0") if not newest.release.is_postrelease else newest.release
        )
        if row.covers(main) and main not in [k[0] for k in known]:
            known.append((main, "main", None))
    return known


def _interface(row: KernelRow, commit: str, torch_npu: str) -> tuple:
    """What a call of `row` can see of op-plugin at `commit`: its functions' schemas, implicit arguments and
    availability for the wheel's torch. Commits with the same interface check the same way."""
    data = schema_data()["commits"][commit]
    seen = []
    for function in calls(row.kernel):
        entry = data["functions"].get(function)
        implied = tuple(sorted(data["implicit"].get(function, {}).items()))
        usable = entry is not None and available(commit, function, torch_minor(torch_npu))
        seen.append((function, entry and entry["schema"], str(implied), usable))
    return tuple(seen)


def cases() -> list[Case]:
    """One case per (row, op-plugin interface) over every release the row covers and is the first match at,
    and every commit each release's wheel may have been built from.

    Raises when a row is the first match at none of its releases (a row above shadows it everywhere).
    """
    found = []
    for row in kernels.kernel_table():
        grouped: dict[tuple, list[tuple[Version, str, str, SelectionContext, CallFacts]]] = {}
        for release, torch_npu, cann in _releases_of(row):
            reached = reach(row, release, cann)
            if reached is None:
                continue
            for commit in wheel_commits(torch_npu):
                grouped.setdefault(_interface(row, commit, torch_npu), []).append(
                    (release, torch_npu, commit, *reached)
                )
        if not grouped:
            raise AssertionError(f"table row {row.id} is never the first match: a row above shadows it")
        for items in grouped.values():
            release, torch_npu, commit, context, call = items[0]
            releases = tuple(dict.fromkeys(item[0] for item in items))
            commits = tuple(dict.fromkeys(item[2] for item in items))
            found.append(Case(row, release, releases, torch_npu, commit, commits, context, call))
    return found


def torch_minor(torch_npu: str) -> str:
    """'2.9.0.post1' -> 'v2.9'; 'main' -> the newest torch op-plugin covers."""
    if torch_npu == "main":
        return "v2.10"
    major, minor = torch_npu.split(".")[:2]
    return f"v{major}.{minor}"


# --------------------------------------------------------------------------------------------- inputs
def _act(*shape: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(*shape, dtype=dtype, device=DEVICE)


def _int32_host(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int32)


def _paged(seq_lens: list[int], heads_kv: int, head: int, dtype: torch.dtype, block: int = 128) -> tuple:
    per_seq = [-(-n // block) for n in seq_lens]
    cache = _act(2, sum(per_seq) + 1, block, heads_kv, head, dtype=dtype)
    tables = torch.empty(len(seq_lens), max(per_seq), dtype=torch.int32, device=DEVICE)
    return cache, tables


def inputs(op: str, call: CallFacts, dtype: torch.dtype) -> tuple[Any, ...]:
    """Positional arguments of the op (its declaration: ascend_backend.attention.ops, ascend_backend.ops,
    ascend_backend.quantization.ops)."""
    head = call.head_size or 128
    heads, kv_heads = 8, 2
    scale = head**-0.5
    if op == "reshape_and_cache":
        cache, _ = _paged([300], kv_heads, head, dtype)
        slots = torch.empty(6, dtype=torch.int32, device=DEVICE)
        return _act(6, kv_heads, head, dtype=dtype), _act(6, kv_heads, head, dtype=dtype), cache, slots
    if op == "prefill_attention":
        lens = [5, 130, 7]
        t = sum(lens)
        return (
            _act(t, heads, head, dtype=dtype),
            _act(t, kv_heads, head, dtype=dtype),
            _act(t, kv_heads, head, dtype=dtype),
            _int32_host(lens),
            scale,
        )
    if op == "paged_decode_attention":
        seq_lens = [1, 129, 300]
        cache, tables = _paged(seq_lens, kv_heads, head, dtype)
        return _act(3, heads, head, dtype=dtype), cache, tables, _int32_host(seq_lens), scale
    if op in ("prefill_cache_hit_attention", "chunked_prefill_attention"):
        seq_lens = [130, 256, 40]
        query_lens = [2, 128, 40] if op == "prefill_cache_hit_attention" else [1, 128, 1]
        cache, tables = _paged(seq_lens, kv_heads, head, dtype)
        return (
            _act(sum(query_lens), heads, head, dtype=dtype),
            cache,
            tables,
            _int32_host(query_lens),
            _int32_host(seq_lens),
            scale,
        )
    if op == "rotary_embedding":
        t = 5
        positions = torch.empty(t, dtype=torch.int64, device=DEVICE)
        cache = _act(4096, call.rotary_dim or head, dtype=dtype)
        return positions, _act(t, 4 * head, dtype=dtype), _act(t, 2 * head, dtype=dtype), head, cache, bool(call.neox)
    if op == "mrope":
        t = 5
        positions = torch.empty(3, t, dtype=torch.int64, device=DEVICE)
        cache = _act(4096, 2 * sum(call.mrope_section or (16, 24, 24)), dtype=dtype)
        rot = cache.shape[-1]
        return (
            positions,
            _act(t, 4 * rot, dtype=dtype),
            _act(t, 2 * rot, dtype=dtype),
            rot,
            cache,
            call.mrope_section,
            True,
        )
    if op in ("rms_norm", "gemma_rms_norm"):
        return _act(4, 256, dtype=dtype), _act(256, dtype=dtype), 1e-6
    if op in ("add_rms_norm", "gemma_add_rms_norm"):
        return _act(4, 256, dtype=dtype), _act(4, 256, dtype=dtype), _act(256, dtype=dtype), 1e-6
    if op == "silu_and_mul":
        return (_act(4, call.last_dim or 512, dtype=dtype),)
    if op in ("quick_gelu", "gelu", "gelu_tanh"):
        return (_act(4, 256, dtype=dtype),)
    if op in ("w8a8_linear", "w8a8_dynamic_linear"):
        return _linear_inputs(op, call, dtype)
    if op == "quant_weight_layout":
        return torch.empty(256, 128, dtype=torch.int8, device=DEVICE), call.scheme or "W8A8"
    if op == "add_rms_norm_quant":
        # The norm before a static linear gets that linear's activation scale and offset (its buffers).
        linear = _linear_module("w8a8_linear", dtype)
        return (
            _act(4, 256, dtype=dtype),
            _act(4, 256, dtype=dtype),
            _act(256, dtype=dtype),
            1e-6,
            linear.input_scale,
            linear.input_offset,
        )
    raise KeyError(f"no contract inputs for op {op!r}")


def _linear_module(op: str, dtype: torch.dtype) -> torch.nn.Module:
    """The executor's module for a [K=256 -> N=128] layer in `dtype`, its buffers moved to the NPU stand-in."""
    from ascend_backend.models.quantized import DynamicW8A8Linear, StaticW8A8Linear
    from ascend_backend.quantization import QuantizedLinear, QuantType

    g = torch.Generator().manual_seed(0)
    weight = torch.randint(-127, 128, (128, 256), generator=g, dtype=torch.int8)  # [out, in] as a checkpoint holds it
    scale = torch.rand(128, generator=g) / 100 + 1e-3
    if op == "w8a8_dynamic_linear":
        layer = QuantizedLinear(QuantType.W8A8_DYNAMIC, weight, scale, bias=torch.rand(128, generator=g))
        return DynamicW8A8Linear(layer, dtype).to(DEVICE)
    layer = QuantizedLinear(QuantType.W8A8, weight, scale, torch.rand(128, generator=g), torch.tensor(0.02), 3)
    return StaticW8A8Linear(layer, dtype).to(DEVICE)


def _linear_inputs(op: str, call: CallFacts, dtype: torch.dtype) -> tuple[Any, ...]:
    """What `models.quantized` hands the op: x [5, K] and the module's buffers, as a `dtype` model holds them."""
    module = _linear_module(op, dtype)
    x = _act(5, 256, dtype=dtype)
    if op == "w8a8_dynamic_linear":
        return x, module.weight, module.weight_scale, module.bias
    if call.prequantized:
        x = torch.empty(5, 256, dtype=torch.int8, device=DEVICE)  # the fused norm before it quantized x already
    return x, module.weight, module.input_scale, module.input_offset, module.deq_scale, module.quant_bias


def all_cases_by_dtype() -> list[tuple[Case, torch.dtype]]:
    return list(itertools.product(cases(), (torch.float16, torch.bfloat16)))
