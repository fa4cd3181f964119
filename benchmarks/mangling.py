"""Ways a log or an environment paste gets mangled on its way into a thread, as pure text transforms.

Issue 47 asks triage and the readers to read what users post however it arrives: markdown-wrapped,
line-wrapped by a browser, in a Chinese locale, from a container's log. The corpus holds each log and paste
once, in whatever shape its author happened to post it; applying each transform below to every one measures
the tools on every shape for every case (the scoreboard's "mangled" and "carried" lines). Each is a shape
seen in the corpus's own threads or in the deployments of docs/deploy.md:

    quoted      every line behind '> ' (a reply quoting the post, as GitHub's "Quote reply" writes it)
    folded      inside <details><summary> and a ```text fence (vLLM's and vllm-ascend's issue templates)
    crlf        Windows line ends (a paste from a Windows terminal or editor)
    indented    every line four spaces in (a markdown code block by indentation, a log shipper's prefix)
    wrapped     lines hard-wrapped at 60 columns at the last space before it (a browser or mail client);
                a line with no space before column 60 is left whole, as a browser leaves a long word
    fullwidth   a key's ':' as the full-width '：' (a Chinese input method)
    nbsp        spaces as U+00A0 (copied from a rendered page)
    coloured    a terminal's ANSI colours around the level words (a log copied from a colour terminal)
    cri         a container runtime's log file line: RFC 3339 time, stream, tag (kubelet's /var/log/pods)
    compose     docker compose's service column ('vllm-1  | ')

PASTE_WAYS keep a version's characters, LOG_WAYS a log line's text: what the post states stays stated.
(Tagging every line with one vLLM process prefix is not among them: a log of several processes would then
claim one writer, which changes what it says.)
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


def coloured(text: str) -> str:
    return re.sub(r"\b(ERROR|WARNING|INFO|CRITICAL)\b", "\x1b[1;31m\\1\x1b[0m", text)


def cri(text: str) -> str:
    return "\n".join(
        f"2025-06-01T08:{i // 60 % 60:02d}:{i % 60:02d}.123456789Z stderr F {line}"
        for i, line in enumerate(text.splitlines())
    )


def compose(text: str) -> str:
    return "\n".join(f"vllm-1  | {line}" for line in text.splitlines())


PASTE_WAYS: dict[str, Callable[[str], str]] = {
    "quoted": quoted,
    "folded": folded,
    "crlf": crlf,
    "indented": indented,
    "wrapped": wrapped,
    "fullwidth": fullwidth,
    "nbsp": nbsp,
}
LOG_WAYS: dict[str, Callable[[str], str]] = {
    "quoted": quoted,
    "folded": folded,
    "crlf": crlf,
    "indented": indented,
    "coloured": coloured,
    "cri": cri,
    "compose": compose,
}

__all__ = ["LOG_WAYS", "PASTE_WAYS", "WRAP_AT"]
