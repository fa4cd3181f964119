"""One walk of one function body for the additional_config reader (`additional_reader.Analyzer`): variable
bindings, the reads found and the values returned."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from additional_model import (
    MISSING,
    ROOT,
    Func,
    KeyRead,
    Section,
    Text,
    is_environ,
    literal,
    mentions_deprecation,
    raises,
    slot_of,
)

if TYPE_CHECKING:
    from additional_reader import Analyzer


class Scope:
    """One walk of one function body: variable bindings, reads found, values returned."""

    def __init__(self, analyzer: Analyzer, func: Func, env: dict[str, Any]):
        self.analyzer = analyzer
        self.func = func
        self.env = env
        self.returns: list[Any] = []
        self.key_reads: list[str] = []
        self.env_reads: list[tuple[str, int]] = []

    # statements
    def walk(self, body: list[ast.stmt], status: str) -> None:
        for stmt in body:
            self.statement(stmt, status)

    def statement(self, stmt: ast.stmt, status: str) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return  # nested definitions are entered when called
        if isinstance(stmt, ast.If):
            branch = status
            # Only the branch's own statements: a nested `if` that warns judges its own test.
            if any(mentions_deprecation(inner) for inner in stmt.body if not isinstance(inner, ast.If)):
                branch = "deprecated"
            removed = raises(stmt.body) and not stmt.orelse
            self.test(stmt.test, branch, removed)
            self.walk(stmt.body, branch)
            self.walk(stmt.orelse, status)
            return
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            value_node = stmt.value
            if value_node is None:
                return
            value = self.value(value_node, status)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                slot = slot_of(target)
                if slot is not None:
                    # May-analysis: `x = x or {}` and `if x is None: x = {}` keep x's section.
                    if isinstance(value, (Section, Text)):
                        self.env[slot] = value
                else:
                    self.value(target, status)
            return
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            self.returns.append(self.value(stmt.value, status))
            return
        # any other statement: evaluate its expressions and walk nested bodies
        for _field, child in ast.iter_fields(stmt):
            if isinstance(child, list):
                if child and isinstance(child[0], ast.stmt):
                    self.walk(child, status)
                else:
                    for item in child:
                        if isinstance(item, ast.expr):
                            self.value(item, status)
            elif isinstance(child, ast.expr):
                self.value(child, status)

    def test(self, node: ast.expr, status: str, removed: bool) -> None:
        """An `if` test: `"k" in section` reads k (rejected when the branch only raises)."""
        if isinstance(node, ast.BoolOp):
            for item in node.values:
                self.test(item, status, removed)
        elif isinstance(node, ast.UnaryOp):
            self.test(node.operand, status, removed=False)
        elif isinstance(node, ast.Compare):
            self.compare(node, status, removed)
        else:
            self.value(node, status)

    def compare(self, node: ast.Compare, status: str, removed: bool) -> None:
        left = self.value(node.left, status)
        rights = [self.value(c, status) for c in node.comparators]
        if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.In, ast.NotIn)) or not isinstance(left, Text):
            return
        if isinstance(rights[0], Section):
            how_status = "rejected" if removed and isinstance(node.ops[0], ast.In) else status
            self.read(f"{rights[0].path}.{left.value}", node.lineno, "contains", MISSING, how_status)
        elif is_environ(node.comparators[0]):
            self.env_reads.append((left.value, node.lineno))

    # expressions
    def read(self, path: str, line: int, how: str, default: Any, status: str) -> None:
        self.key_reads.append(path)
        self.analyzer.record(KeyRead(path, self.func.file, line, how, default, status))

    def value(self, node: ast.AST, status: str) -> Any:  # noqa: C901 - one dispatch over node kinds
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return Text(node.value)
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            if node.id == ROOT:
                return Section(ROOT)
            return None
        if isinstance(node, ast.Attribute):
            if node.attr == ROOT:
                self.value(node.value, status)
                return Section(ROOT)
            slot = slot_of(node)
            if slot is not None and slot in self.env:
                return self.env[slot]
            self.value(node.value, status)
            return None
        if isinstance(node, ast.Subscript):
            base = self.value(node.value, status)
            key = self.value(node.slice, status)
            if isinstance(base, Section) and isinstance(key, Text) and isinstance(node.ctx, ast.Load):
                path = f"{base.path}.{key.value}"
                self.read(path, node.lineno, "item", MISSING, status)
                return Section(path)
            return None
        if isinstance(node, ast.Call):
            return self.call(node, status)
        if isinstance(node, ast.IfExp):
            self.value(node.test, status)
            a, b = self.value(node.body, status), self.value(node.orelse, status)
            return a if isinstance(a, Section) else b if isinstance(b, Section) else None
        if isinstance(node, ast.BoolOp):
            values = [self.value(v, status) for v in node.values]
            return next((v for v in values if isinstance(v, Section)), None)
        if isinstance(node, ast.Compare):
            self.compare(node, status, removed=False)
            return None
        if isinstance(node, ast.JoinedStr):
            return None
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.value(child, status)
        return None

    def call(self, node: ast.Call, status: str) -> Any:
        func = node.func
        if isinstance(func, ast.Attribute):
            base = self.value(func.value, status)
            if isinstance(base, Section):
                if func.attr == "get" and node.args:
                    key = self.value(node.args[0], status)
                    default = literal(node.args[1]) if len(node.args) > 1 else None
                    for extra in node.args[1:]:
                        self.value(extra, status)
                    if isinstance(key, Text):
                        path = f"{base.path}.{key.value}"
                        self.read(path, node.lineno, "get", default, status)
                        return Section(path)
                    return None
                if func.attr in {"copy"}:
                    return base
            if is_environ(func.value) and func.attr == "get" and node.args:
                key = self.value(node.args[0], status)
                if isinstance(key, Text):
                    self.env_reads.append((key.value, node.lineno))
                return None
            if isinstance(func.value, ast.Name) and func.value.id == "os" and func.attr == "getenv" and node.args:
                key = self.value(node.args[0], status)
                if isinstance(key, Text):
                    self.env_reads.append((key.value, node.lineno))
                return None
        if isinstance(func, ast.Name) and func.id in {"dict", "deepcopy"} and node.args:
            inner = self.value(node.args[0], status)
            if isinstance(inner, Section):
                return inner
        if isinstance(func, ast.Attribute) and func.attr == "deepcopy" and node.args:
            inner = self.value(node.args[0], status)
            if isinstance(inner, Section):
                return inner
        return self.analyzer.call(self, node, status)
