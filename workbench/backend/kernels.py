"""Which NPU kernel each op runs on a stack, and which ops run a different kernel on two stacks.

The answers come from ascend_backend's kernel-selection table (`ascend_backend.npu.kernels`: one row per
vllm-ascend release range, chip family, op or attention state and graph mode, each cited from
vllm-ascend's source). The workbench adds reading stacks from files and the comparison:

    from workbench.backend.kernels import kernel_diff, read_stack
    for change in kernel_diff(read_stack("v0110.lock.yaml"), read_stack("v0180.lock.yaml")):
        print(change.describe())
    # paged_decode_attention (DecodeOnly): _npu_paged_attention -> npu_fused_infer_attention_score
    #   (v0.11.0 ... attention_v1.py@v0.11.0 ... -> v0.18.0 ... attention_v1.py@v0.13.0 ...)

A stack is the dict `workbench.stack.fingerprint.stack()` writes (`versions`, `cann`, `chip`, ...); a file may
hold it bare, under `stack` (a lock file) or under `provenance.stack` (any result file). Missing keys
mean unknown: the selection says how it filled each gap (docs/METHOD.md §2, §16).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from ascend_backend.npu import kernels
from ascend_backend.npu.kernels import CallFacts, GraphMode, KernelChoice, SelectionContext
from workbench.errors import WorkbenchError
from workbench.results.envelope import provenance_of


@dataclass(frozen=True)
class KernelChange:
    """One op (or attention state) whose kernel differs between stack A and stack B."""

    op: str
    state: str | None
    kernel_a: str
    kernel_b: str
    row_a: str  # 'row id: file@tag (function)', or why no row applied
    row_b: str
    release_a: str
    release_b: str

    @property
    def label(self) -> str:
        return f"{self.op} ({self.state})" if self.state else self.op

    def describe(self) -> str:
        """'paged_decode_attention (DecodeOnly) moved from _npu_paged_attention (v0.11.0) to FIA (v0.18.0)'."""
        return (
            f"{self.label} moved from {self.kernel_a} ({self.release_a}) to {self.kernel_b} ({self.release_b}) "
            f"[A: {self.row_a}; B: {self.row_b}]"
        )

    def row(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "state": self.state or "",
            "kernel_a": self.kernel_a,
            "kernel_b": self.kernel_b,
            "release_a": self.release_a,
            "release_b": self.release_b,
            "row_a": self.row_a,
            "row_b": self.row_b,
        }


def _where(choice: KernelChoice) -> str:
    return f"{choice.row.id}: {choice.row.citation}" if choice.row is not None else choice.reason


def context_of(
    stack: Mapping[str, Any] | None, *, graph_mode: str | GraphMode = GraphMode.NONE, pa_shape: bool = False
) -> SelectionContext:
    """The selection context of a stored stack, or of this machine (with ASCEND_BACKEND_KERNELS) when None."""
    mode = _graph_mode(graph_mode)
    if stack is None:
        context = kernels.active_context()
        return context if (mode, pa_shape) == (GraphMode.NONE, False) else _with_graph(context, mode, pa_shape)
    if not isinstance(stack, Mapping):
        raise WorkbenchError(
            f"a stack must be a mapping with 'versions', 'cann', 'chip', ...; got {type(stack).__name__}"
        )
    return kernels.context_for_stack(stack, graph_mode=mode, pa_shape=pa_shape)


def _with_graph(context: SelectionContext, mode: GraphMode, pa_shape: bool) -> SelectionContext:
    return replace(context, graph_mode=mode, pa_shape=pa_shape)


def _graph_mode(value: str | GraphMode) -> GraphMode:
    try:
        return value if isinstance(value, GraphMode) else GraphMode(str(value).upper())
    except ValueError:
        raise WorkbenchError(
            f"graph mode {value!r} is not one of {', '.join(m.value for m in GraphMode)} (vLLM's cudagraph_mode)"
        ) from None


def kernel_diff(
    stack_a: Mapping[str, Any],
    stack_b: Mapping[str, Any],
    *,
    graph_mode: str | GraphMode = GraphMode.NONE,
    pa_shape: bool = False,
    call: CallFacts = kernels.TYPICAL_CALL,
) -> list[KernelChange]:
    """Each op/state whose NPU kernel differs between the two stacks (table order: cache write, states, ops).

    `graph_mode` and `pa_shape` describe the serving configuration (the same on both sides: the question
    is what the upgrade changed); `call` the layer shape (default: head_size 128, neox, full rotary).
    """
    context_a = context_of(stack_a, graph_mode=graph_mode, pa_shape=pa_shape)
    context_b = context_of(stack_b, graph_mode=graph_mode, pa_shape=pa_shape)
    changes = []
    for op in kernels.RECIPES:
        a, b = kernels.select(op, context_a, call), kernels.select(op, context_b, call)
        if a.kernel != b.kernel:
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
                )
            )
    return changes


def selection_table(
    stack: Mapping[str, Any] | None = None,
    *,
    graph_mode: str | GraphMode = GraphMode.NONE,
    pa_shape: bool = False,
    call: CallFacts = kernels.TYPICAL_CALL,
) -> pd.DataFrame:
    """One row per op: state, kernel, recipe, what vllm-ascend runs there, the table row and its citation."""
    context = context_of(stack, graph_mode=graph_mode, pa_shape=pa_shape)
    rows = []
    for op in kernels.RECIPES:
        choice = kernels.select(op, context, call)
        row = choice.row
        rows.append(
            {
                "op": op,
                "state": kernels.STATES.get(op, ""),
                "kernel": choice.kernel,
                "recipe": choice.recipe,
                "vllm_ascend": "" if row is None else (row.kernel if row.vllm_ascend == "same" else row.vllm_ascend),
                "row": "" if row is None else row.id,
                "source": choice.citation,
                "reason": choice.reason if choice.native else "",
            }
        )
    return pd.DataFrame(rows, columns=["op", "state", "kernel", "recipe", "vllm_ascend", "row", "source", "reason"])


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
