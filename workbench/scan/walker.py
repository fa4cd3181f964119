"""Which files a scan reads: walk the given paths, skip what is not the service's own code, and report
what cannot be walked.

Skipped by default (`DEFAULT_IGNORES`, overridable): version-control metadata, caches, build
artefacts of tools, node_modules, and any directory holding a `pyvenv.cfg` (a virtual environment,
whatever its name) — third-party code would bury the service's own ties. The ignores apply below the
paths given, never to a path itself, so `scan .venv/lib/python3.11/site-packages/vllm` scans vLLM.

Symbolic links are followed (code is often linked in), but a link that leads back into its own
ancestry is a `symlink_loop` problem, a dangling link a `broken_symlink` problem, and a file or
directory reached twice is scanned once.
"""

from __future__ import annotations

import collections
import errno
import fnmatch
import os
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.scan.file_kinds import FileKind, kind_from_first_line, kind_of
from workbench.scan.file_scan import Candidate
from workbench.scan.findings import ProblemKind, ScanProblem

DEFAULT_IGNORES: tuple[str, ...] = (
    ".git",
    ".hg",
    ".svn",
    "__pycache__",
    ".venv",
    "venv",
    ".tox",
    ".nox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".ipynb_checkpoints",
    "node_modules",
    ".eggs",
    "*.egg-info",
    ".idea",
    ".vscode",
)


@dataclass(frozen=True)
class WalkOptions:
    ignore: tuple[str, ...] = DEFAULT_IGNORES  # fnmatch patterns on file and directory names
    skip_virtualenvs: bool = True  # directories holding pyvenv.cfg
    follow_symlinks: bool = True


@dataclass(frozen=True)
class WalkResult:
    candidates: tuple[Candidate, ...]
    problems: tuple[ScanProblem, ...]
    skipped: tuple[tuple[str, int], ...]  # (reason, count), most frequent first
    skipped_files: tuple[tuple[str, str], ...] = ()  # (file, reason) for every file not read, named


class _Walk:
    """The state of one walk: what was seen (by device and inode), what was skipped, what went wrong."""

    def __init__(self, options: WalkOptions) -> None:
        self.options = options
        self.candidates: list[Candidate] = []
        self.problems: list[ScanProblem] = []
        self.skipped: collections.Counter[str] = collections.Counter()
        self.skipped_files: list[tuple[str, str]] = []
        self.seen_files: set[tuple[int, int]] = set()
        self.seen_dirs: set[tuple[int, int]] = set()

    def skip(self, path: str, reason: str) -> None:
        self.skipped[reason] += 1
        self.skipped_files.append((path, reason))

    def ignored(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.options.ignore)

    def add_file(self, path: str, stat: os.stat_result) -> None:
        key = (stat.st_dev, stat.st_ino)
        if key in self.seen_files:
            self.skip(path, "reached twice (link)")
            return
        self.seen_files.add(key)
        kind = kind_of(os.path.basename(path))
        if kind is None and "." not in os.path.basename(path):
            kind = self._sniff(path)
        if kind is None:
            self.skip(path, "not a kind the scan reads")
        else:
            self.candidates.append(Candidate(path, kind, stat.st_size))

    def _sniff(self, path: str) -> FileKind | None:
        try:
            with open(path, "rb") as handle:
                return kind_from_first_line(handle.read(128))
        except OSError:
            return None  # unreadable: it is reported if it turns out to be a kind we read; here it is not

    def walk_dir(self, root: str, stat: os.stat_result) -> None:
        stack: list[tuple[str, frozenset[tuple[int, int]]]] = [(root, frozenset({(stat.st_dev, stat.st_ino)}))]
        self.seen_dirs.add((stat.st_dev, stat.st_ino))
        while stack:
            directory, ancestors = stack.pop()
            try:
                entries = sorted(os.scandir(directory), key=lambda e: e.name)
            except OSError as exc:
                self.problems.append(ScanProblem(directory, ProblemKind.UNREADABLE, f"cannot list ({exc.strerror})"))
                continue
            for entry in entries:
                self.entry(entry, ancestors, stack)

    def entry(self, entry: os.DirEntry, ancestors, stack) -> None:
        if self.ignored(entry.name):
            self.skip(entry.path, f"ignored directory ({entry.name})" if entry.is_dir() else "ignored file name")
            return
        link = entry.is_symlink()
        if link and not self.options.follow_symlinks:
            self.skip(entry.path, "symbolic link (not followed)")
            return
        try:
            stat = os.stat(entry.path)  # follows links
        except OSError as exc:
            self.problems.append(self._link_problem(entry.path, exc) if link else _unreadable(entry.path, exc))
            return
        if not os.path.isdir(entry.path):
            if os.path.isfile(entry.path):
                self.add_file(entry.path, stat)
            return
        key = (stat.st_dev, stat.st_ino)
        if key in ancestors:
            target = os.readlink(entry.path) if link else entry.path
            message = f"links back to its own ancestor ({target}); not followed"
            self.problems.append(ScanProblem(entry.path, ProblemKind.SYMLINK_LOOP, message))
        elif key in self.seen_dirs:
            self.skip(entry.path, "reached twice (link)")
        elif self.options.skip_virtualenvs and os.path.exists(os.path.join(entry.path, "pyvenv.cfg")):
            self.skip(entry.path, f"virtual environment ({entry.name})")
        else:
            self.seen_dirs.add(key)
            stack.append((entry.path, ancestors | {key}))

    @staticmethod
    def _link_problem(path: str, exc: OSError) -> ScanProblem:
        if exc.errno == errno.ELOOP:
            return ScanProblem(path, ProblemKind.SYMLINK_LOOP, "symbolic link loop (the link resolves to itself)")
        if exc.errno == errno.ENOENT:
            return ScanProblem(path, ProblemKind.BROKEN_SYMLINK, f"link target {os.readlink(path)!r} does not exist")
        return _unreadable(path, exc)


def _unreadable(path: str, exc: OSError) -> ScanProblem:
    return ScanProblem(path, ProblemKind.UNREADABLE, f"cannot read ({exc.strerror or type(exc).__name__})")


def walk(paths: Sequence[str], options: WalkOptions = WalkOptions()) -> WalkResult:
    """Files to scan under `paths` (files or directories, which must exist), in a stable order."""
    state = _Walk(options)
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError as exc:
            state.problems.append(_unreadable(path, exc))
            continue
        if os.path.isdir(path):
            state.walk_dir(path, stat)
        else:
            state.add_file(path, stat)
    return WalkResult(
        tuple(state.candidates), tuple(state.problems), tuple(state.skipped.most_common()), tuple(state.skipped_files)
    )
