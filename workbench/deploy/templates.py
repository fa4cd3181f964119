"""Environments a platform hands an image: `.env` files and serverless endpoint templates (JSON lists of
`{"key": NAME, "value": V}` or `{"key": NAME, "input": {"default": V}}`, as RunPod's hub and test files
write them). Each becomes one deployment of the image the same import builds."""

from __future__ import annotations

import json
import re
from pathlib import Path

from workbench.deploy.model import Origin, Setting


def read_env_template(path: Path, text: str) -> tuple[Setting, ...] | None:
    """The environment a JSON template sets, or None when the file is not one."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    entries = list(_env_lists(data))
    if not entries:
        return None
    found: list[Setting] = []
    for entry in entries:
        name = entry.get("key") or entry.get("name")
        if not isinstance(name, str):
            continue
        value = entry.get("value", (entry.get("input") or {}).get("default"))
        if value is None:
            continue
        text_value = str(value).lower() if isinstance(value, bool) else str(value)
        found.append(Setting(f"env.{name}", text_value, Origin(str(path), _line(text, name), "template")))
    return tuple(found)


def _env_lists(data):
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "env" and isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                yield from value
            else:
                yield from _env_lists(value)
    elif isinstance(data, list):
        for item in data:
            yield from _env_lists(item)


def _line(text: str, name: str) -> int:
    match = re.search(rf"\"(?:key|name)\"\s*:\s*\"{re.escape(name)}\"", text)
    return text.count("\n", 0, match.start()) + 1 if match else 0
