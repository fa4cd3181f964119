"""Which NPU kernel each op runs on a stack, and what changes between two stacks, releases, chips or graph modes.

The answers come from ascend_backend's kernel-selection table (`ascend_backend.platform.kernels`: one row per
vllm-ascend release range, chip family, op or attention state and graph mode, each cited from
vllm-ascend's source). The workbench adds reading stacks from files, the comparison, and side specs:

    from workbench.stack.kernels import kernel_diff, read_stack, side_context
    for change in kernel_diff(read_stack("v0110.lock.yaml"), read_stack("v0180.lock.yaml")):
        print(change.describe())
    # paged_decode_attention (DecodeOnly): kernel _npu_paged_attention -> npu_fused_infer_attention_score ...

    a = side_context("release=0.18.0,chip=A2", base)      # or "0.18.0", "A5", "FULL_DECODE_ONLY", a file
    b = side_context("release=0.18.0,chip=A5", base)
    kernel_diff_contexts(a, b)                              # every op whose kernel, recipe or row changes

A stack is the dict `workbench.stack.fingerprint.stack()` writes (`versions`, `cann`, `chip`, ...); a file may
hold it bare, under `stack` (a lock file) or under `provenance.stack` (any result file). Missing keys
mean unknown: the selection says how it filled each gap (docs/METHOD.md §2, §16).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from ascend_backend.platform import kernels
from ascend_backend.platform.kernels import CallFacts, GraphMode, KernelChoice, SelectionContext, chip_family
from ascend_backend.platform.kernels.context import CHECKPOINTS
from workbench.errors import WorkbenchError
from workbench.results.envelope import provenance_of

SPEC_KEYS = ("release", "chip", "graph", "pa_shape", "cann", "torch_npu", "arch", "checkpoint")


@dataclass(frozen=True)
class KernelChange:
    """One op (or attention state) whose call differs between side A and side B."""

    op: str
    state: str | None
    kernel_a: str
    kernel_b: str
    row_a: str  # 'row id: file@tag:line (function)', or why no row applied
    row_b: str
    release_a: str
    release_b: str
    recipe_a: str = ""
    recipe_b: str = ""
    what: str = "kernel"  # kernel | arguments (same kernel, another recipe) | vllm-ascend's default (its own kernel)

    @property
    def label(self) -> str:
        return f"{self.op} ({self.state})" if self.state else self.op

    def describe(self) -> str:
        """'paged_decode_attention (DecodeOnly) moved from _npu_paged_attention (v0.11.0) to FIA (v0.18.0)'."""
        if self.what == "kernel":
            change = f"moved from {self.kernel_a} ({self.release_a}) to {self.kernel_b} ({self.release_b})"
        elif self.what == "arguments":
            change = (
                f"keeps {self.kernel_a} with other arguments: recipe {self.recipe_a} ({self.release_a}) -> "
                f"{self.recipe_b} ({self.release_b})"
            )
        else:
            change = (
                f"keeps {self.kernel_a} ({self.recipe_a}); vllm-ascend's own default kernel changes "
                f"({self.release_a} -> {self.release_b})"
            )
        return f"{self.label} {change} [A: {self.row_a}; B: {self.row_b}]"

    def row(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "state": self.state or "",
            "what": self.what,
            "kernel_a": self.kernel_a,
            "kernel_b": self.kernel_b,
            "recipe_a": self.recipe_a,
            "recipe_b": self.recipe_b,
            "release_a": self.release_a,
            "release_b": self.release_b,
            "row_a": self.row_a,
            "row_b": self.row_b,
        }


def _where(choice: KernelChoice) -> str:
    return f"{choice.row.id}: {choice.row.citation}" if choice.row is not None else choice.reason


def _graph_mode(value: str | GraphMode) -> GraphMode:
    try:
        return value if isinstance(value, GraphMode) else GraphMode(str(value).upper())
    except ValueError:
        raise WorkbenchError(
            f"graph mode {value!r} is not one of {', '.join(m.value for m in GraphMode)} (vLLM's cudagraph_mode, "
            "or vllm-ascend's TORCHAIR / XLITE)"
        ) from None


def context_of(
    stack: Mapping[str, Any] | None,
    *,
    graph_mode: str | GraphMode | None = None,
    pa_shape: bool = False,
    architecture: str | None = None,
    checkpoint: str | None = None,
) -> SelectionContext:
    """The selection context of a stored stack, or of this machine (engine config, ASCEND_BACKEND_KERNELS)
    when None. `graph_mode` given (`--graph-mode`) overrides what the machine or engine said."""
    if stack is None:
        context = kernels.active_context()
    elif not isinstance(stack, Mapping):
        raise WorkbenchError(
            f"a stack must be a mapping with 'versions', 'cann', 'chip', ...; got {type(stack).__name__}"
        )
    else:
        context = kernels.context_for_stack(stack)
    return with_serving(
        context, graph_mode=graph_mode, pa_shape=pa_shape, architecture=architecture, checkpoint=checkpoint
    )


def with_serving(
    context: SelectionContext,
    *,
    graph_mode: str | GraphMode | None = None,
    pa_shape: bool = False,
    architecture: str | None = None,
    checkpoint: str | None = None,
) -> SelectionContext:
    """The context with the serving configuration the caller gave (unchanged where None / False)."""
    changes: dict[str, Any] = {}
    if graph_mode is not None:
        changes.update(graph_mode=_graph_mode(graph_mode), graph_basis="given (--graph-mode)")
    if pa_shape:
        changes["pa_shape"] = True
    if architecture:
        changes["architecture"] = architecture
    if checkpoint:
        if checkpoint not in CHECKPOINTS:
            raise WorkbenchError(f"checkpoint {checkpoint!r} is not one of {', '.join(CHECKPOINTS)}")
        changes["checkpoint"] = checkpoint
    return replace(context, **changes) if changes else context


def _spec_items(spec: str) -> list[tuple[str, str]]:
    """'release=0.18.0,chip=A3' -> pairs; a bare token is a release ('0.18.0', 'v0.18.0'), a chip ('A5',
    'Ascend910B4') or a graph mode ('FULL_DECODE_ONLY')."""
    items = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        if "=" in part:
            key, _, value = part.partition("=")
            key = key.strip().lower().replace("-", "_")
            if key not in SPEC_KEYS:
                raise WorkbenchError(
                    f"{spec!r}: unknown key {key!r}; use {', '.join(SPEC_KEYS)} (key=value, comma-separated)"
                )
            items.append((key, value.strip()))
        elif re.fullmatch(r"v?\d+\.\d+(\.\d+)?\S*", part):
            items.append(("release", part.lstrip("vV")))
        elif part.upper() in GraphMode.__members__:
            items.append(("graph", part))
        elif chip_family(part) is not None:
            items.append(("chip", part))
        else:
            raise WorkbenchError(
                f"{spec!r}: {part!r} is neither a file, a release (0.18.0), a chip (A2, A3, A5, 310P) nor a graph "
                f"mode ({', '.join(GraphMode.__members__)}); or write key=value ({', '.join(SPEC_KEYS)})"
            )
    return items


def side_context(spec: str | Path, base: SelectionContext) -> SelectionContext:
    """One side of a diff: a stack file (lock, result or bare stack), or a spec applied on top of `base`."""
    path = Path(spec)
    if path.suffix in (".json", ".yaml", ".yml") or path.is_file():
        return with_serving(
            kernels.context_for_stack(read_stack(path)),
            graph_mode=base.graph_mode if base.graph_basis.startswith("given") else None,
            pa_shape=base.pa_shape,
            architecture=base.architecture,
            checkpoint=base.checkpoint,
        )
    context = base
    items = _spec_items(str(spec))
    stack_facts = {k: v for k, v in items if k in ("torch_npu", "cann")}
    if stack_facts:
        facts = {"versions": {"torch-npu": stack_facts.get("torch_npu")}, "cann": {"toolkit": stack_facts.get("cann")}}
        inferred = kernels.context_for_stack(facts)
        context = replace(
            context,
            release=inferred.release,
            release_basis=inferred.release_basis,
            candidates=inferred.candidates,
            cann=stack_facts.get("cann") or context.cann,
        )
    overrides = tuple((("arch" if k == "arch" else k), v) for k, v in items if k not in ("torch_npu",))
    try:
        from ascend_backend.platform.kernels.context import apply_override

        context = apply_override(context, tuple((k, v) for k, v in overrides if not (k == "cann" and stack_facts)))
    except ValueError as exc:
        raise WorkbenchError(f"{spec!r}: {exc}") from None
    if any(k == "graph" for k, _ in items):
        context = replace(context, graph_basis=f"given ({spec})")
    return context


def kernel_diff_contexts(
    context_a: SelectionContext, context_b: SelectionContext, *, call: CallFacts = kernels.TYPICAL_CALL
) -> list[KernelChange]:
    """Each op/state whose kernel, recipe (its arguments) or vllm-ascend's own default kernel differs."""
    changes = []
    for op in kernels.RECIPES:
        a, b = kernels.select(op, context_a, call), kernels.select(op, context_b, call)
        default_a = a.row.vllm_default if a.row else ""
        default_b = b.row.vllm_default if b.row else ""
        if a.kernel != b.kernel:
            what = "kernel"
        elif a.recipe != b.recipe:
            what = "arguments"
        elif default_a != default_b:
            what = "vllm-ascend's default"
        else:
            continue
        changes.append(
            KernelChange(
                op,
                kernels.STATES.get(op),
                a.kernel,
                b.kernel,
                _where(a),
                _where(b),
                context_a.release_label,
                context_b.release_label,
                a.recipe,
                b.recipe,
                what,
            )
        )
    return changes


def kernel_diff(
    stack_a: Mapping[str, Any],
    stack_b: Mapping[str, Any],
    *,
    graph_mode: str | GraphMode = GraphMode.NONE,
    pa_shape: bool = False,
    call: CallFacts = kernels.TYPICAL_CALL,
) -> list[KernelChange]:
    """Each op/state whose NPU call differs between the two stored stacks (table order: cache write, states, ops).

    `graph_mode` and `pa_shape` describe the serving configuration (the same on both sides: the question
    is what the upgrade changed); `call` the layer shape (default: head_size 128, neox, full rotary).
    """
    context_a = context_of(stack_a, graph_mode=graph_mode, pa_shape=pa_shape)
    context_b = context_of(stack_b, graph_mode=graph_mode, pa_shape=pa_shape)
    return kernel_diff_contexts(context_a, context_b, call=call)


def selection_table(
    stack: Mapping[str, Any] | SelectionContext | None = None,
    *,
    graph_mode: str | GraphMode | None = None,
    pa_shape: bool = False,
    call: CallFacts = kernels.TYPICAL_CALL,
) -> pd.DataFrame:
    """One row per op: state, kernel, recipe, what vllm-ascend runs there (its own kernel where that is its
    default), why ascend_backend differs where it does, the table row and its citation. Refused ops last."""
    context = (
        stack if isinstance(stack, SelectionContext) else context_of(stack, graph_mode=graph_mode, pa_shape=pa_shape)
    )
    rows = []
    for op in [*kernels.RECIPES, *kernels.REFUSED]:
        choice = kernels.select(op, context, call)
        row = choice.row
        rows.append(
            {
                "op": op,
                "state": kernels.STATES.get(op, ""),
                "kernel": choice.kernel,
                "recipe": choice.recipe,
                "vllm_ascend": "" if row is None else (row.kernel if row.vllm_ascend == "same" else row.vllm_ascend),
                "vllm_default": "" if row is None else row.vllm_default,
                "differs": "" if row is None else row.differs,
                "row": "" if row is None else row.id,
                "source": choice.citation,
                "reason": choice.reason if choice.native else "",
            }
        )
    columns = ["op", "state", "kernel", "recipe", "vllm_ascend", "vllm_default", "differs", "row", "source", "reason"]
    return pd.DataFrame(rows, columns=columns)


def _stack_in(data: Any, path: Path) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise WorkbenchError(
            f"{path}: expected a mapping (a stack, a lock file or a result file), got {type(data).__name__}"
        )
    for candidate in (data.get("stack"), provenance_of(data).get("stack")):
        if isinstance(candidate, Mapping):
            return dict(candidate)
    if "versions" in data:
        return dict(data)
    raise WorkbenchError(
        f"{path}: no stack found (looked for a top-level 'stack', 'provenance.stack', or a bare stack with "
        "'versions'); write one with `ascend-workbench lock write --out FILE`"
    )


def read_stack(path: str | Path) -> dict[str, Any]:
    """The stack dict in a lock file, a result file or a bare stack file (JSON or YAML)."""
    path = Path(path)
    if not path.is_file():
        raise WorkbenchError(
            f"{path}: stack file not found; pass a lock file (`ascend-workbench lock write`) or a result file"
        )
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise WorkbenchError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML/JSON'}: {exc}") from None
    return _stack_in(data, path)
