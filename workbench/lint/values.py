"""How a setting's text reads as a value: integers of 0/1 variables, the JSON a variable's value becomes when it
moves into additional_config, how a fix is written, and the subtree of a config argument."""

from __future__ import annotations

import json
from typing import Any

from workbench.lint.command import ParsedInput

INT_TYPES = {"int01": "0 or 1", "int": "an integer"}
FALSY_TEXT = {"false", "0", "no", "off", "none", ""}


def how_to_set(setting: str, value: Any) -> str:
    kind, _, name = setting.partition(".")
    if kind == "env":
        return f"export {name}={str(value).lower() if isinstance(value, bool) else value}"
    if kind == "flag":
        return f"add {name} {value}" if value is not True else f"add {name}"
    return f"set {setting} = {json.dumps(value)} (--{kind.replace('_', '-')})"


def is_int(value: Any) -> bool:
    try:
        int(str(value).strip())
        return True
    except ValueError:
        return False


def as_int(value: Any) -> int | None:
    text = str(value).strip().lower()
    return {"true": 1, "yes": 1, "on": 1, "false": 0, "no": 0, "off": 0}.get(text)


def env_value_as_json(value: Any, kind: str) -> Any:
    """A variable's text as the additional_config key it moves to expects it."""
    text = str(value).strip()
    if kind == "int01":
        number = as_int(text) if not is_int(text) else int(text)
        return bool(number) if number is not None else text
    if kind == "int" and is_int(text):
        return int(text)
    if kind == "text_lower":
        return text.lower()
    return text


def subtree(parsed: ParsedInput, path: str) -> Any:
    """The JSON value at `path` in the command's config arguments (for reporting a whole unknown section)."""
    section, _, rest = path.partition(".")
    for config in parsed.configs:
        if config.section != section:
            continue
        node: Any = config.value
        for part in rest.split("."):
            if not isinstance(node, dict) or part not in node:
                node = None
                break
            node = node[part]
        if node is not None:
            return node
    return None
