"""The walker's calls: which calls are kernels (the leaves), and which are followed into vllm-ascend's source.

Kernels are the leaves: `torch_npu.*` / `torch.ops.npu.*` (torch_npu), `torch.ops._C_ascend.*` /
`torch.ops._C.*` (vllm-ascend's own compiled ops), functions of `vllm_ascend/ops/triton/` and vLLM's
Triton kernels (Triton); `forward_native` and a `super()` call that leaves vllm_ascend are vLLM's native
path. `torch.ops.vllm.X` is followed into the function vllm-ascend registers as X. Each kernel call keeps
its argument names and constant values (`KernelCall`), which the audit binds to op-plugin's schema.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from scripts.kernel_truth.paths import (
    MAX_DEPTH,
    OWN,
    TORCH_NPU,
    VLLM_OP,
    Frame,
    KernelCall,
    State,
    dedupe,
    dotted,
    literal,
)
from scripts.kernel_truth.values import Default, Ext, FuncRef


class KernelCalls:
    """Call handling for `Walker` (it supplies tree, value, truth, method, _walk_function and _frame_for)."""

    def _call(self, node: ast.Call, frame: Frame, states: list[State]) -> list[State]:
        if not states:
            return states
        leaf = self._leaf(node, frame)
        if leaf is not None:
            return [s._replace(calls=s.calls + (leaf,)) for s in states]
        target = self._callee(node, frame)
        if not isinstance(target, FuncRef):
            native = self._native(node, frame)
            if native is not None:
                return [s._replace(calls=s.calls + (native,)) for s in states]
            return states
        if "/triton/" in target.module.path:
            call = self._kernel(node, frame, f"triton:{target.node.name}", "triton")
            return [s._replace(calls=s.calls + (call,)) for s in states]
        if frame.depth >= MAX_DEPTH or id(target.node) in self._active:
            return states
        callee = self._frame_for(target, {}, frame, node.args, node.keywords, frame.depth + 1)
        entered = [s._replace(done=False, ret=None) for s in states]
        out = self._walk_function(target, callee, entered)
        return dedupe([s if s.raised else s._replace(done=False, ret=None) for s in out])

    def _native(self, node: ast.Call, frame: Frame) -> KernelCall | None:
        """vLLM's own PyTorch path: `self.forward_native(...)`, or `super().forward_oot(...)` that leaves vllm_ascend."""
        func = node.func
        if not isinstance(func, ast.Attribute):
            return None
        is_super = isinstance(func.value, ast.Call) and dotted(func.value.func) == "super"
        if func.attr in ("forward_native", "forward_static") or (
            is_super and func.attr in ("forward_oot", "forward", "forward_cuda")
        ):
            return KernelCall(f"native:{func.attr}", "native", frame.module.path, node.lineno)
        return None

    def _kernel(self, node: ast.Call, frame: Frame, name: str, kind: str) -> KernelCall:
        literals = []
        for i, arg in enumerate(node.args):
            text = literal(arg)
            if text is None and not isinstance(arg, ast.Starred):
                value = self.value(arg, frame)
                if isinstance(value, (bool, int, float, str)) and value is not None:
                    text = repr(value)
            if text is not None:
                literals.append((str(i), text))
        keywords = [(k.arg, k.value, frame) for k in node.keywords if k.arg is not None]
        open_kwargs = False
        for keyword in node.keywords:
            if keyword.arg is None:
                expanded = self._expand_kwargs(keyword.value, frame)
                keywords += [e for e in expanded if e is not None]
                open_kwargs = open_kwargs or not expanded or None in expanded
        for key, expr, origin in keywords:
            text = literal(expr)
            if text is None:
                value = self.value(expr, origin)
                if isinstance(value, (bool, int, float, str)) and not isinstance(value, Default):
                    text = repr(value)
                elif isinstance(value, Ext) and re.fullmatch(r"torch\.\w+", value.dotted):
                    text = value.dotted
            if text is not None:
                literals.append((key, text))
        return KernelCall(
            name,
            kind,
            frame.module.path,
            node.lineno,
            positional=len([a for a in node.args if not isinstance(a, ast.Starred)]),
            keywords=tuple(k[0] for k in keywords),
            literals=tuple(literals),
            open_kwargs=open_kwargs,
        )

    def _expand_kwargs(self, expr: ast.expr, frame: Frame) -> list[tuple[str, ast.expr, Frame]]:
        """`**name` where name is a dict literal (or a conditional choice between two): its keys."""
        if isinstance(expr, ast.Name) and isinstance(frame.locals.get(expr.id), tuple):
            bound, origin = frame.locals[expr.id]
            if isinstance(bound, ast.AST) and origin is not None:
                return self._expand_kwargs(bound, origin)
        if isinstance(expr, ast.Dict):
            return [(k.value, v, frame) for k, v in zip(expr.keys, expr.values) if isinstance(k, ast.Constant)]
        if isinstance(expr, ast.IfExp):
            verdict = self.truth(expr.test, frame)
            if verdict is True:
                return self._expand_kwargs(expr.body, frame)
            if verdict is False:
                return self._expand_kwargs(expr.orelse, frame)
            return self._expand_kwargs(expr.body, frame) + self._expand_kwargs(expr.orelse, frame)
        if isinstance(expr, ast.Call) and dotted(expr.func) == "dict":
            return [(k.arg, k.value, frame) for k in expr.keywords if k.arg]
        return [None]  # not expandable: an open set of keywords

    def _leaf(self, node: ast.Call, frame: Frame) -> KernelCall | None:
        text = dotted(node.func)
        if text is None:
            if isinstance(node.func, ast.Subscript):  # triton_kernel[grid](...)
                target = self.value(node.func.value, frame)
                if isinstance(target, FuncRef) and "/triton/" in target.module.path:
                    return self._kernel(node, frame, f"triton:{target.node.name}", "triton")
            return None
        if (match := TORCH_NPU.match(text)) and self._is_torch_npu(text.split(".")[0], frame):
            return self._kernel(node, frame, f"torch_npu.{match[1]}", "torch_npu")
        if match := OWN.match(text):
            return self._kernel(node, frame, f"_C_ascend.{match[2]}", "own")
        if match := VLLM_OP.match(text):
            target = self._vllm_op(match[1])
            if target is None:
                return self._kernel(node, frame, f"torch.ops.vllm.{match[1]}", "vllm_op")
            return None
        head = text.split(".")[0]
        bound = frame.locals.get(head)
        if isinstance(bound, Ext) and "triton" in bound.dotted:
            return self._kernel(node, frame, f"triton:{bound.dotted.rsplit('.', 1)[-1]}", "triton")
        imported = frame.module.imports.get(head)
        if imported and "triton" in f"{imported[0]}.{imported[1] or ''}" and not imported[0].startswith("vllm_ascend"):
            return self._kernel(node, frame, f"triton:{imported[1] or imported[0]}", "triton")
        return None

    def _is_torch_npu(self, head: str, frame: Frame) -> bool:
        if head in self.npu_heads:
            return True
        if head == "torch":
            return True
        bound = frame.locals.get(head)
        if isinstance(bound, Ext):
            return bound.dotted == "torch_npu"
        imported = frame.module.imports.get(head)
        return imported is not None and imported[0] == "torch_npu"

    def _callee(self, node: ast.Call, frame: Frame) -> Any:
        text = dotted(node.func)
        if text and (match := VLLM_OP.match(text)):
            return self._vllm_op(match[1])
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "super"
            and frame.func is not None
            and frame.func.cls is not None
        ):
            return self.method(frame.func.cls, func.attr, after=frame.func.owner)
        value = self.value(func, frame)
        if isinstance(value, Default):
            value = value.value
        return value

    def _vllm_op(self, name: str) -> FuncRef | None:
        """The function vllm-ascend registers as torch.ops.vllm.<name> (direct_register_custom_op)."""
        if self._vllm_ops is None:
            self._vllm_ops = {}
            for path in self.tree.grep("direct_register_custom_op("):
                module = self.tree.module(path)
                if module is None:
                    continue
                for call in ast.walk(module.node):
                    if not (isinstance(call, ast.Call) and dotted(call.func) in ("direct_register_custom_op",)):
                        continue
                    kwargs = {k.arg: k.value for k in call.keywords}
                    op_name = kwargs.get("op_name", call.args[0] if call.args else None)
                    op_func = kwargs.get("op_func", call.args[1] if len(call.args) > 1 else None)
                    if isinstance(op_name, ast.Constant) and op_func is not None:
                        target = self.value(op_func, Frame(module, None))
                        if isinstance(target, FuncRef):
                            self._vllm_ops[op_name.value] = target
        return self._vllm_ops.get(name)
