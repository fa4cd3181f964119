"""What one walk produces: the kernel calls found, the conditions assumed, and the frames it runs in.

    State(calls=(KernelCall('torch_npu.npu_rms_norm', 'torch_npu', path, line), ...), assumptions=(...))

A `State` is one path through the source; `dedupe` merges paths that end the same way. The helpers
below read call sites (`dotted`, `literal`, `unparse`) the same way for every module of the audit.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from scripts.kernel_truth.mirror import ClassInfo, Module
from scripts.kernel_truth.values import FuncRef

MAX_DEPTH = 14
MAX_STATES = 128

_UNPARSED: dict[int, tuple[ast.AST, str]] = {}


@dataclass(frozen=True)
class KernelCall:
    name: str  # 'torch_npu.npu_rms_norm', '_C_ascend.npu_add_rms_norm_bias', 'triton:rope_forward_triton'
    kind: str  # torch_npu | own | triton | vllm_op | raise
    path: str
    line: int
    positional: int = 0
    keywords: tuple[str, ...] = ()
    literals: tuple[tuple[str, str], ...] = ()  # (position or keyword, source text) of constant arguments
    open_kwargs: bool = False  # a `**mapping` the walk could not expand: more keywords may be passed

    @property
    def function(self) -> str:
        """'torch_npu.npu_fused_infer_attention_score.out' -> 'npu_fused_infer_attention_score'."""
        name = self.name.split(":", 1)[-1].split(".", 1)[-1] if self.kind == "torch_npu" else self.name
        return name.removesuffix(".out")

    def where(self, tag: str) -> str:
        return f"{tag}:{self.path}:{self.line}"


@dataclass(frozen=True)
class Assumption:
    text: str
    value: bool
    path: str
    line: int


class State(NamedTuple):
    """One path: its calls so far, the undecided conditions it assumed, and how it ended."""

    calls: tuple[KernelCall, ...] = ()
    assumptions: tuple[Assumption, ...] = ()
    done: bool = False
    raised: str | None = None
    ret: Any = None


@dataclass
class Frame:
    module: Module
    func: FuncRef | None
    locals: dict[str, Any] = field(default_factory=dict)  # name -> (expr, Frame) binding or a value
    depth: int = 0

    @property
    def cls(self) -> ClassInfo | None:
        return self.func.cls if self.func else None


def unparse(node: ast.AST) -> str:
    """ast.unparse, cached per node (the trees stay loaded for the whole audit)."""
    hit = _UNPARSED.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    text = ast.unparse(node)
    _UNPARSED[id(node)] = (node, text)
    return text


def dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


TORCH_NPU = re.compile(r"^(?:\w+|torch\.ops\.npu)\.(_?npu_\w+(?:\.out)?)$")
OWN = re.compile(r"^torch\.ops\.(_C_ascend|_C)\.(\w+)(?:\.default)?$")
VLLM_OP = re.compile(r"^torch\.ops\.vllm\.(\w+)(?:\.default)?$")


def literal(node: ast.expr) -> str | None:
    """Source text of a constant-like argument (numbers, strings, booleans, None, dtypes), else None."""
    if isinstance(node, ast.Constant):
        return repr(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return f"-{node.operand.value!r}"
    text = dotted(node)
    if text and text.startswith("torch.") and text.count(".") == 1:
        return text  # torch.qint8, torch.int8, torch.float16
    return None


def dedupe(states: list[State]) -> list[State]:
    """Merge paths with the same calls and outcome; keep only the assumptions they share."""
    if len(states) < 2:
        return states
    merged: dict[tuple, State] = {}
    for state in states:
        key = (
            tuple((c.name, c.line) for c in state.calls),
            state.done,
            state.raised,
            None if state.ret is None else repr(state.ret)[:60],
        )
        kept = merged.get(key)
        if kept is None:
            merged[key] = state
        elif kept.assumptions != state.assumptions:
            common = tuple(a for a in kept.assumptions if a in state.assumptions)
            merged[key] = kept._replace(assumptions=common)
    out = list(merged.values())
    return out[:MAX_STATES]
