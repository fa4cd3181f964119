"""The walker's expressions: the value of a name, an attribute, a call or an operator, under the facts.

`Evaluator` is the half of `Walker` (trace.py) that evaluates; the other half walks statements. The
facts answer first (`facts.lookup`); then the source: constants, module-level names, imports across
vllm_ascend, enum members, properties, `__init__` constants, and helper functions run for their return
value (cached per arguments).
"""

from __future__ import annotations

import ast
import operator
import re
from typing import Any

from scripts.kernel_truth.mirror import ClassInfo, Module
from scripts.kernel_truth.paths import MAX_DEPTH, Frame, State, dotted, unparse
from scripts.kernel_truth.values import (
    NOTHING,
    ClassRef,
    Default,
    Ext,
    FuncRef,
    Member,
    ModuleRef,
    Opaque,
    SelfRef,
    Unknown,
    compare,
    equal,
    equal_tuple,
    is_unknown,
    same_value,
    truth_of,
)

BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


class Evaluator:
    """Expression evaluation for `Walker` (it supplies tree, facts, mro, _block and _frame_for)."""

    def truth(self, node: ast.expr, frame: Frame) -> bool | None:
        value = self.value(node, frame)
        return truth_of(value)

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
            values = [truth_of(v) for v in raw]
            deciding = False if isinstance(node.op, ast.And) else True
            if deciding in values:
                i = values.index(deciding)
                return raw[i] if all(v is (not deciding) for v in values[:i]) else deciding
            return raw[-1] if all(v is (not deciding) for v in values) else Unknown(unparse(node)[:120])
        if isinstance(node, ast.UnaryOp):
            operand = self.value(node.operand, frame, depth + 1)
            if isinstance(node.op, ast.Not):
                verdict = truth_of(operand)
                return Unknown(f"not {unparse(node.operand)[:100]}") if verdict is None else not verdict
            if isinstance(node.op, ast.USub) and isinstance(operand, (int, float)):
                return -operand
            return Unknown(unparse(node)[:80])
        if isinstance(node, ast.Compare):
            left = self.value(node.left, frame, depth + 1)
            result: Any = True
            for op, right_node in zip(node.ops, node.comparators):
                right = self.value(right_node, frame, depth + 1)
                verdict = compare(left, op, right)
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
                operation = BINOPS.get(type(node.op))
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
            verdict = equal(candidate, key) if not isinstance(candidate, tuple) else equal_tuple(candidate, key)
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
                    if isinstance(base, SelfRef) and any(dotted(d) == "property" for d in method.decorator_list):
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
        result = (
            rets[0] if rets and all(same_value(r, rets[0]) for r in rets) and not is_unknown(rets[0]) else Unknown(text)
        )
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
        name = dotted(node.func)
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
        elif all(same_value(r, rets[0]) for r in rets) and not is_unknown(rets[0]):
            result = rets[0]
        else:
            result = Unknown(text)
        self._value_cache[key] = result
        return result


def _is_enum(klass: ClassInfo, walker: Evaluator) -> bool:
    for info in walker.mro(klass):
        for base in info.bases:
            text = dotted(base) or ""
            if text.split(".")[-1] in ("Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"):
                return True
    return False
