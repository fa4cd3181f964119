"""The values the walker computes: what a name, attribute or call of vllm-ascend's source evaluates to.

Python values (numbers, strings, None, tuples, dicts of bindings) stand for themselves; the classes below
stand for what the walk cannot hold as a Python value: an undecidable value (`Unknown`), a value that
exists but whose content is not known (`Opaque`, a tensor), an enum member (`Member`, `OneOf`), a fact
assumed rather than known (`Default`), a name outside vllm_ascend (`Ext`), and references into the
source tree (`FuncRef`, `ClassRef`, `SelfRef`, `ModuleRef`). `truth_of`, `compare` and `equal` decide
conditions over them, answering None when they cannot.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from scripts.kernel_truth.mirror import ClassInfo, Module


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


def same_value(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and a == b
    except Exception:
        return False


def truth_of(value: Any) -> bool | None:
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


def compare(left: Any, op: ast.cmpop, right: Any) -> bool | None:
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
            verdict = equal(left, right)
            if verdict is None:
                return None
            return verdict if isinstance(op, ast.Is) else not verdict
        return None
    if isinstance(op, (ast.Eq, ast.NotEq)):
        verdict = equal(left, right)
        if verdict is None:
            return None
        return verdict if isinstance(op, ast.Eq) else not verdict
    if isinstance(op, (ast.In, ast.NotIn)):
        if isinstance(right, tuple) or isinstance(right, (list, set, frozenset)):
            verdicts = [equal(left, item) for item in right]
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


def equal(left: Any, right: Any) -> bool | None:
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


def equal_tuple(left: tuple, right: Any) -> bool | None:
    if not isinstance(right, tuple) or len(left) != len(right):
        return False if isinstance(right, tuple) else None
    verdicts = [equal(a, b) for a, b in zip(left, right)]
    if False in verdicts:
        return False
    return True if all(v is True for v in verdicts) else None
