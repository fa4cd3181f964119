"""Scan one file: read it (never execute it), pick the rules for its kind, and turn anything that
stops a complete reading — too large, binary, not UTF-8, a syntax error, a permission error — into a
`ScanProblem` so the scan of the other files goes on.

`scan_file` is what the worker processes run; it takes and returns only plain frozen data.
"""

from __future__ import annotations

import dataclasses
import json
import mmap
import os
from dataclasses import dataclass

from workbench.scan import catalog
from workbench.scan.file_kinds import FileKind
from workbench.scan.findings import FileResult, Hit, ProblemKind, ScanProblem
from workbench.scan.placement import tier_of
from workbench.scan.python_rules import python_hits
from workbench.scan.rule_ids import Rule
from workbench.scan.text_rules import text_hits

_SNIFF_BYTES = 8192  # NUL bytes in the first 8 KiB mean "binary", as git and grep decide


@dataclass(frozen=True)
class Candidate:
    """A file the walker chose, with the kind that decides its rules."""

    path: str
    kind: FileKind
    size: int


@dataclass(frozen=True)
class FileScanSettings:
    npu_names: frozenset[str]
    max_text_bytes: int
    roots: tuple[str, ...] = ()  # the paths given: a file's tier is read from its path below them

    def relative(self, path: str) -> str:
        for root in self.roots:
            if path == root or path.startswith(root.rstrip(os.sep) + os.sep):
                return os.path.relpath(path, root) if path != root else os.path.basename(path)
        return path


def _problem(path: str, kind: ProblemKind, message: str, line: int | None = None) -> FileResult:
    return FileResult(path, problems=(ScanProblem(path, kind, message, line),), scanned=False)


def _decode(path: str, data: bytes) -> tuple[str, tuple[ScanProblem, ...]]:
    """UTF-8 text; undecodable bytes are replaced and reported, so the rest of the file is still read."""
    try:
        return data.decode("utf-8-sig"), ()
    except UnicodeDecodeError as exc:
        message = f"not UTF-8 (byte {exc.start}); scanned with the undecodable bytes replaced"
        return data.decode("utf-8", errors="replace"), (ScanProblem(path, ProblemKind.UNDECODABLE, message),)


def _library_hits(path: str, size: int) -> list[Hit]:
    """CUDA libraries a compiled extension names (its dynamic section, or dlopen strings): one hit."""
    if size == 0:
        return []
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        names = sorted({m.group().decode() for m in catalog.CUDA_LIBRARY_BYTES_RE.finditer(data)})
    if not names:
        return []
    return [Hit(path, None, None, Rule.NATIVE_CUDA_BINARY.value, f"compiled library naming {', '.join(names)}", "")]


def _python(path: str, data: bytes, settings: FileScanSettings) -> FileResult:
    problems: tuple[ScanProblem, ...] = ()
    source: bytes | str = data
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        if not data.startswith(b"#") or b"coding" not in data[:200]:  # PEP 263 cookies decode themselves
            source, problems = _decode(path, data)
    try:
        hits = python_hits(path, source, settings.npu_names)
    except SyntaxError as exc:
        return _problem(path, ProblemKind.SYNTAX_ERROR, f"does not parse: {exc.msg}; not scanned", exc.lineno)
    except (RecursionError, MemoryError) as exc:
        return _problem(path, ProblemKind.MALFORMED, f"too deeply nested to parse ({type(exc).__name__}); not scanned")
    return FileResult(path, tuple(hits), problems)


def _notebook(path: str, text: str, settings: FileScanSettings) -> FileResult:
    """Code cells as Python (cell-relative line numbers, 'cell N' in the detail); ! and % lines as shell."""
    try:
        cells = [c for c in json.loads(text).get("cells", []) if c.get("cell_type") == "code"]
    except (ValueError, AttributeError) as exc:
        return _problem(path, ProblemKind.MALFORMED, f"not a readable notebook ({exc}); not scanned")
    hits: list[Hit] = []
    problems: list[ScanProblem] = []
    for number, cell in enumerate(cells, 1):
        source = cell.get("source", "")
        lines = (source if isinstance(source, str) else "".join(source)).splitlines()
        magic = [line if line.lstrip().startswith(("!", "%")) else "" for line in lines]
        python = "\n".join("" if m else line for m, line in zip(magic, lines))
        found = text_hits(path, FileKind.SHELL, "\n".join(m.lstrip().lstrip("!%") for m in magic))
        try:
            found += python_hits(path, python, settings.npu_names)
        except (SyntaxError, RecursionError) as exc:
            problems.append(ScanProblem(path, ProblemKind.SYNTAX_ERROR, f"cell {number} does not parse: {exc}"))
        hits += [dataclasses.replace(h, detail=f"cell {number}" + (f"; {h.detail}" if h.detail else "")) for h in found]
    return FileResult(path, tuple(hits), tuple(problems))


def _dedupe(hits: list[Hit] | tuple[Hit, ...]) -> tuple[Hit, ...]:
    """One hit per (line, rule): a line that needs a change is listed once per reason."""
    seen: set[tuple[int | None, str, str]] = set()
    unique = []
    for hit in hits:
        key = (hit.line, hit.rule, hit.detail.split(";", 1)[0] if hit.detail.startswith("cell ") else "")
        if key not in seen:
            seen.add(key)
            unique.append(hit)
    return tuple(unique)


def _scan_text(candidate: Candidate, settings: FileScanSettings) -> FileResult:
    path, kind = candidate.path, candidate.kind
    if candidate.size > settings.max_text_bytes:
        limit = settings.max_text_bytes / 2**20
        return _problem(path, ProblemKind.TOO_LARGE, f"{candidate.size / 2**20:.1f} MiB > {limit:g} MiB; not scanned")
    with open(path, "rb") as handle:
        data = handle.read()
    if b"\0" in data[:_SNIFF_BYTES]:
        return _problem(path, ProblemKind.BINARY, f"binary content in a {kind.value} file; not scanned")
    text, problems = _decode(path, data)
    tier = tier_of(settings.relative(path), kind, text).value
    if kind is FileKind.PYTHON:
        return dataclasses.replace(_python(path, data, settings), tier=tier)
    if kind is FileKind.NOTEBOOK:
        result = _notebook(path, text, settings)
        return dataclasses.replace(result, problems=problems + result.problems, tier=tier)
    return FileResult(path, tuple(text_hits(path, kind, text)), problems, tier=tier)


def scan_file(candidate: Candidate, settings: FileScanSettings) -> FileResult:
    """Hits and problems of one file; never raises (a rule that raises is reported as an internal error)."""
    try:
        if candidate.kind is FileKind.BINARY_LIBRARY:
            tier = tier_of(settings.relative(candidate.path), candidate.kind, None).value
            result = FileResult(candidate.path, tuple(_library_hits(candidate.path, candidate.size)), tier=tier)
        else:
            result = _scan_text(candidate, settings)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return _problem(candidate.path, ProblemKind.UNREADABLE, f"cannot read ({reason}); not scanned")
    except Exception as exc:  # noqa: BLE001 - a bug in one rule must not lose the other files' findings
        where = f"{type(exc).__name__}: {exc}"
        return _problem(candidate.path, ProblemKind.INTERNAL_ERROR, f"a scan rule raised {where}; please report it")
    return dataclasses.replace(result, hits=_dedupe(result.hits))


def scan_chunk(candidates: tuple[Candidate, ...], settings: FileScanSettings) -> list[FileResult]:
    """Several files in one call, so worker processes get work in batches (less inter-process traffic)."""
    return [scan_file(c, settings) for c in candidates]
