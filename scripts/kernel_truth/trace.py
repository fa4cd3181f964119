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

The walker is split by concern: statements and function bodies here, expressions in `evaluate.py`
(`Evaluator`), calls and kernels in `kernel_calls.py` (`KernelCalls`); the values it computes are
`values.py`, the paths it returns `paths.py`.
"""

from __future__ import annotations

import ast
from typing import Any

from scripts.kernel_truth.evaluate import Evaluator
from scripts.kernel_truth.kernel_calls import KernelCalls
from scripts.kernel_truth.mirror import ClassInfo, Tree
from scripts.kernel_truth.paths import MAX_DEPTH, Assumption, Frame, KernelCall, State, dedupe, dotted, unparse
from scripts.kernel_truth.values import ClassRef, Ext, FuncRef, Opaque, SelfRef, Unknown, compare


class Walker(KernelCalls, Evaluator):
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
            states = dedupe(states)
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
            return self._assign(stmt, frame, states)
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
            return self._match(stmt, frame, states)
        return states

    def _assign(
        self, stmt: ast.Assign | ast.AnnAssign | ast.AugAssign, frame: Frame, states: list[State]
    ) -> list[State]:
        """Bind the targets: a name or `self.attr` to (expression, frame), so it is evaluated when read."""
        if stmt.value is None:
            return states
        states = self._expr(stmt.value, frame, states)
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
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

    def _match(self, stmt: ast.Match, frame: Frame, states: list[State]) -> list[State]:
        """A `match` on a value the walk knows takes its case; an undecided case forks."""
        subject = self.value(stmt.subject, frame)
        out: list[State] = []
        for case in stmt.cases:
            pattern = case.pattern
            if isinstance(pattern, ast.MatchValue):
                verdict = compare(subject, ast.Eq(), self.value(pattern.value, frame))
            elif isinstance(pattern, ast.MatchAs) and pattern.pattern is None:
                verdict = True
            else:
                verdict = None
            if verdict is True:
                out += self._block(case.body, frame, states)
                return dedupe(out)
            if verdict is None:
                out += self._block(case.body, frame, states)
        return dedupe(out + states)

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
        return dedupe(self._block(body, frame, yes) + self._block(orelse, frame, no))

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
            return dedupe(self._expr(node.body, frame, yes) + self._expr(node.orelse, frame, no))
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

    # ---------------------------------------------------------------------------------- binding
    def _frame_for(self, func: FuncRef, given: dict[str, Any], caller: Frame | None, args, keywords, depth) -> Frame:
        frame = Frame(func.module, func, {}, depth)
        params = func.node.args
        positional = [*params.posonlyargs, *params.args]
        decorators = {dotted(d) for d in func.node.decorator_list}
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
