"""Choose the kernel for an op: the first table row that matches the stack and the call, or native with a reason.

    from ascend_backend.platform.kernels import CallFacts, choose
    choice = choose("paged_decode_attention", CallFacts(head_size=128))
    choice.kernel, choice.recipe, choice.row.citation
    # ('npu_fused_infer_attention_score', 'fia_tnd_paged',
    #  'vllm_ascend/attention/attention_v1.py@v0.13.0 (forward_impl -> forward_fused_infer_attention ...)')

`select(op, context, call)` is the pure function (tests and `workbench.kernels` feed it any stack);
`choose(op, call)` uses this process's context (`active_context()`: this machine, then the
ASCEND_BACKEND_KERNELS override) and sends ATB kernels to native when NNAL/ATB cannot load, because
op-plugin only raises that on the first `_npu_*` call.
"""

from __future__ import annotations

import fnmatch
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from importlib import metadata
from typing import Any

from ascend_backend import envs
from ascend_backend.platform import device
from ascend_backend.platform.kernels.context import (
    OVERRIDE_VAR,
    SelectionContext,
    StackFacts,
    apply_override,
    build_context,
    facts_from_stack,
)
from ascend_backend.platform.kernels.engine import EngineFacts, engine_facts
from ascend_backend.platform.kernels.recipes import NATIVE, RECIPES, REFUSED, calls, kernel_of
from ascend_backend.platform.kernels.table import GraphMode, KernelRow, chip_support, rows_for, torchair

# Graph modes in which vllm-ascend runs the model outside the per-op path the table describes.
WHOLE_MODEL_MODES = {
    GraphMode.TORCHAIR: (
        "vllm-ascend's torchair graph mode compiles the whole model into one GE graph (additional_config "
        "torchair_graph_config.enabled; vllm_ascend/torchair/, {span}) with its own attention, rotary and "
        "norm implementations; ascend_backend does not reproduce those kernels. Compare against the eager or "
        "ACL-graph modes (cudagraph_mode) instead"
    ),
    GraphMode.XLITE: (
        "vllm-ascend's xlite graph mode runs the whole model in the xlite runtime (additional_config "
        "xlite_graph_config.enabled; vllm_ascend/xlite/ from v0.12.0rc1); ascend_backend does not reproduce it"
    ),
}


@dataclass(frozen=True)
class CallFacts:
    """The properties of one call that table rows may depend on (None = not applicable / unknown)."""

    head_size: int | None = None
    rotary_dim: int | None = None
    neox: bool | None = None
    mrope_section: tuple[int, ...] | None = None
    sliding_window: bool | None = None  # the attention layer has a sliding window
    last_dim: int | None = None  # the input's last dimension (alignment conditions)
    num_tokens: int | None = None  # the batch's tokens (decode: the batch size pa_shape_list is matched against)
    prequantized: bool | None = None  # a quantized linear's activation arrives int8 (a fused norm-quant ran)
    scheme: str | None = None  # the quantization scheme of a weight (W8A8 | W8A8_DYNAMIC)


# What describe() and the tables assume when no call is at hand: a Llama/Qwen-style layer.
TYPICAL_CALL = CallFacts(
    head_size=128,
    rotary_dim=128,
    neox=True,
    mrope_section=(16, 24, 24),
    sliding_window=False,
    last_dim=37888,
    prequantized=False,
    scheme="W8A8",
)


def kernels_typical(**facts: Any) -> CallFacts:
    """TYPICAL_CALL with the given facts replaced (an adapter's facts function names only what it knows)."""
    return replace(TYPICAL_CALL, **facts)


@dataclass(frozen=True)
class KernelChoice:
    """The kernel an op runs, the recipe that builds its arguments, and the row (None when pinned or no row)."""

    op: str
    kernel: str
    recipe: str
    row: KernelRow | None
    reason: str

    @property
    def native(self) -> bool:
        return self.recipe == NATIVE

    @property
    def citation(self) -> str:
        return self.row.citation if self.row is not None else self.reason


def _condition_holds(key: str, value: object, context: SelectionContext, call: CallFacts) -> bool:
    if key == "pa_shape":
        in_list = context.pa_shape or (call.num_tokens is not None and call.num_tokens in context.pa_shape_list)
        return in_list == value
    if key == "sliding_window":
        return bool(call.sliding_window) == value
    if key == "prequantized":
        return bool(call.prequantized) == value
    if key == "last_dim_multiple":
        return call.last_dim is not None and call.last_dim % int(value) == 0  # type: ignore[call-overload]
    if key == "architecture":
        return context.architecture is not None and any(
            fnmatch.fnmatchcase(context.architecture, pattern)
            for pattern in value  # type: ignore[attr-defined]
        )
    if key == "checkpoint":
        return (context.checkpoint or "msmodelslim") == value
    if key == "scheme":
        return call.scheme is not None and call.scheme in value  # type: ignore[operator]
    if key == "cann_prefix":
        return bool(context.cann) and str(context.cann).startswith(str(value))
    if key == "neox":
        return call.neox == value
    if key == "partial_rotary":
        if call.rotary_dim is None or call.head_size is None:
            return False
        return (call.rotary_dim < call.head_size) == value
    if key == "mrope_section":
        return call.mrope_section is not None and tuple(call.mrope_section) in value  # type: ignore[operator]
    actual = getattr(call, key)
    return actual is not None and actual in value  # type: ignore[operator]


def row_matches(row: KernelRow, context: SelectionContext, call: CallFacts) -> bool:
    if context.release is None or not row.covers(context.release) or context.chip not in row.chips:
        return False
    if row.graph is not None and context.graph_mode not in row.graph:
        return False
    return all(_condition_holds(key, value, context, call) for key, value in row.when)


def _row_reason(row: KernelRow) -> str:
    if row.recipe == NATIVE:
        why = row.note or f"vllm-ascend runs {row.vllm_ascend}"
        return f"table row {row.id}: {why}"
    return f"table row {row.id}"


def select(op: str, context: SelectionContext, call: CallFacts = TYPICAL_CALL) -> KernelChoice:
    """The choice for `op` under `context`: a pin, else the first matching row, else native with the reason.

    Native without a row when: the op is one ascend_backend refuses (REFUSED); the release is unknown, or
    ambiguous and the candidates' kernels differ; vllm-ascend does not know the chip at that release; the
    graph mode runs the whole model elsewhere (torchair, xlite).
    """
    if op in REFUSED:
        return KernelChoice(op, NATIVE, NATIVE, None, f"refused: {REFUSED[op]}")
    if op not in RECIPES:
        raise ValueError(f"no kernel-selection rows for op {op!r}; ops: {', '.join(sorted(RECIPES))}")
    pinned = dict(context.pins).get(op)
    if pinned is not None:
        return KernelChoice(op, kernel_of(op, pinned), pinned, None, f"pinned by {OVERRIDE_VAR}={op}={pinned}")
    if context.ambiguous:
        return _select_ambiguous(op, context, call)
    if context.release is None:
        return KernelChoice(op, NATIVE, NATIVE, None, f"no vllm-ascend release known: {context.release_basis}")
    support = chip_support().get(context.chip)
    if support is not None and not support.covers(context.release):
        return KernelChoice(
            op,
            NATIVE,
            NATIVE,
            None,
            f"vllm-ascend {context.release_label} does not know {context.chip.value} ({support.citation}); "
            f"pin another chip with {OVERRIDE_VAR}=chip=A2 to see that chip's kernels",
        )
    if context.graph_mode in WHOLE_MODEL_MODES:
        return KernelChoice(op, NATIVE, NATIVE, None, _whole_model_refusal(context))
    for row in rows_for(op):
        if row_matches(row, context, call):
            return KernelChoice(op, row.kernel, row.recipe, row, _row_reason(row))
    return KernelChoice(
        op,
        NATIVE,
        NATIVE,
        None,
        f"no table row for {op} on vllm-ascend {context.release_label}, chip {context.chip.value}",
    )


def _whole_model_refusal(context: SelectionContext) -> str:
    mode = context.graph_mode
    span = torchair()
    if mode is GraphMode.TORCHAIR and context.release is not None and not span.covers(context.release):
        return f"vllm-ascend {context.release_label} has no torchair graph mode ({span.citation})"
    text = WHOLE_MODEL_MODES[mode].format(span=span.citation)
    return f"graph mode {mode.value}: {text}"


def _select_ambiguous(op: str, context: SelectionContext, call: CallFacts) -> KernelChoice:
    """One candidate release's choice when all candidates agree on it; otherwise native, naming each."""
    choices = [
        (version, select(op, replace(context, release=version, candidates=()), call)) for version in context.candidates
    ]
    first = choices[0][1]
    if all((c.kernel, c.recipe) == (first.kernel, first.recipe) for _, c in choices):
        row = first.row
        reason = f"{first.reason} (the same for every candidate release: {context.release_label})"
        return KernelChoice(op, first.kernel, first.recipe, row, reason)
    listed = "; ".join(f"v{v}: {c.kernel} ({c.recipe})" for v, c in choices)
    return KernelChoice(
        op,
        NATIVE,
        NATIVE,
        None,
        f"ambiguous release, the candidates differ for {op}: {listed}. {context.release_basis}",
    )


def _installed(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def facts_from_machine() -> StackFacts:
    """This process's stack: package metadata always; CANN and the device name only where torch_npu works."""
    return StackFacts(
        vllm_ascend=_installed("vllm-ascend", "vllm_ascend"),
        torch_npu=_installed("torch-npu", "torch_npu"),
        cann=device.cann_version(),
        chip_name=device.npu_device_name(),
    )


@functools.lru_cache(maxsize=8)
def _context_for(override: str, engine: EngineFacts | None = None) -> SelectionContext:
    # Keyed by the override's raw text and the engine's facts: the machine cannot change while we run,
    # the variable and (inside vLLM) the engine config can.
    context = build_context(facts_from_machine())
    if engine is not None:
        context = replace(
            context,
            graph_mode=engine.graph_mode,
            graph_basis=engine.graph_basis,
            pa_shape_list=engine.pa_shape_list,
            architecture=engine.architecture,
        )
    return apply_override(context, envs.ASCEND_BACKEND_KERNELS)


def active_context() -> SelectionContext:
    """This process's context: machine facts, the vLLM engine's config when running inside one, then
    ASCEND_BACKEND_KERNELS (which wins); cached per override value and engine facts."""
    return _context_for(os.environ.get(OVERRIDE_VAR, ""), engine_facts())


def context_for_stack(
    stack: Mapping[str, Any], *, graph_mode: GraphMode = GraphMode.NONE, pa_shape: bool = False
) -> SelectionContext:
    """The context of a stored stack fingerprint (no override applies: it describes another machine)."""
    return build_context(facts_from_stack(stack), graph_mode=graph_mode, pa_shape=pa_shape)


def _without_atb(choice: KernelChoice) -> KernelChoice:
    """`choice` itself, or native with the ATB reason when it is an ATB kernel and ATB cannot load."""
    if not any(call.startswith("_npu_") for call in calls(choice.kernel)):
        return choice
    atb = device.atb_status()
    if atb.available:
        return choice
    return KernelChoice(
        choice.op,
        NATIVE,
        NATIVE,
        choice.row,
        f"{choice.kernel} is an ATB kernel and ATB is unusable: {atb.kind.value} ({atb.detail}). Fix: {atb.fix}",
    )


@functools.lru_cache(maxsize=1024)
def _select_here(op: str, call: CallFacts, override: str, engine: EngineFacts | None) -> KernelChoice:
    # Cached per (op, call facts, override text, engine facts): an adapter asks on every call, in a hot loop.
    return select(op, _context_for(override, engine), call)


def choose(op: str, call: CallFacts = TYPICAL_CALL) -> KernelChoice:
    """The choice for this process, with ATB kernels sent to native when NNAL/ATB is unusable."""
    return _without_atb(_select_here(op, call, os.environ.get(OVERRIDE_VAR, ""), engine_facts()))


def explain(op: str) -> tuple[str, str]:
    """(kernel, 'row id: citation') an NPU runs for `op` on this stack, for the registry's describe().

    The table's choice even where this machine has no NPU (so a CPU machine shows what an NPU would
    run); native with the ATB reason only where torch_npu works but ATB does not. Where vllm-ascend's
    default is its own compiled or Triton kernel, the text says so: ascend_backend calls the torch_npu
    kernel named, vllm-ascend the one after "vllm-ascend's default".
    """
    choice = select(op, active_context())
    if device.npu_status().available:
        choice = _without_atb(choice)
    where = f"{choice.row.id}: {choice.row.citation}" if choice.row is not None else choice.reason
    if choice.native and choice.row is not None and choice.row.recipe != NATIVE:
        where = f"{choice.reason} [{where}]"
    if choice.row is not None and choice.row.vllm_default:
        where = f"{where}; vllm-ascend's default: {choice.row.vllm_default}"
    if choice.row is not None and choice.row.differs:
        where = f"{where}; differs: {choice.row.differs}"
    return choice.kernel, where
