"""op-plugin's schema strings, parsed: what a torch_npu function declares it takes.

    _npu_paged_attention(Tensor query, ..., Tensor(a!) out, *, Tensor? workspace=None) -> ()

becomes a `Signature`: the parameters in order, each with its type, whether it is optional (`?`),
whether it has a default, whether it is keyword-only (after `*`) and whether it is written (`(a!)`).
The grammar is torch's native_functions.yaml schema language, as op-plugin writes it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DATA = Path(__file__).parent / "data" / "op_plugin_schemas.json"
_PARAM = re.compile(r"^(?P<type>[A-Za-z]+(?:\[\d*\])?(?:\([a-z]!?\))?\??)\s+(?P<name>\w+)(?:\s*=\s*(?P<default>.+))?$")


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # base type without '?' or alias annotation: Tensor, int, float, bool, str, int[], SymInt[]
    optional: bool
    has_default: bool
    kw_only: bool
    written: bool
    default: str | None = None  # the default's text without quotes ('PA_NZ', '-1', 'None')


@dataclass(frozen=True)
class Signature:
    name: str
    params: tuple[Param, ...]
    returns: str

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)

    @property
    def positional(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if not p.kw_only)


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets: 'int[]? a=None, str b="x"' -> two items."""
    items, depth, current = [], 0, []
    for char in text:
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        if char == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    if "".join(current).strip():
        items.append("".join(current).strip())
    return items


def parse(schema: str) -> Signature:
    name, rest = schema.split("(", 1)
    depth, end = 1, 0
    for i, char in enumerate(rest):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            end = i
            break
    args, returns = rest[:end], rest[end + 1 :].split("->", 1)[1].strip()
    params, kw_only = [], False
    for item in _split_top(args):
        if item == "*":
            kw_only = True
            continue
        match = _PARAM.match(item)
        if match is None:
            raise ValueError(f"{name}: cannot parse parameter {item!r}")
        raw_type = match["type"]
        base = re.sub(r"\([a-z]!?\)", "", raw_type).rstrip("?")
        default = match["default"].strip().strip("'\"") if match["default"] is not None else None
        written = "!" in raw_type
        params.append(
            Param(match["name"], base, raw_type.endswith("?"), default is not None, kw_only, written, default)
        )
    return Signature(name.strip(), tuple(params), returns)


@cache
def schema_data() -> dict:
    return json.loads(DATA.read_text())


def wheel_commits(torch_npu: str) -> tuple[str, ...]:
    """The op-plugin commits a pinned torch_npu wheel may have been built from ('main': op-plugin master).

    '2.7.1' -> one (its release tag's submodule); '2.7.1.dev20250724' -> every pointer of its branch that day.
    The rule and the evidence are in the data file (`rule`, `wheels.<version>.built_from`).
    """
    wheels = schema_data()["wheels"]
    if torch_npu not in wheels:
        raise KeyError(f"torch_npu {torch_npu} is not in {DATA.name}; rerun extract_schemas.py")
    return tuple(dict.fromkeys(c["op_plugin"] for c in wheels[torch_npu]["built_from"]))


def _commit(commit: str) -> dict:
    return schema_data()["commits"][commit]


@cache
def signatures(commit: str) -> dict[str, Signature]:
    """Every function's declared signature at one op-plugin commit."""
    return {name: parse(entry["schema"]) for name, entry in _commit(commit)["functions"].items()}


def implicit(commit: str, function: str) -> dict[str, str]:
    """param -> what op-plugin passes the kernel when the call leaves it out and the schema has no default
    (npu_scatter_pa_kv_cache's cache_mode, hard-coded "PA_NZ" at op-plugin 7.2.0/7.3.0)."""
    found = _commit(commit)["implicit"].get(function, {})
    return {param: entry["value"] for param, entry in found.items()}


def effective(signature: Signature, passed: dict, commit: str, param: str) -> object:
    """The value the kernel gets for `param`: passed, else the schema's default, else op-plugin's implicit one."""
    if param in passed:
        return passed[param]
    declared = next((p for p in signature.params if p.name == param), None)
    if declared is not None and declared.default not in (None, "None"):
        return declared.default
    return implicit(commit, signature.name).get(param)


def available(commit: str, function: str, torch_minor: str) -> bool:
    """Whether op-plugin at `commit` implements `function` for this torch ('v2.9'): its `op_api` (aclnn) or
    `acl_op` entry covers it, `all_version` meaning the commit's own list; ATB functions always are."""
    data = _commit(commit)
    entry = data["functions"][function]
    if entry["op_api"] in ("atb", "core"):
        return True
    return any(_covers(entry.get(kind), torch_minor, data["all_version"]) for kind in ("op_api", "acl_op"))


def _covers(spec: object, torch_minor: str, all_version: list[str]) -> bool:
    if spec is None:
        return False
    if spec == "all_version":
        return torch_minor in all_version
    if isinstance(spec, list) and len(spec) == 2 and spec[1] == "newest":
        return _minor(torch_minor) >= _minor(spec[0])
    if isinstance(spec, list):
        return torch_minor in spec
    return spec == torch_minor


def _minor(tag: str) -> tuple[int, int]:
    major, minor = tag.lstrip("v").split(".")[:2]
    return int(major), int(minor)
