"""Apply a port's edits to the text of one file, line by line, keeping everything else as the user wrote it.

Edits address physical lines of the original text; they are applied bottom-up so earlier line numbers stay
valid. An edit that does not find its text is returned as not applied (and reported), never guessed.
"""

from __future__ import annotations

import json
import re

from workbench.deploy.plan import Edit


def apply_edits(text: str, edits: list[Edit]) -> tuple[str, list[Edit]]:
    """(the new text, the edits that could not be applied)."""
    lines = text.split("\n")
    failed: list[Edit] = []
    for edit in sorted(edits, key=lambda e: (e.line, _ORDER.get(e.action, 0)), reverse=True):
        if not 1 <= edit.line <= len(lines) or not _ACTIONS[edit.action](lines, edit.line - 1, edit):
            failed.append(edit)
    return "\n".join(lines), failed


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _replace(lines: list[str], i: int, edit: Edit) -> bool:
    if edit.old in lines[i]:
        lines[i] = lines[i].replace(edit.old, edit.new, 1)
        return True
    match = re.match(r"^(\s*(?:-\s+)?image:\s*)(.*?)\s*$", lines[i])
    if match is None:
        return False
    lines[i] = match.group(1) + edit.new  # an interpolated `image: ${REGISTRY}/x:${TAG}`: the value is replaced whole
    return True


def _delete(lines: list[str], i: int, edit: Edit) -> bool:
    _unjoin(lines, i)
    del lines[i]
    return True


def _unjoin(lines: list[str], i: int) -> None:
    """Deleting the last line of a `\\`-continued instruction: the line before must stop continuing."""
    if not lines[i].rstrip().endswith("\\") and i > 0 and lines[i - 1].rstrip().endswith("\\"):
        lines[i - 1] = lines[i - 1].rstrip()[:-1].rstrip()


def _delete_block(lines: list[str], i: int, edit: Edit) -> bool:
    """A list item (`- name: X` and its `value:` lines) or a mapping key with everything indented under it."""
    start = lines[i]
    anchor = _indent(start) + (2 if start.lstrip().startswith("- ") else 0)
    end = i + 1
    while (
        end < len(lines)
        and lines[end].strip()
        and _indent(lines[end]) >= anchor
        and not (_indent(lines[end]) == _indent(start) and lines[end].lstrip().startswith("- "))
    ):
        end += 1
    del lines[i:end]
    return True


def _delete_setting(lines: list[str], i: int, edit: Edit) -> bool:
    """Remove one setting named `old` (a flag with its value `new`, or a variable) from its line."""
    line, name = lines[i], edit.old
    bare = line.strip().lstrip("-").strip().strip("\"'")
    if (
        re.match(rf"^(export\s+)?{re.escape(name.lstrip('-'))}\s*[:=]", bare)
        or bare.rstrip(" \\") == name
        or bare.startswith(f"{name}=")
    ):
        if (
            name.startswith("--")
            and edit.new
            and i + 1 < len(lines)
            and edit.new in lines[i + 1]
            and lines[i + 1].lstrip().startswith("-")
        ):
            del lines[i + 1]  # the value on its own list line
        _delete(lines, i, edit)
        return True
    if not name.startswith("-"):  # `export NAME=value &&` inside a `sh -c` string
        new, count = re.subn(
            rf"export\s+{re.escape(name)}=(?:'[^']*'|\"[^\"]*\"|\S*)\s*(?:&&|;)?\s*", "", line, count=1
        )
        if count:
            lines[i] = new
            return True
    value = (
        "(?:=\\S+|\\s+(?:'[^']*'|\"[^\"]*\"|[^\\s\\-\\\\][^\\s]*))?"
        if name.startswith("-")
        else "=(?:'[^']*'|\"[^\"]*\"|\\S*)"
    )
    prefix = r"(?:\s+(?:-e|--env)\s+)" if not name.startswith("-") else r"\s*"
    pattern = rf"{prefix}[\"']?{re.escape(name)}{value}[\"']?,?"
    new, count = re.subn(pattern, "", line, count=1)
    if count == 0:
        return False
    lines[i] = new
    return True


def _delete_json_entry(lines: list[str], i: int, edit: Edit) -> bool:
    """The JSON object around line i (`{ "key": NAME, ... }`), and the comma that joined it to the list."""
    start = i
    while start >= 0 and lines[start].strip() not in ("{", "{,"):
        start -= 1
    if start < 0:
        return False
    end = i
    while end < len(lines) and not (
        _indent(lines[end]) == _indent(lines[start]) and lines[end].strip().startswith("}")
    ):
        end += 1
    if end >= len(lines):
        return False
    last = lines[end].strip() == "}"  # no comma after it: it ended the list
    del lines[start : end + 1]
    if last and start > 0 and lines[start - 1].rstrip().endswith(","):
        lines[start - 1] = lines[start - 1].rstrip()[:-1]
    return True


def _compose_npus(lines: list[str], i: int, edit: Edit) -> bool:
    """Give a compose service (anchored at its `image:` line) its NPU devices and the driver mounts."""
    pad = " " * _indent(lines[i])
    for key, items in (("volumes:", json.loads(edit.new)), ("devices:", json.loads(edit.old))):
        at = _key_line(lines, i, pad, key)
        if at is None:
            lines[i + 1 : i + 1] = [pad + key, *(f"{pad}  - {item}" for item in items)]
            continue
        end = at + 1
        while end < len(lines) and lines[end].startswith(pad + " ") and lines[end].strip():
            end += 1
        lines[end:end] = [f"{pad}  - {item}" for item in items]
    return True


def _delete_deploy(lines: list[str], i: int, edit: Edit) -> bool:
    """The service's `deploy:` block that holds a GPU reservation (line i is inside it)."""
    top = i
    while top > 0 and not (lines[top].strip().startswith("deploy:") and _indent(lines[top]) < _indent(lines[i])):
        top -= 1
    if not lines[top].strip().startswith("deploy:"):
        return False
    return _delete_block(lines, top, edit)


def _insert_after(lines: list[str], i: int, edit: Edit) -> bool:
    lines[i + 1 : i + 1] = edit.new.split("\n")
    return True


def _insert_sibling(lines: list[str], i: int, edit: Edit) -> bool:
    """Insert a `key: value` line after line i, at the indentation of line i's own key."""
    pad = _indent(lines[i]) + (2 if lines[i].lstrip().startswith("- ") else 0)
    lines.insert(i + 1, " " * pad + edit.new)
    return True


def _docker_gpus(lines: list[str], i: int, edit: Edit) -> bool:
    new, count = re.subn(r"--gpus(?:=|\s+)(?:'[^']*'|\"[^\"]*\"|\S+)", edit.new, lines[i], count=1)
    lines[i] = new
    return count == 1


def _key_line(lines: list[str], near: int, pad: str, key: str) -> int | None:
    """The line of `key` among the sibling keys (same indentation) of the service around `near`."""
    start = near
    while start > 0 and (_indent(lines[start - 1]) >= len(pad) or not lines[start - 1].strip()):
        start -= 1
    end = near
    while end < len(lines) and (_indent(lines[end]) >= len(pad) or not lines[end].strip()):
        end += 1
    return next((j for j in range(start, end) if lines[j] == pad + key or lines[j].startswith(pad + key + " ")), None)


_ACTIONS = {
    "replace": _replace,
    "delete": _delete,
    "delete_block": _delete_block,
    "delete_setting": _delete_setting,
    "insert_after": _insert_after,
    "insert_sibling": _insert_sibling,
    "docker_gpus": _docker_gpus,
    "compose_npus": _compose_npus,
    "delete_deploy": _delete_deploy,
    "delete_json_entry": _delete_json_entry,
}
_ORDER = {"insert_after": 1, "insert_sibling": 1}
