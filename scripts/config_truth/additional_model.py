"""The values and records of the additional_config reader (`additional_reader`): sections, texts, the reads
found, section policies, the functions walked, and the small AST helpers both walkers use."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

ROOT = "additional_config"


MISSING = object()


@dataclass(frozen=True)
class Section:
    path: str


@dataclass(frozen=True)
class Text:
    value: str


@dataclass(frozen=True)
class KeyRead:
    path: str
    file: str
    line: int
    how: str  # get | item | contains | kwarg | defaults | helper
    default: Any = MISSING
    status: str = "read"  # read | deprecated | rejected


@dataclass(frozen=True)
class EnvFallback:
    env: str
    setting: str  # the additional_config path the variable stands in for
    file: str
    line: int


@dataclass(frozen=True)
class SectionPolicy:
    path: str
    unknown_keys: str  # ignored | rejected | warned | copied (every key set on the section's object)
    file: str
    line: int


@dataclass
class Findings:
    reads: list[KeyRead] = field(default_factory=list)
    fallbacks: list[EnvFallback] = field(default_factory=list)
    policies: list[SectionPolicy] = field(default_factory=list)
    allowed: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # path -> the values start-up accepts

    def add(self, read: KeyRead) -> None:
        self.reads.append(read)


@dataclass(frozen=True)
class Func:
    file: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    owner: ast.ClassDef | None

    @property
    def is_static(self) -> bool:
        return any(name_of(d) == "staticmethod" for d in self.node.decorator_list)

    def params(self) -> list[str]:
        args = self.node.args
        names = [a.arg for a in args.posonlyargs + args.args]
        if self.owner is not None and not self.is_static and names:
            names = names[1:]  # self / cls
        return names


def name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return name_of(node.func)
    return None


def literal(node: ast.AST | None) -> Any:
    if node is None:
        return MISSING
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    try:  # 18 * 1024 * 1024 and the like
        if isinstance(node, ast.BinOp) and all(
            isinstance(n, (ast.Constant, ast.BinOp, ast.operator)) for n in ast.walk(node)
        ):
            return eval(compile(ast.Expression(node), "<default>", "eval"), {"__builtins__": {}})  # noqa: S307
    except Exception:  # noqa: BLE001 - an expression we cannot fold is simply not a literal
        pass
    return MISSING


def mentions_deprecation(node: ast.AST) -> bool:
    """A logger call (or warnings.warn) whose message says 'deprecat'."""
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and (name_of(call.func) or "").startswith(("warning", "warn", "info")):
            for const in ast.walk(call):
                if (
                    isinstance(const, ast.Constant)
                    and isinstance(const.value, str)
                    and "deprecat" in const.value.lower()
                ):
                    return True
    return False


def raises(body: list[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Raise) for stmt in body for n in ast.walk(stmt))


def class_constant(cls: ast.ClassDef, name: str) -> Any:
    for item in cls.body:
        if isinstance(item, (ast.Assign, ast.AnnAssign)):
            target = item.targets[0] if isinstance(item, ast.Assign) else item.target
            if isinstance(target, ast.Name) and target.id == name and item.value is not None:
                return literal(item.value)
    return MISSING


def method_of(cls: ast.ClassDef, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    return next(
        (n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name), None
    )


def sets_attributes(loop: ast.For) -> bool:
    """Whether a loop over a dict's items sets each one on an object (`setattr(self, k, v)`)."""
    return any(isinstance(n, ast.Call) and name_of(n.func) == "setattr" for n in ast.walk(loop))


def iterates_keys(node: ast.AST, name: str) -> bool:
    """`set(name)`, `name.keys()`, `name.items()`, `name` itself (in a for), or a BinOp built from them."""
    if isinstance(node, ast.Name):
        return node.id == name
    if isinstance(node, ast.BinOp):
        return iterates_keys(node.left, name) or iterates_keys(node.right, name)
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id in {"set", "list", "sorted"} and node.args:
            return iterates_keys(node.args[0], name)
        if isinstance(node.func, ast.Attribute) and node.func.attr in {"keys", "items"}:
            return isinstance(node.func.value, ast.Name) and node.func.value.id == name
    return False


def slot_of(target: ast.AST) -> str | None:
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id in {"self", "cls"}:
        return f"{target.value.id}.{target.attr}"
    return None


def is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and name_of(node.value) == "os"
