"""The records of the config-truth table (`workbench.truth.table`): a span of tags with what holds there, and
the platform's rules on a setting's value with the conditions they test."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Span:
    """A run of consecutive tags, [first, last], with what holds there."""

    first: str
    last: str
    cite: str
    facts: Mapping[str, Any]  # type, default, status, successor, meaning, removed_after / unknown_keys

    def get(self, key: str, default: Any = None) -> Any:
        value = self.facts.get(key)
        return default if value is None else value

    @property
    def status(self) -> str:
        return str(self.get("status", "read"))


@dataclass(frozen=True)
class Condition:
    """A test on a setting's value: `equals`, `in`, or `set` (present at all)."""

    setting: str
    equals: Any = None
    among: tuple[Any, ...] | None = None
    set: bool | None = None
    differs_from_vllm: bool = False  # the value is a version other than the vLLM that runs
    contains: str | None = None  # the value's text contains this (a JSON flag value: 'eagle3')

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], setting: str | None = None) -> Condition:
        among = data.get("in")
        return cls(
            setting=str(data.get("setting") or setting or ""),
            equals=data.get("equals"),
            among=tuple(among) if among is not None else None,
            set=data.get("set"),
            differs_from_vllm=bool(data.get("differs_from_vllm", False)),
            contains=data.get("contains"),
        )

    def holds(self, value: Any, present: bool = True, vllm_versions: tuple[str, ...] = ()) -> bool:
        if not present:
            return False
        if self.differs_from_vllm:
            given = str(value).strip().lstrip("v")
            return bool(vllm_versions) and given not in vllm_versions
        if self.contains is not None:
            return self.contains.lower() in str(value).lower()
        if self.equals is not None:
            return same_value(value, self.equals)
        if self.among is not None:
            return any(same_value(value, v) for v in self.among)
        return bool(self.set) if self.set is not None else True

    def describe(self) -> str:
        if self.differs_from_vllm:
            return f"{self.setting} differs from the vLLM version"
        if self.contains is not None:
            return f"{self.setting} with {self.contains}"
        if self.equals is not None:
            return f"{self.setting} = {self.equals}"
        if self.among is not None:
            return f"{self.setting} in {list(self.among)}"
        return f"{self.setting} set"


@dataclass(frozen=True)
class Rule:
    id: str
    setting: str
    when: Condition
    action: str  # rewrite | reject | requires | model_list | misuse | broken
    to: Any
    requires: tuple[Condition, ...]  # any one of them satisfies the rule
    unless: tuple[Condition, ...]
    also: tuple[Condition, ...]  # every one must hold too (known_broken entries)
    models: tuple[str, ...]  # only for model names containing one of these (empty: any model)
    multimodal: bool | None  # only for multimodal (True) or text-only (False) models; None: any
    reason: str
    evidence: tuple[str, ...]
    spans: tuple[Span, ...]
    severity: str = "error"  # a known breakage that depends on what the command does not say (the chip): warning


def _norm(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip().lower()


def same_value(a: Any, b: Any) -> bool:
    """Equality as a configuration reads it: text compares case-insensitively, and against a boolean
    '1' / 'true' and '0' / 'false' are the same."""
    na, nb = _norm(a), _norm(b)
    if na == nb:
        return True
    if isinstance(a, bool) or isinstance(b, bool):
        return {na, nb} <= {"true", "1"} or {na, nb} <= {"false", "0"}
    return False
