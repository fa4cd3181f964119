"""Read a bare git mirror of a project at its tags (`git show TAG:path`), with one cache per process.

The generators under scripts/ never check anything out: every file is read from the object store,
so one mirror answers for every tag at once and nothing on disk changes.
"""

from __future__ import annotations

import functools
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path


class MirrorError(RuntimeError):
    pass


@dataclass(frozen=True)
class Mirror:
    path: Path

    @classmethod
    def open(cls, path: str | Path) -> Mirror:
        root = Path(path).expanduser()
        if not root.exists():
            raise MirrorError(
                f"{root}: no such mirror; fetch github:vllm-project/vllm-ascend and pass its git directory"
            )
        mirror = cls(root)
        try:
            mirror.git("rev-parse", "--git-dir")
        except MirrorError as exc:
            raise MirrorError(f"{root}: not a git repository ({exc})") from None
        return mirror

    def git(self, *args: str) -> str:
        return _git(str(self.path), args)

    def commit(self, ref: str) -> str:
        return self.git("rev-parse", f"{ref}^{{commit}}").strip()

    def has(self, ref: str) -> bool:
        try:
            self.commit(ref)
            return True
        except MirrorError:
            return False

    def show(self, ref: str, path: str) -> str | None:
        """The file's text at `ref`, or None when the file does not exist there."""
        return _show(str(self.path), ref, path)

    def files(self, ref: str, prefix: str) -> tuple[str, ...]:
        """Every file path under `prefix` at `ref`."""
        out = self.git("ls-tree", "-r", "--name-only", ref, "--", prefix)
        return tuple(line for line in out.splitlines() if line)

    def grep(self, ref: str, pattern: str, *paths: str) -> list[tuple[str, int, str]]:
        """(path, line number, line) for each line matching the extended regex at `ref`."""
        try:
            out = self.git("grep", "-n", "-E", "-e", pattern, ref, "--", *paths)
        except MirrorError:
            return []  # git grep exits 1 when nothing matches
        found = []
        for line in out.splitlines():
            # TAG:path:line:text
            rest = line[len(ref) + 1 :]
            path, number, text = rest.split(":", 2)
            found.append((path, int(number), text))
        return found


@functools.cache
def _git(root: str, args: tuple[str, ...]) -> str:
    proc = subprocess.run(["git", "--git-dir", root, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise MirrorError(proc.stderr.strip() or f"git {' '.join(args)} exited {proc.returncode}")
    return proc.stdout


@functools.lru_cache(maxsize=4096)
def _show(root: str, ref: str, path: str) -> str | None:
    proc = subprocess.run(["git", "--git-dir", root, "show", f"{ref}:{path}"], capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None


def line_of(text: str, pattern: str | re.Pattern[str]) -> int | None:
    """1-based number of the first line matching `pattern` (None when none does)."""
    regex = re.compile(pattern) if isinstance(pattern, str) else pattern
    for number, line in enumerate(text.splitlines(), 1):
        if regex.search(line):
            return number
    return None
