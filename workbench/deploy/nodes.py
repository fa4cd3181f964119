"""YAML read as nodes, so every value keeps its line (PyYAML's composer; nothing is constructed or run).

Manifests, compose files and `--config` files are read this way: a flag's line is the line of its own list
item, not a search for the key afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from workbench.errors import WorkbenchError


def documents(text: str, where: str) -> list[Node]:
    """Every document of a (multi-document) YAML text; one clear error for YAML that does not parse."""
    try:
        return [node for node in yaml.compose_all(text, Loader=yaml.SafeLoader) if node is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise WorkbenchError(
            f"{where}{line}: not valid YAML ({getattr(exc, 'problem', exc)}); fix the syntax there"
        ) from None


def line(node: Node) -> int:
    return node.start_mark.line + 1


def get(node: Node | None, *keys: str) -> Node | None:
    """The node at a path of mapping keys, or None."""
    for key in keys:
        if not isinstance(node, MappingNode):
            return None
        node = next((value for k, value in node.value if isinstance(k, ScalarNode) and k.value == key), None)
    return node


def items(node: Node | None) -> Iterator[tuple[str, Node, int]]:
    """(key, value node, key line) of a mapping."""
    if isinstance(node, MappingNode):
        for key, value in node.value:
            if isinstance(key, ScalarNode):
                yield key.value, value, line(key)


def elements(node: Node | None) -> list[Node]:
    return list(node.value) if isinstance(node, SequenceNode) else []


def text(node: Node | None) -> str | None:
    """A scalar's text (None for anything else)."""
    return str(node.value) if isinstance(node, ScalarNode) else None


def strings(node: Node | None) -> list[tuple[str, int]]:
    """(text, line) of each scalar of a sequence; a lone scalar is a one-item list."""
    if isinstance(node, ScalarNode):
        return [(str(node.value), line(node))]
    return [(str(n.value), line(n)) for n in elements(node) if isinstance(n, ScalarNode)]


def walk(node: Node | None) -> Iterator[Node]:
    """Every node under `node`, depth first."""
    if node is None:
        return
    yield node
    if isinstance(node, MappingNode):
        for key, value in node.value:
            yield from walk(key)
            yield from walk(value)
    elif isinstance(node, SequenceNode):
        for child in node.value:
            yield from walk(child)


def shell_text(node: Node, source: str) -> tuple[str, int]:
    """A scalar's value as shell text that keeps its source lines, and the line its text starts on.

    YAML folds a quoted or plain scalar written over several lines into one line, so a command in
    `- "bash x.sh;\\n   python3 -m ... --port 8080"` would lose the line of each flag. The source lines are
    joined with a shell continuation (` \\` + newline, read as a space by the shell reader) instead, each
    piece unescaped the way YAML would; a literal block (`|`) keeps its own lines, starting after `|`.
    """
    if not isinstance(node, ScalarNode):
        return "", line(node)
    value = str(node.value)
    first = line(node)
    if node.style in ("|", ">"):
        return value, first + 1
    raw = source[node.start_mark.index : node.end_mark.index]
    if "\n" not in raw:
        return value, first
    if node.style in ('"', "'"):
        raw = raw[1:-1]
    pieces = [piece.strip() for piece in raw.split("\n")]
    if node.style == '"':
        pieces = [_unescape_double(p) for p in pieces]
    elif node.style == "'":
        pieces = [p.replace("''", "'") for p in pieces]
    return " \\\n".join(pieces), first


def _unescape_double(piece: str) -> str:
    try:
        loaded = yaml.safe_load('"' + piece.rstrip("\\") + '"')
    except yaml.YAMLError:
        return piece
    return str(loaded) if loaded is not None else ""


def argv(node: Node | None, source: str) -> list[tuple[str, int]]:
    """(text, line) of each element of a command list; a multi-line element keeps its lines (`shell_text`)."""
    items = [node] if isinstance(node, ScalarNode) else elements(node)
    return [shell_text(n, source) for n in items if isinstance(n, ScalarNode)]
