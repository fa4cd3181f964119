"""Ways a pasted environment report gets mangled on its way into a thread, as pure text transforms.

Issue 47 asks the readers to read pastes however they arrive: markdown-wrapped, line-wrapped by a browser,
in a Chinese locale. The corpus holds each paste once, in whatever shape its author happened to post it;
applying each transform below to every paste measures the readers on every shape for every paste (the
scoreboard's "mangled" line). Each transform is one shape seen in the corpus's own threads:

    quoted      every line behind '> ' (a reply quoting the report, as GitHub's "Quote reply" writes it)
    folded      inside <details><summary> and a ```text fence (vLLM's and vllm-ascend's issue templates)
    crlf        Windows line ends (a paste from a Windows terminal or editor)
    indented    every line four spaces in (a markdown code block by indentation, a log shipper's prefix)
    wrapped     lines hard-wrapped at 60 columns at the last space before it (a browser or mail client);
                a line with no space before column 60 is left whole, as a browser leaves a long word
    fullwidth   a key's ':' as the full-width '：' (a Chinese input method)
    nbsp        spaces as U+00A0 (copied from a rendered page)

A transform never changes a version's characters: what the paste states stays stated.
"""

from __future__ import annotations

import re
from collections.abc import Callable

WRAP_AT = 60


def quoted(text: str) -> str:
    return "\n".join(f"> {line}" for line in text.splitlines())


def folded(text: str) -> str:
    return f"<details>\n<summary>Environment</summary>\n\n```text\n{text}\n```\n\n</details>"


def crlf(text: str) -> str:
    return "\r\n".join(text.splitlines())


def indented(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())


def _wrap(line: str) -> list[str]:
    pieces = []
    while len(line) > WRAP_AT:
        cut = line.rfind(" ", 1, WRAP_AT + 1)
        if cut <= 0:
            break
        pieces.append(line[:cut])
        line = line[cut + 1 :]
    return [*pieces, line]


def wrapped(text: str) -> str:
    return "\n".join(piece for line in text.splitlines() for piece in _wrap(line))


def fullwidth(text: str) -> str:
    # the colon that ends a key (a word, then ':' and a space or the line's end), never one inside a path or URL
    return re.sub(r"(?m)(?<=[A-Za-z\u4e00-\u9fff)\]]):(?=\s|$)", "\uff1a", text)


def nbsp(text: str) -> str:
    return text.replace(" ", "\u00a0")


MANGLINGS: dict[str, Callable[[str], str]] = {
    "quoted": quoted,
    "folded": folded,
    "crlf": crlf,
    "indented": indented,
    "wrapped": wrapped,
    "fullwidth": fullwidth,
    "nbsp": nbsp,
}

__all__ = ["MANGLINGS", "WRAP_AT"]
