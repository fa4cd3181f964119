"""Follow a vllm-ascend function at one tag and collect the kernels it calls, path by path.

A small abstract interpreter over Python's AST, enough for how vllm-ascend chooses kernels: branches on
the chip, the attention state, the graph mode, head sizes, environment switches and helper predicates.

    walker = Walker(tree, facts)
    for path in walker.run(entry, {"residual": None}):
        path.calls          # KernelCall(name='torch_npu.npu_rms_norm', path=..., line=...), in call order
        path.assumptions    # conditions the facts could not decide, with the branch this path took

What a condition means is the `facts` object's business (`facts.py`): it answers for names, attributes
and calls it knows (`is_310p()`, `attn_metadata.attn_state`, `self.head_size`, `HAS_TRITON`, ...) and
says which of its answers were defaults rather than facts of the cell (`Default`). Everything else is
evaluated from the source itself: constants, module-level names, imports across vllm_ascend, enum
members, helper functions (run for their return value) and methods through the class hierarchy
(`self.m()`, `super().m()`, `Class.m()`). A condition nobody can decide forks the path.

Kernels are the leaves: `torch_npu.*` / `torch.ops.npu.*` (torch_npu), `torch.ops._C_ascend.*` /
`torch.ops._C.*` (vllm-ascend's own compiled ops), functions of `vllm_ascend/ops/triton/` and vLLM's
Triton kernels (Triton). `torch.ops.vllm.X` is followed into the function vllm-ascend registers as X.
"""

from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from scripts.kernel_truth.mirror import ClassInfo, Module, Tree

MAX_DEPTH = 14
MAX_STATES = 128


# ------------------------------------------------------------------------------------------------ values
class Unknown:
    """A value the facts and the source cannot decide."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Unknown({self.text})"


@dataclass(frozen=True)
class Opaque:
    """A value that exists (not None) whose content is unknown: a tensor, a config object."""

    text: str


@dataclass(frozen=True)
class Member:
    """An enum member, by qualified name: 'AscendDeviceType.A5', 'CUDAGraphMode.FULL_DECODE_ONLY'."""

    name: str

    @property
    def short(self) -> str:
        return self.name.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class OneOf:
    """A fact that equals any of several enum member names (AscendDeviceType.A2 was ._910B at some tags)."""

    enum: str
    names: frozenset[str]

    def equals(self, other: Any) -> bool | None:
        if isinstance(other, Member):
            owner, _, short = other.name.rpartition(".")
            if owner.rsplit(".", 1)[-1] != self.enum:
                return None
            return short in self.names
        if isinstance(other, OneOf):
            return bool(self.names & other.names)
        return None


@dataclass(frozen=True)
class Default:
    """A value the facts assume rather than know (logged as `label` when the walk consults it)."""

    value: Any
    label: str


@dataclass(frozen=True)
class Ext:
    """A name from outside vllm_ascend (vLLM, torch, ...): 'vllm.config.CUDAGraphMode'."""

    dotted: str


@dataclass(frozen=True)
class FuncRef:
    module: Module
    node: ast.FunctionDef | ast.AsyncFunctionDef
    cls: ClassInfo | None = None  # the class of `self` (bound) or of `cls`
    owner: ClassInfo | None = None  # the class that defines the method (for super())

    @property
    def qualname(self) -> str:
        return f"{self.owner.name}.{self.node.name}" if self.owner else self.node.name


@dataclass(frozen=True)
class ClassRef:
    info: ClassInfo


@dataclass(frozen=True)
class SelfRef:
    cls: ClassInfo


@dataclass(frozen=True)
class ModuleRef:
    module: Module


NOTHING = object()  # "the facts have no answer"; distinct from None (a value)


def is_unknown(value: Any) -> bool:
    return isinstance(value, Unknown)


# ------------------------------------------------------------------------------------------------ results
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


_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_UNPARSED: dict[int, tuple[ast.AST, str]] = {}


def unparse(node: ast.AST) -> str:
    """ast.unparse, cached per node (the trees stay loaded for the whole audit)."""
    hit = _UNPARSED.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    text = ast.unparse(node)
    _UNPARSED[id(node)] = (node, text)
    return text


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


_TORCH_NPU = re.compile(r"^(?:\w+|torch\.ops\.npu)\.(_?npu_\w+(?:\.out)?)$")
_OWN = re.compile(r"^torch\.ops\.(_C_ascend|_C)\.(\w+)(?:\.default)?$")
_VLLM_OP = re.compile(r"^torch\.ops\.vllm\.(\w+)(?:\.default)?$")


def _literal(node: ast.expr) -> str | None:
    """Source text of a constant-like argument (numbers, strings, booleans, None, dtypes), else None."""
    if isinstance(node, ast.Constant):
        return repr(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return f"-{node.operand.value!r}"
    text = _dotted(node)
    if text and text.startswith("torch.") and text.count(".") == 1:
        return text  # torch.qint8, torch.int8, torch.float16
    return None


class Walker:
    """Walk one tree under one set of facts (see the module docstring)."""

    def __init__(self, tree: Tree, facts: Any, npu_heads: tuple[str, ...] = ("torch_npu",)) -> None:
        self.npu_heads = npu_heads  # names that stand for the torch_npu module (our adapters: `npu`)
        self.tree = tree
        self.facts = facts
        self.consulted: set[str] = set()
        self._value_cache: dict[tuple, Any] = {}
        self._active: list[int] = []
        self._resolving: set[tuple[int, str]] = set()
        self._nesting = 0
        self.self_attrs: dict[str, Any] = {}  # 'self.cos' -> (expr, frame): what the walk assigned to self
        self._vllm_ops: dict[str, FuncRef | None] | None = None
        self.visited: set[tuple[str, int]] = set()  # (path, line) of every function walked

    # ---------------------------------------------------------------------------------- entry points
    def run(self, entry: FuncRef, args: dict[str, Any] | None = None) -> list[State]:
        frame = self._frame_for(entry, args or {}, None, [], [], 0)
        return self._walk_function(entry, frame, [State()])

    def function(self, module_path: str, qualname: str) -> FuncRef | None:
        """'vllm_ascend/ops/layernorm.py', 'AscendRMSNorm.forward_oot' -> a FuncRef bound to that class."""
        module = self.tree.module(module_path)
        if module is None:
            return None
        if "." not in qualname:
            node = module.functions.get(qualname)
            return FuncRef(module, node) if node else None
        cls_name, method = qualname.split(".", 1)
        info = module.classes.get(cls_name)
        if info is None:
            return None
        return self.method(info, method)

    def method(self, info: ClassInfo, name: str, after: ClassInfo | None = None) -> FuncRef | None:
        """`name` looked up along `info`'s bases (after `after` for super()), bound to `info`."""
        chain = self.mro(info)
        if after is not None:
            names = [c.name for c in chain]
            chain = chain[names.index(after.name) + 1 :] if after.name in names else []
        for klass in chain:
            node = klass.methods.get(name)
            if node is not None:
                return FuncRef(klass.module, node, info, klass)
        return None

    def mro(self, info: ClassInfo) -> list[ClassInfo]:
        out: list[ClassInfo] = []

        def add(klass: ClassInfo, depth: int) -> None:
            if depth > 12 or any(k is klass for k in out):
                return
            out.append(klass)
            frame = Frame(klass.module, None)
            for base in klass.bases:
                value = self.value(base, frame)
                if isinstance(value, ClassRef):
                    add(value.info, depth + 1)

        add(info, 0)
        return out

    # ---------------------------------------------------------------------------------- statements
    def _walk_function(self, func: FuncRef, frame: Frame, states: list[State]) -> list[State]:
        key = id(func.node)
        if key in self._active or frame.depth > MAX_DEPTH:
            return states
        self.visited.add((func.module.path, func.node.lineno))
        self._active.append(key)
        try:
            return self._block(func.node.body, frame, states)
        finally:
            self._active.pop()

    def _block(self, body: list[ast.stmt], frame: Frame, states: list[State]) -> list[State]:
        for stmt in body:
            active = [s for s in states if not s.done]
            if not active:
                break
            finished = [s for s in states if s.done]
            states = finished + self._stmt(stmt, frame, active)
            states = _dedupe(states)
        return states

    def _stmt(self, stmt: ast.stmt, frame: Frame, states: list[State]) -> list[State]:
        if isinstance(stmt, ast.If):
            return self._branch(stmt.test, stmt.body, stmt.orelse, frame, states)
        if isinstance(stmt, ast.Return):
            if stmt.value is not None:
                states = self._expr(stmt.value, frame, states)
                ret = self.value(stmt.value, frame)
            else:
                ret = None
            return [s._replace(done=True, ret=ret) if not s.done else s for s in states]
        if isinstance(stmt, ast.Raise):
            text = unparse(stmt.exc)[:160] if stmt.exc is not None else "raise"
            call = KernelCall(f"raise {text}", "raise", frame.module.path, stmt.lineno)
            return [s._replace(calls=s.calls + (call,), done=True, raised=text) for s in states]
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            if stmt.value is None:
                return states
            states = self._expr(stmt.value, frame, states)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    if isinstance(stmt, ast.AugAssign):
                        self.self_attrs[f"self.{target.attr}"] = (Unknown(target.attr), frame)
                    else:
                        self.self_attrs[f"self.{target.attr}"] = (stmt.value, frame)
                    continue
                if isinstance(target, ast.Name):
                    if isinstance(stmt, ast.AugAssign):
                        frame.locals[target.id] = Unknown(target.id)
                    else:
                        frame.locals[target.id] = (stmt.value, frame)
                elif isinstance(target, (ast.Tuple, ast.List)):
                    unpacked = self.value(stmt.value, frame) if stmt.value is not None else None
                    if isinstance(unpacked, tuple) and len(unpacked) == len(target.elts):
                        for element, item in zip(target.elts, unpacked):
                            if isinstance(element, ast.Name):
                                frame.locals[element.id] = item
                        continue
                    for element in target.elts:
                        element = element.value if isinstance(element, ast.Starred) else element
                        if isinstance(element, ast.Name):
                            frame.locals[element.id] = Opaque(element.id)
                        elif isinstance(element, ast.Attribute) and unparse(element.value) == "self":
                            self.self_attrs[f"self.{element.attr}"] = (Opaque(f"self.{element.attr}"), frame)
            return states
        if isinstance(stmt, ast.Expr):
            return self._expr(stmt.value, frame, states)
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            states = self._expr(stmt.iter, frame, states)
            for name in ast.walk(stmt.target):
                if isinstance(name, ast.Name):
                    frame.locals[name.id] = Opaque(name.id)
            return self._block(stmt.body + stmt.orelse, frame, states)
        if isinstance(stmt, ast.While):
            return self._block(stmt.body, frame, states)
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                states = self._expr(item.context_expr, frame, states)
                if item.optional_vars is not None and isinstance(item.optional_vars, ast.Name):
                    frame.locals[item.optional_vars.id] = Opaque(item.optional_vars.id)
            return self._block(stmt.body, frame, states)
        if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            states = self._block(stmt.body, frame, states)
            states = self._block(stmt.orelse, frame, states)
            return self._block(stmt.finalbody, frame, states)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            frame.locals[stmt.name] = FuncRef(frame.module, stmt, frame.cls, frame.func.owner if frame.func else None)
            return states
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                frame.locals[alias.asname or alias.name.split(".")[0]] = Ext(alias.name)
            return states
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                frame.locals[alias.asname or alias.name] = self._import((stmt.module or "", alias.name))
            return states
        if isinstance(stmt, ast.Match):
            subject = self.value(stmt.subject, frame)
            out: list[State] = []
            for case in stmt.cases:
                pattern = case.pattern
                if isinstance(pattern, ast.MatchValue):
                    verdict = _compare(subject, ast.Eq(), self.value(pattern.value, frame))
                elif isinstance(pattern, ast.MatchAs) and pattern.pattern is None:
                    verdict = True
                else:
                    verdict = None
                if verdict is True:
                    out += self._block(case.body, frame, states)
                    return _dedupe(out)
                if verdict is None:
                    out += self._block(case.body, frame, states)
            return _dedupe(out + states)
        return states

    def _branch(self, test: ast.expr, body, orelse, frame: Frame, states: list[State]) -> list[State]:
        verdict = self.truth(test, frame)
        if verdict is True:
            return self._block(body, frame, states)
        if verdict is False:
            return self._block(orelse, frame, states)
        text = unparse(test)[:200]
        yes = [
            s._replace(assumptions=s.assumptions + (Assumption(text, True, frame.module.path, test.lineno),))
            for s in states
        ]
        no = [
            s._replace(assumptions=s.assumptions + (Assumption(text, False, frame.module.path, test.lineno),))
            for s in states
        ]
        return _dedupe(self._block(body, frame, yes) + self._block(orelse, frame, no))

    # ---------------------------------------------------------------------------------- expressions
    def _expr(self, node: ast.expr, frame: Frame, states: list[State]) -> list[State]:
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute):
                states = self._expr(node.func.value, frame, states)
            for arg in node.args:
                states = self._expr(arg.value if isinstance(arg, ast.Starred) else arg, frame, states)
            for keyword in node.keywords:
                states = self._expr(keyword.value, frame, states)
            return self._call(node, frame, states)
        if isinstance(node, ast.IfExp):
            verdict = self.truth(node.test, frame)
            if verdict is True:
                return self._expr(node.body, frame, states)
            if verdict is False:
                return self._expr(node.orelse, frame, states)
            text = unparse(node.test)[:200]
            yes = [
                s._replace(assumptions=s.assumptions + (Assumption(text, True, frame.module.path, node.lineno),))
                for s in states
            ]
            no = [
                s._replace(assumptions=s.assumptions + (Assumption(text, False, frame.module.path, node.lineno),))
                for s in states
            ]
            return _dedupe(self._expr(node.body, frame, yes) + self._expr(node.orelse, frame, no))
        if isinstance(node, (ast.Lambda,)):
            return states
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return self._expr(node.elt, frame, states)
        if isinstance(node, ast.DictComp):
            return self._expr(node.value, frame, states)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                states = self._expr(child, frame, states)
        return states

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
        return _dedupe([s if s.raised else s._replace(done=False, ret=None) for s in out])

    def _native(self, node: ast.Call, frame: Frame) -> KernelCall | None:
        """vLLM's own PyTorch path: `self.forward_native(...)`, or `super().forward_oot(...)` that leaves vllm_ascend."""
        func = node.func
        if not isinstance(func, ast.Attribute):
            return None
        is_super = isinstance(func.value, ast.Call) and _dotted(func.value.func) == "super"
        if func.attr in ("forward_native", "forward_static") or (
            is_super and func.attr in ("forward_oot", "forward", "forward_cuda")
        ):
            return KernelCall(f"native:{func.attr}", "native", frame.module.path, node.lineno)
        return None

    def _kernel(self, node: ast.Call, frame: Frame, name: str, kind: str) -> KernelCall:
        literals = []
        for i, arg in enumerate(node.args):
            text = _literal(arg)
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
            text = _literal(expr)
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
        if isinstance(expr, ast.Call) and _dotted(expr.func) == "dict":
            return [(k.arg, k.value, frame) for k in expr.keywords if k.arg]
        return [None]  # not expandable: an open set of keywords

    def _leaf(self, node: ast.Call, frame: Frame) -> KernelCall | None:
        text = _dotted(node.func)
        if text is None:
            if isinstance(node.func, ast.Subscript):  # triton_kernel[grid](...)
                target = self.value(node.func.value, frame)
                if isinstance(target, FuncRef) and "/triton/" in target.module.path:
                    return self._kernel(node, frame, f"triton:{target.node.name}", "triton")
            return None
        if (match := _TORCH_NPU.match(text)) and self._is_torch_npu(text.split(".")[0], frame):
            return self._kernel(node, frame, f"torch_npu.{match[1]}", "torch_npu")
        if match := _OWN.match(text):
            return self._kernel(node, frame, f"_C_ascend.{match[2]}", "own")
        if match := _VLLM_OP.match(text):
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
        text = _dotted(node.func)
        if text and (match := _VLLM_OP.match(text)):
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
                    if not (isinstance(call, ast.Call) and _dotted(call.func) in ("direct_register_custom_op",)):
                        continue
                    kwargs = {k.arg: k.value for k in call.keywords}
                    op_name = kwargs.get("op_name", call.args[0] if call.args else None)
                    op_func = kwargs.get("op_func", call.args[1] if len(call.args) > 1 else None)
                    if isinstance(op_name, ast.Constant) and op_func is not None:
                        target = self.value(op_func, Frame(module, None))
                        if isinstance(target, FuncRef):
                            self._vllm_ops[op_name.value] = target
        return self._vllm_ops.get(name)

    # ---------------------------------------------------------------------------------- binding
    def _frame_for(self, func: FuncRef, given: dict[str, Any], caller: Frame | None, args, keywords, depth) -> Frame:
        frame = Frame(func.module, func, {}, depth)
        params = func.node.args
        positional = [*params.posonlyargs, *params.args]
        decorators = {_dotted(d) for d in func.node.decorator_list}
        bound_first = func.cls is not None and "staticmethod" not in decorators
        if bound_first and positional:
            first = positional[0]
            frame.locals[first.arg] = ClassRef(func.cls) if "classmethod" in decorators else SelfRef(func.cls)
            positional = positional[1:]
        defaults = [None] * (len([*params.posonlyargs, *params.args]) - len(params.defaults)) + list(params.defaults)
        defaults = defaults[-len(positional) :] if positional else []
        module_frame = Frame(func.module, None)
        passed = [a for a in args if not isinstance(a, ast.Starred)]
        for i, param in enumerate(positional):
            if i < len(passed):
                frame.locals[param.arg] = (passed[i], caller)
            elif defaults and defaults[i] is not None:
                frame.locals[param.arg] = (defaults[i], module_frame)
            else:
                frame.locals[param.arg] = Opaque(param.arg)
        for param, default in zip(params.kwonlyargs, params.kw_defaults):
            frame.locals[param.arg] = (default, module_frame) if default is not None else Opaque(param.arg)
        names = {p.arg for p in [*params.posonlyargs, *params.args, *params.kwonlyargs]}
        for keyword in keywords:
            if keyword.arg in names:
                frame.locals[keyword.arg] = (keyword.value, caller)
        if params.vararg:
            frame.locals[params.vararg.arg] = Opaque(params.vararg.arg)
        if params.kwarg:
            frame.locals[params.kwarg.arg] = Opaque(params.kwarg.arg)
        for name, value in given.items():
            frame.locals[name] = value
        return frame

    # ---------------------------------------------------------------------------------- values
    def truth(self, node: ast.expr, frame: Frame) -> bool | None:
        value = self.value(node, frame)
        return _truth(value)

    def value(self, node: ast.expr, frame: Frame, _depth: int = 0) -> Any:
        if self._nesting > 80:
            return Unknown("(too deep)")
        self._nesting += 1
        try:
            value = self._value(node, frame, _depth)
        finally:
            self._nesting -= 1
        if isinstance(value, Default):
            self.consulted.add(value.label)
            return value.value
        return value

    def _value(self, node: ast.expr, frame: Frame, depth: int) -> Any:
        if depth > 40:
            return Unknown(unparse(node)[:80])
        if isinstance(node, ast.Constant):
            return node.value
        text = None
        if isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Compare)):
            text = unparse(node)
            fact = self.facts.lookup(text, node, frame, self)
            if fact is not NOTHING:
                return fact
        if isinstance(node, ast.Name):
            return self._name(node.id, frame, depth)
        if isinstance(node, ast.Attribute):
            base = self.value(node.value, frame, depth + 1)
            return self._attribute(base, node.attr, text or node.attr, depth)
        if isinstance(node, ast.BoolOp):
            # Python's value: `a or b` is the first truthy operand (`x or SWA_INT_MAX` is a number, not True),
            # `a and b` the first falsy one; an unknown operand before the deciding one leaves only the truth.
            raw = [self.value(v, frame, depth + 1) for v in node.values]
            values = [_truth(v) for v in raw]
            deciding = False if isinstance(node.op, ast.And) else True
            if deciding in values:
                i = values.index(deciding)
                return raw[i] if all(v is (not deciding) for v in values[:i]) else deciding
            return raw[-1] if all(v is (not deciding) for v in values) else Unknown(unparse(node)[:120])
        if isinstance(node, ast.UnaryOp):
            operand = self.value(node.operand, frame, depth + 1)
            if isinstance(node.op, ast.Not):
                verdict = _truth(operand)
                return Unknown(f"not {unparse(node.operand)[:100]}") if verdict is None else not verdict
            if isinstance(node.op, ast.USub) and isinstance(operand, (int, float)):
                return -operand
            return Unknown(unparse(node)[:80])
        if isinstance(node, ast.Compare):
            left = self.value(node.left, frame, depth + 1)
            result: Any = True
            for op, right_node in zip(node.ops, node.comparators):
                right = self.value(right_node, frame, depth + 1)
                verdict = _compare(left, op, right)
                if verdict is False:
                    return False
                if verdict is None:
                    result = Unknown(unparse(node)[:160])
                left = right
            return result
        if isinstance(node, ast.IfExp):
            verdict = self.truth(node.test, frame)
            if verdict is None:
                return Unknown(unparse(node)[:120])
            return self.value(node.body if verdict else node.orelse, frame, depth + 1)
        if isinstance(node, ast.Call):
            return self._call_value(node, frame, depth)
        if isinstance(node, ast.Dict):
            out = {}
            for key, item in zip(node.keys, node.values):
                if key is None:
                    return Unknown("dict")
                k = self.value(key, frame, depth + 1)
                if is_unknown(k) or isinstance(k, (Opaque, Ext)):
                    return Unknown(unparse(node)[:80])
                out[k] = (item, frame)
            return out
        if isinstance(node, ast.Subscript):
            base = self.value(node.value, frame, depth + 1)
            if isinstance(base, dict):
                key = self.value(node.slice, frame, depth + 1)
                return self._lookup(base, key, unparse(node)[:80], depth)
            return Unknown(unparse(node)[:80])
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = [self.value(e, frame, depth + 1) for e in node.elts]
            return Unknown(unparse(node)[:80]) if any(is_unknown(i) for i in items) else tuple(items)
        if isinstance(node, ast.BinOp):
            left, right = self.value(node.left, frame, depth + 1), self.value(node.right, frame, depth + 1)
            if isinstance(left, (int, float)) and isinstance(right, (int, float)) and not isinstance(left, bool):
                operation = _BINOPS.get(type(node.op))
                if operation is not None:
                    try:
                        return operation(left, right)
                    except (ArithmeticError, ValueError):
                        pass
            return Unknown(unparse(node)[:80])
        return Unknown(unparse(node)[:80])

    def _lookup(self, table: dict, key: Any, text: str, depth: int, fallback: Any = None) -> Any:
        if is_unknown(key) or isinstance(key, (Opaque, Ext)):
            return Unknown(text)
        for candidate, (expr, origin) in table.items():
            verdict = _equal(candidate, key) if not isinstance(candidate, tuple) else _equal_tuple(candidate, key)
            if verdict is True:
                return self.value(expr, origin, depth + 1)
            if verdict is None:
                return Unknown(text)
        if fallback is not None:
            return self.value(fallback[0], fallback[1], depth + 1)
        return Unknown(text)

    def _name(self, name: str, frame: Frame, depth: int) -> Any:
        if name in frame.locals:
            bound = frame.locals[name]
            if isinstance(bound, tuple) and len(bound) == 2 and isinstance(bound[0], ast.AST):
                expr, origin = bound
                key = (id(frame), name)
                if origin is None or key in self._resolving:
                    return Unknown(name)
                self._resolving.add(key)
                try:
                    return self.value(expr, origin, depth + 1)
                finally:
                    self._resolving.discard(key)
            return bound
        return self._global(frame.module, name, depth)

    def _global(self, module: Module, name: str, depth: int) -> Any:
        if name in module.functions:
            return FuncRef(module, module.functions[name])
        if name in module.classes:
            return ClassRef(module.classes[name])
        if name in module.mutable:
            return Unknown(name)
        if name in module.assigns:
            key = ("assign", module.path, name)
            if key not in self._value_cache:
                self._value_cache[key] = Unknown(name)  # recursion guard
                self._value_cache[key] = self.value(module.assigns[name], Frame(module, None), depth + 1)
            return self._value_cache[key]
        if name in module.imports:
            return self._import(module.imports[name])
        if name in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[name]
        return Unknown(name)

    def _import(self, spec: tuple[str, str | None]) -> Any:
        base, attr = spec
        if attr is None:
            target = self.tree.module_by_name(base) if base.startswith("vllm_ascend") else None
            return ModuleRef(target) if target else Ext(base)
        if base.startswith("vllm_ascend"):
            sub = self.tree.module_by_name(f"{base}.{attr}")
            if sub is not None:
                return ModuleRef(sub)
            target = self.tree.module_by_name(base)
            if target is not None:
                return self._global(target, attr, 0)
            return Unknown(f"{base}.{attr}")
        return Ext(f"{base}.{attr}")

    def _attribute(self, base: Any, attr: str, text: str, depth: int) -> Any:
        if isinstance(base, ModuleRef):
            return self._global(base.module, attr, depth)
        if (
            isinstance(base, (SelfRef, Opaque))
            and f"self.{attr}" in self.self_attrs
            and (isinstance(base, SelfRef) or base.text == "self")
        ):
            expr, origin = self.self_attrs[f"self.{attr}"]
            if not isinstance(expr, ast.AST):
                return expr
            key = (0, f"self.{attr}")
            if key in self._resolving:
                return Unknown(text)
            self._resolving.add(key)
            try:
                return self.value(expr, origin, depth + 1)
            finally:
                self._resolving.discard(key)
        if isinstance(base, (ClassRef, SelfRef)):
            info = base.info if isinstance(base, ClassRef) else base.cls
            for klass in self.mro(info):
                if attr in klass.methods:
                    method = klass.methods[attr]
                    ref = FuncRef(klass.module, method, info, klass)
                    if isinstance(base, SelfRef) and any(_dotted(d) == "property" for d in method.decorator_list):
                        return self._property(ref, text)
                    return ref
                if attr in klass.assigns:
                    if isinstance(base, ClassRef) and _is_enum(klass, self):
                        return Member(f"{klass.name}.{attr}")
                    return self.value(klass.assigns[attr], Frame(klass.module, None), depth + 1)
            if isinstance(base, SelfRef):
                return self._init_attr(info, attr, text)
            return Unknown(text)
        if isinstance(base, Ext):
            owner = base.dotted.rsplit(".", 1)[-1]
            if owner[:1].isupper() and not owner.isupper() and attr[:1].isupper():
                return Member(f"{owner}.{attr}")  # vLLM's enums: AttentionType.DECODER, CUDAGraphMode.FULL
            return Ext(f"{base.dotted}.{attr}")
        if isinstance(base, Opaque) and base.text != "self":
            return Opaque(text)
        return Unknown(text)

    def _property(self, ref: FuncRef, text: str) -> Any:
        key = ("property", id(ref.node), ref.cls.name if ref.cls else None)
        if key in self._value_cache:
            return self._value_cache[key]
        if id(ref.node) in self._active:
            return Unknown(text)
        frame = self._frame_for(ref, {}, None, [], [], 0)
        self._active.append(id(ref.node))
        try:
            states = self._block(ref.node.body, frame, [State()])
        finally:
            self._active.pop()
        rets = [s.ret for s in states if not s.raised]
        result = rets[0] if rets and all(_same(r, rets[0]) for r in rets) and not is_unknown(rets[0]) else Unknown(text)
        self._value_cache[key] = result
        return result

    def _init_attr(self, info: ClassInfo, attr: str, text: str) -> Any:
        """`self.attr` as the class's __init__ sets it, when every assignment there is a constant."""
        for klass in self.mro(info):
            init = klass.methods.get("__init__")
            if init is None:
                continue
            values = [
                node.value
                for node in ast.walk(init)
                if isinstance(node, ast.Assign) and any(unparse(t) == f"self.{attr}" for t in node.targets)
            ]
            if values:
                if all(isinstance(v, ast.Constant) for v in values) and len({repr(v.value) for v in values}) == 1:
                    return values[0].value
                texts = {unparse(v) for v in values}
                if len(texts) == 1 and re.fullmatch(r"torch\.\w+", next(iter(texts))):
                    return Ext(next(iter(texts)))  # a dtype set once in __init__ (torch.int8)
                return Unknown(text)
        return Unknown(text)

    def _call_value(self, node: ast.Call, frame: Frame, depth: int) -> Any:
        text = unparse(node)[:160]
        name = _dotted(node.func)
        if name == "getattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            attr = ast.Attribute(value=node.args[0], attr=node.args[1].value, ctx=ast.Load())
            ast.copy_location(attr, node)
            value = self.value(attr, frame, depth + 1)
            if is_unknown(value) and len(node.args) == 3:
                return value
            return value
        if name == "hasattr" and len(node.args) == 2 and isinstance(node.args[1], ast.Constant):
            owner = self.value(node.args[0], frame)
            attr = node.args[1].value
            if isinstance(owner, SelfRef):
                if f"self.{attr}" in self.self_attrs:
                    return True
                known = self._attribute(owner, attr, text, 0)
                if not is_unknown(known):
                    return True
            return Unknown(text)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
            base = self.value(node.func.value, frame, depth + 1)
            if isinstance(base, dict):
                key = self.value(node.args[0], frame, depth + 1)
                fallback = node.args[1] if len(node.args) > 1 else ast.Constant(None)
                return self._lookup(base, key, text, depth, (fallback, frame))
        target = self._callee(node, frame)
        if isinstance(target, FuncRef):
            if "/triton/" in target.module.path:
                return Unknown(text)
            return self._function_value(target, node, frame)
        if isinstance(target, ClassRef):
            return SelfRef(target.info)  # an instance: its methods resolve through the class
        if isinstance(target, Opaque):
            return Opaque(text)
        return Unknown(text)

    def _function_value(self, target: FuncRef, node: ast.Call, frame: Frame) -> Any:
        text = unparse(node)[:160]
        args_key = tuple(repr(self.value(a, frame)) for a in node.args if not isinstance(a, ast.Starred))
        kw_key = tuple((k.arg, repr(self.value(k.value, frame))) for k in node.keywords)
        key = ("call", id(target.node), target.cls.name if target.cls else None, args_key, kw_key)
        if key in self._value_cache:
            return self._value_cache[key]
        if id(target.node) in self._active or frame.depth >= MAX_DEPTH:
            return Unknown(text)
        callee = self._frame_for(target, {}, frame, node.args, node.keywords, frame.depth + 1)
        self._active.append(id(target.node))
        try:
            states = self._block(target.node.body, callee, [State()])
        finally:
            self._active.pop()
        rets = [s.ret for s in states if not s.raised]
        if not rets:
            result: Any = Unknown(text)
        elif all(_same(r, rets[0]) for r in rets) and not is_unknown(rets[0]):
            result = rets[0]
        else:
            result = Unknown(text)
        self._value_cache[key] = result
        return result


def _is_enum(klass: ClassInfo, walker: Walker) -> bool:
    for info in walker.mro(klass):
        for base in info.bases:
            text = _dotted(base) or ""
            if text.split(".")[-1] in ("Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"):
                return True
    return False


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and a == b
    except Exception:
        return False


def _truth(value: Any) -> bool | None:
    if isinstance(value, Default):
        value = value.value
    if is_unknown(value) or isinstance(value, (Ext, Opaque, OneOf)):
        return None
    if isinstance(value, (FuncRef, ClassRef, SelfRef, ModuleRef, Member)):
        return True
    try:
        return bool(value)
    except Exception:
        return None


def _compare(left: Any, op: ast.cmpop, right: Any) -> bool | None:
    if isinstance(op, (ast.Is, ast.IsNot)):
        if right is None:
            if left is None:
                verdict = True
            elif isinstance(
                left, (Opaque, FuncRef, ClassRef, SelfRef, ModuleRef, Member, OneOf, bool, int, float, str)
            ):
                verdict = False
            else:
                return None
            return verdict if isinstance(op, ast.Is) else not verdict
        if is_unknown(left) or is_unknown(right):
            return None
        if isinstance(left, (Member, OneOf)) or isinstance(right, (Member, OneOf)):
            verdict = _equal(left, right)
            if verdict is None:
                return None
            return verdict if isinstance(op, ast.Is) else not verdict
        return None
    if isinstance(op, (ast.Eq, ast.NotEq)):
        verdict = _equal(left, right)
        if verdict is None:
            return None
        return verdict if isinstance(op, ast.Eq) else not verdict
    if isinstance(op, (ast.In, ast.NotIn)):
        if isinstance(right, tuple) or isinstance(right, (list, set, frozenset)):
            verdicts = [_equal(left, item) for item in right]
            if True in verdicts:
                found = True
            elif all(v is False for v in verdicts):
                found = False
            else:
                return None
            return found if isinstance(op, ast.In) else not found
        if isinstance(right, str) and isinstance(left, str):
            return (left in right) if isinstance(op, ast.In) else (left not in right)
        return None
    if isinstance(left, (int, float)) and isinstance(right, (int, float)) and not isinstance(left, bool):
        return {ast.Lt: left < right, ast.LtE: left <= right, ast.Gt: left > right, ast.GtE: left >= right}.get(
            type(op)
        )
    return None


def _equal(left: Any, right: Any) -> bool | None:
    if is_unknown(left) or is_unknown(right):
        return None
    if isinstance(left, OneOf):
        return left.equals(right)
    if isinstance(right, OneOf):
        return right.equals(left)
    if isinstance(left, Member) and isinstance(right, Member):
        if left.name.rsplit(".", 2)[-2:] == right.name.rsplit(".", 2)[-2:]:
            return True
        if left.name.rsplit(".", 1)[0].rsplit(".", 1)[-1] == right.name.rsplit(".", 1)[0].rsplit(".", 1)[-1]:
            return False
        return None
    if (
        isinstance(left, Ext)
        and isinstance(right, Ext)
        and left.dotted.startswith("torch.")
        and right.dotted.startswith("torch.")
    ):
        return left.dotted == right.dotted  # torch dtypes and constants: torch.int8 == torch.int8
    if isinstance(left, (Opaque, Ext, FuncRef, ClassRef, SelfRef, ModuleRef)) or isinstance(
        right, (Opaque, Ext, FuncRef, ClassRef, SelfRef, ModuleRef)
    ):
        if left is None or right is None:
            return False
        return None
    if isinstance(left, (Member,)) or isinstance(right, (Member,)):
        return None if not (left is None or right is None) else False
    try:
        return bool(left == right)
    except Exception:
        return None


def _equal_tuple(left: tuple, right: Any) -> bool | None:
    if not isinstance(right, tuple) or len(left) != len(right):
        return False if isinstance(right, tuple) else None
    verdicts = [_equal(a, b) for a, b in zip(left, right)]
    if False in verdicts:
        return False
    return True if all(v is True for v in verdicts) else None


def _dedupe(states: list[State]) -> list[State]:
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
