"""What a Python expression may evaluate to, as a string, read from the AST alone (never executed).

`StringValues` answers "could this device argument be 'cuda'?" and "is it built at run time from parts
we cannot see?". Resolution is deliberately simple and local:

- literals, f-strings, `+`, `%` and `.format` on literal templates, `a if c else b`, `a or b`;
- a name bound in the enclosing function (assignments anywhere in its body, flow-insensitive, and
  parameter defaults) or at module level; class bodies are skipped, as Python's own lookup does;
- `os.environ.get(K, default)` / `os.getenv(K, default)` / `os.environ[K]`: the default is a possible
  value and the result is marked as chosen at run time.

Anything else (attributes, calls, parameters without a default) is *opaque*: the value comes from
somewhere the scan reads separately, where its literal is reported. A value that is *built* here from
parts that stay unknown is never dropped: the rules report it as `unresolved`.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

_MAX_VALUES = 16  # keep products of unions small: 'a' if x else 'b' + ... combinations
_MAX_DEPTH = 8


@dataclass(frozen=True)
class StringValues:
    """Possible values of a string expression.

    values:    complete strings it may be;
    prefixes:  known beginnings of strings built at run time from parts the scan cannot see
               (f"cuda:{rank}" -> "cuda:"; "" when nothing of the beginning is known);
    assembled: some complete value was put together from pieces (so no single literal shows it);
    via:       how the value was reached ("DEVICE = ... (line 3)", "$DEVICE"), for the finding's detail.
    """

    values: frozenset[str] = frozenset()
    prefixes: frozenset[str] = frozenset()
    assembled: bool = False
    via: str = ""

    @property
    def built(self) -> bool:
        """Some value is built at run time from parts the scan cannot see."""
        return bool(self.prefixes)

    @property
    def opaque(self) -> bool:
        return not self.values and not self.prefixes

    def may_start(self, text: str) -> bool:
        """Could a value built at run time begin with `text`? ('' and 'cu' could become 'cuda'; 'npu:' not.)"""
        return any(text.startswith(p) or p.startswith(text) for p in self.prefixes)

    def union(self, other: StringValues) -> StringValues:
        return StringValues(
            values=frozenset(itertools.islice(self.values | other.values, _MAX_VALUES)),
            prefixes=self.prefixes | other.prefixes,
            assembled=self.assembled or other.assembled,
            via=self.via or other.via,
        )

    def with_via(self, via: str) -> StringValues:
        return StringValues(self.values, self.prefixes, self.assembled, self.via or via)


OPAQUE = StringValues()


def _literal(value: str) -> StringValues:
    return StringValues(values=frozenset({value}))


def _built(prefixes: frozenset[str] = frozenset({""}), via: str = "") -> StringValues:
    return StringValues(prefixes=prefixes or frozenset({""}), via=via)


def _scope_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of a scope, nested blocks included, nested functions and classes excluded."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from _scope_statements(getattr(stmt, field, None) or [])
        for handler in getattr(stmt, "handlers", None) or []:
            yield from _scope_statements(handler.body)
        for case in getattr(stmt, "cases", None) or []:
            yield from _scope_statements(case.body)


Binding = tuple[ast.expr | None, bool]  # (assigned expression or None for a bare parameter, is `+=`)


def _bindings(scope: ast.AST) -> dict[str, list[Binding]]:
    """name -> what is assigned to it in `scope`: parameters (None without a default), `=`, and `+=`."""
    bound: dict[str, list[Binding]] = {}
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = scope.args
        positional = args.posonlyargs + args.args
        defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        for arg, default in zip(positional, defaults):
            bound.setdefault(arg.arg, []).append((default, False))
        for arg, default in zip(args.kwonlyargs, args.kw_defaults):
            bound.setdefault(arg.arg, []).append((default, False))
        for arg in (args.vararg, args.kwarg):
            if arg is not None:
                bound.setdefault(arg.arg, []).append((None, False))
    for stmt in _scope_statements(getattr(scope, "body", [])):
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    bound.setdefault(target.id, []).append((stmt.value, False))
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            bound.setdefault(stmt.target.id, []).append((stmt.value, False))
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and isinstance(stmt.op, ast.Add):
            bound.setdefault(stmt.target.id, []).append((stmt.value, True))
    return bound


def _concat(left: StringValues, right: StringValues) -> StringValues:
    """left + right for strings."""
    via = left.via or right.via
    if left.values and right.values and not left.built and not right.built:
        joined = frozenset(itertools.islice((a + b for a in left.values for b in right.values), _MAX_VALUES))
        return StringValues(values=joined, assembled=True, via=via)
    if left.values or left.prefixes:
        return _built(left.values | left.prefixes, via)
    if right.values or right.built:
        return _built(via=via)  # a string, but its beginning is unknown
    return OPAQUE


def _environment_key(call: ast.expr) -> tuple[str, ast.expr | None] | None:
    """('DEVICE', default-expression) for os.getenv/os.environ.get/os.environ[...], else None."""
    if isinstance(call, ast.Subscript) and ast.unparse(call.value) == "os.environ":
        key = call.slice
        return (key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "?", None)
    if not isinstance(call, ast.Call) or not call.args:
        return None
    if ast.unparse(call.func) not in ("os.getenv", "os.environ.get", "getenv", "environ.get"):
        return None
    key = call.args[0]
    name = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "?"
    default = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "default"), None)
    return name, default


class ValueResolver:
    """Resolves expressions of one module; binding tables are built lazily, once per scope."""

    def __init__(self, module: ast.Module) -> None:
        self._module = module
        self._tables: dict[int, dict[str, list[Binding]]] = {}

    def _table(self, scope: ast.AST) -> dict[str, list[Binding]]:
        key = id(scope)
        if key not in self._tables:
            self._tables[key] = _bindings(scope)
        return self._tables[key]

    def resolve(self, expr: ast.expr, scopes: tuple[ast.AST, ...]) -> StringValues:
        """Possible string values of `expr`, evaluated in `scopes` (innermost function first)."""
        return self._resolve(expr, scopes + (self._module,), 0, frozenset())

    def _resolve(self, expr: ast.expr, scopes: tuple[ast.AST, ...], depth: int, seen: frozenset) -> StringValues:
        if depth > _MAX_DEPTH:
            return OPAQUE
        step = depth + 1
        if isinstance(expr, ast.Constant):
            return _literal(expr.value) if isinstance(expr.value, str) else OPAQUE
        if isinstance(expr, ast.JoinedStr):
            return self._fstring(expr, scopes, step, seen)
        if isinstance(expr, ast.BinOp):
            return self._binop(expr, scopes, step, seen)
        if isinstance(expr, ast.IfExp):
            return self._resolve(expr.body, scopes, step, seen).union(self._resolve(expr.orelse, scopes, step, seen))
        if isinstance(expr, ast.BoolOp):
            result = OPAQUE
            for value in expr.values:
                result = result.union(self._resolve(value, scopes, step, seen))
            return result
        if isinstance(expr, ast.Name):
            return self._name(expr.id, scopes, step, seen)
        if isinstance(expr, (ast.Call, ast.Subscript)):
            return self._call(expr, scopes, step, seen)
        return OPAQUE

    def _fstring(self, expr: ast.JoinedStr, scopes, depth, seen) -> StringValues:
        heads = {""}
        for part in expr.values:
            if isinstance(part, ast.Constant):
                heads = {h + str(part.value) for h in heads}
                continue
            inner = self._resolve(part.value, scopes, depth, seen) if isinstance(part, ast.FormattedValue) else OPAQUE
            if inner.built or not inner.values or part.format_spec is not None:
                tails = inner.prefixes if inner.built else {""}
                return _built(
                    frozenset(itertools.islice((h + t for h in heads for t in tails), _MAX_VALUES)), inner.via
                )
            heads = {h + v for h in heads for v in inner.values}
            heads = set(itertools.islice(heads, _MAX_VALUES))
        return StringValues(values=frozenset(heads), assembled=len(expr.values) > 1)

    def _binop(self, expr: ast.BinOp, scopes, depth, seen) -> StringValues:
        left = self._resolve(expr.left, scopes, depth, seen)
        if isinstance(expr.op, ast.Mod) and left.values:
            # "cuda:%d" % rank: known up to the first conversion
            return _built(frozenset(v.split("%", 1)[0] for v in left.values), left.via)
        if not isinstance(expr.op, ast.Add):
            return OPAQUE
        return _concat(left, self._resolve(expr.right, scopes, depth, seen))

    def _call(self, expr: ast.Call | ast.Subscript, scopes, depth, seen) -> StringValues:
        environment = _environment_key(expr)
        if environment is not None:
            name, default = environment
            result = _built(via=f"${name}")
            if default is not None:
                result = result.union(self._resolve(default, scopes, depth, seen))
            return result
        if isinstance(expr, ast.Subscript):
            if isinstance(expr.value, (ast.List, ast.Tuple)):
                result = OPAQUE
                for element in expr.value.elts:
                    result = result.union(self._resolve(element, scopes, depth, seen))
                return result
            return OPAQUE
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr == "format":
            template = self._resolve(func.value, scopes, depth, seen)
            if template.values:
                return _built(frozenset(v.split("{", 1)[0] for v in template.values), template.via)
        return OPAQUE

    def _name(self, name: str, scopes: tuple[ast.AST, ...], depth, seen) -> StringValues:
        """The values a name may hold in the innermost scope that binds it (flow-insensitive: every
        assignment counts; `x += s` adds x's other values followed by s)."""
        for index, scope in enumerate(scopes):
            if isinstance(scope, ast.ClassDef):
                continue
            bindings = self._table(scope).get(name)
            if bindings is None:
                continue
            key = (id(scope), name)
            if key in seen:
                return OPAQUE
            inner = scopes[index:]
            plain = OPAQUE
            for bound, augmented in bindings:
                if bound is not None and not augmented:
                    value = self._resolve(bound, inner, depth, seen | {key})
                    plain = plain if value.opaque else plain.union(value.with_via(f"{name} (line {bound.lineno})"))
            result = plain
            for bound, augmented in bindings:
                if augmented:
                    tail = self._resolve(bound, inner, depth, seen | {key})
                    result = result.union(_concat(plain, tail).with_via(f"{name} (line {bound.lineno})"))
            return result
        return OPAQUE
