"""The files a triage reads: logs given by path, directories walked, and why a file could not be read.

A directory is walked whole (a CANN log folder holds `debug/plog/plog-PID_TIMESTAMP.log` and
`debug/device-N/device-PID_TIMESTAMP.log`; a run folder holds server and worker logs). A file that is not
text (NUL bytes in its first block), cannot be opened, or does not exist becomes an `InputProblem` with
one sentence, and the other files are still read: one corrupt log must not hide the rank that failed.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SNIFF_BYTES = 8192
_PLOG_NAME = re.compile(r"^plog-\d+_\d+\.log$")
_DEVICE_NAME = re.compile(r"^device-\d+_\d+\.log$")


class InputKind(str, enum.Enum):
    PLOG = "plog"  # CANN host log of one process
    DEVICE_LOG = "device log"  # CANN device log of one process on one card
    LOG = "log"  # anything else: server, worker or rank output, a pasted text


@dataclass(frozen=True)
class InputFile:
    path: Path
    kind: InputKind


@dataclass(frozen=True)
class InputProblem:
    path: Path
    reason: str  # one sentence: what is wrong and what was done about it


def kind_of(path: Path) -> InputKind:
    if _PLOG_NAME.match(path.name):
        return InputKind.PLOG
    if _DEVICE_NAME.match(path.name):
        return InputKind.DEVICE_LOG
    return InputKind.LOG


def expand(paths: list[Path]) -> tuple[list[InputFile], list[InputProblem]]:
    """Every file under `paths` (directories walked, sorted), and the paths that are neither."""
    files: list[InputFile] = []
    problems: list[InputProblem] = []
    for path in paths:
        if path.is_dir():
            files += [InputFile(p, kind_of(p)) for p in _walk(path)]
        elif path.is_file():
            files.append(InputFile(path, kind_of(path)))
        elif path.exists():
            problems.append(InputProblem(path, "not a regular file or directory; skipped"))
        else:
            problems.append(InputProblem(path, "no such file or directory; skipped"))
    return files, problems


def _walk(root: Path) -> Iterator[Path]:
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            path = Path(folder) / name
            if path.is_file():
                yield path


def sniff(path: Path) -> str | None:
    """Why `path` cannot be triaged as text, or None when it can."""
    try:
        with path.open("rb") as handle:
            head = handle.read(SNIFF_BYTES)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc}); check its permissions; skipped"
    if b"\0" in head:
        return "is binary, not a text log (NUL bytes); skipped"
    return None


def read_lines(path: Path) -> Iterator[str]:
    """The file's lines; bytes that are not UTF-8 become U+FFFD, so a damaged line is still read."""
    with path.open("r", encoding="utf-8", errors="replace", newline="") as handle:
        yield from handle
