"""What carried a log to us, taken off its lines before they are read (`blocks.extract_blocks`).

A log reaches triage through something that marks every line: a reply that quotes it (`> `), a container
runtime's log file (`2025-06-01T08:00:00.123456789Z stderr F `, the CRI logging format kubelet keeps under
/var/log/pods), `kubectl logs --timestamps` or `docker logs -t` (an RFC 3339 time and a space), docker
compose's service column (`vllm-1  | `), a terminal's colours (ANSI escapes), or an indentation the paste
added. Each hides the prefixes the line reader knows (vLLM's process tag and logger, CANN's plog, c10's) and
shifts a traceback's indentation, so the same failure reads differently once carried.

A carrier is taken off only when it marks most of the log: the first `SAMPLE` non-empty lines decide
(at least half of them must carry it), so a single line that happens to start like one is left alone. Lines
keep their count and order (one line out for each line in), so line numbers still point into the file.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator

SAMPLE = 200
MAJORITY = 0.5

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# In the order they wrap each other: a quoted compose log is '> vllm-1  | ...'.
_CARRIERS = (
    re.compile(r"^[ \t]*(?:>[ \t]?)+"),  # a markdown quote, nested or not
    re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) (?:stdout|stderr) [FP] "),  # CRI
    re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) "),  # kubectl/docker --timestamps
    re.compile(r"^[A-Za-z0-9][\w.-]*[ \t]*\| "),  # docker compose's service column
)


def _strip(carrier: re.Pattern[str], line: str) -> str:
    match = carrier.match(line)
    return line[match.end() :] if match else line


def _carried_by(sample: list[str]) -> list[re.Pattern[str]]:
    """The carriers that mark at least half of `sample` (each judged after the ones around it are off)."""
    found = []
    lines = [line for line in sample if line.strip()]
    for carrier in _CARRIERS:
        if lines and sum(1 for line in lines if carrier.match(line)) >= MAJORITY * len(lines):
            found.append(carrier)
            lines = [_strip(carrier, line) for line in lines]
    return found


def _indent(lines: list[str]) -> str:
    """The leading whitespace every non-empty line shares (what a paste indented the whole log by)."""
    texts = [line for line in lines if line.strip()]
    if not texts:
        return ""
    shared = texts[0][: len(texts[0]) - len(texts[0].lstrip(" \t"))]
    for line in texts[1:]:
        while shared and not line.startswith(shared):
            shared = shared[:-1]
    return shared


def _uncoloured(line: str) -> str:
    return _ANSI.sub("", line) if "\x1b" in line else line  # a plog of 100 MB has no escape: no regex per line


def unwrap(lines: Iterable[str]) -> Iterator[str]:
    """`lines` without their colours, the carriers that mark most of them and the indentation they all share."""
    lines = iter(lines)
    head = [_uncoloured(line) for line in itertools.islice(lines, SAMPLE)]
    carriers = _carried_by([line.rstrip("\r\n") for line in head])

    def bare(line: str) -> str:
        for carrier in carriers:
            line = _strip(carrier, line)
        return line

    head = [bare(line) for line in head]
    indent = _indent([line.rstrip("\r\n") for line in head])
    for line in itertools.chain(head, (bare(_uncoloured(line)) for line in lines)):
        yield line[len(indent) :] if indent and line.startswith(indent) else line


__all__ = ["unwrap"]
