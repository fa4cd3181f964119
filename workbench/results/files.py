"""Durable files and directories: one atomic write, one exclusive lock, one staged directory.

Why each exists:
- `write_text` / `write_json`: a reader (a notebook, a resumed sweep, `regress`) must never see half
  a file. The text goes to a temporary file in the same directory (so the rename stays on one file
  system) and is renamed over the target: the target is either the old file or the new one.
- `exclusive_lock`: one writer at a time across processes (a model build, the baseline store, the
  hash cache). It is an flock, so the kernel drops it when its holder dies: a killed process never
  blocks the next one.
- `staged_directory`: a directory built in several steps (a model, a quantized checkpoint, a stored
  baseline) is built beside its target and renamed into place only when complete. A killed build
  leaves a hidden `.<name>.staging-*` folder that `remove_leftovers` clears, never a half-written
  directory that looks finished.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STAGING = "staging"  # the infix of a directory being built: .<name>.staging-XXXX
RETIRED = "retired"  # the infix of a replaced directory on its way out: .<name>.retired-XXXX


def write_text(path: Path, text: str, *, newline: str | None = None) -> Path:
    """Write `text` to `path` atomically (parents created); returns `path`.

    `newline=""` writes the text's own line endings (CSV writers produce their own).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes the file owner-only; results are read by other users too
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def write_json(path: Path, data: Any, *, indent: int | None = 1, sort_keys: bool = False) -> Path:
    """Write `data` as JSON atomically, with a trailing newline (see `json_value` for other types)."""
    text = json.dumps(data, indent=indent, sort_keys=sort_keys, ensure_ascii=False, default=json_value)
    return write_text(path, text + "\n")


def json_value(value: Any) -> Any:
    """What JSON cannot hold as is: a NumPy or torch scalar becomes its number, anything else its text
    (a Path, an enum member that is not a str, a timestamp)."""
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except (TypeError, ValueError):  # an array of several values has no single item
            pass
    return str(value)


@contextlib.contextmanager
def exclusive_lock(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive flock on `lock_path` (created if missing) for the `with` block."""
    lock_path = Path(lock_path)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def staged_directory(target: Path) -> Iterator[Path]:
    """Yield an empty directory beside `target`; when the block ends normally it becomes `target`.

    An existing `target` is replaced only at that moment (renamed aside, then deleted), so until the
    new directory is complete the old one stays whole. On any exception, KeyboardInterrupt included,
    the staging directory is deleted and `target` is untouched. Entries get the usual 755/644 modes:
    model directories and baselines are read by servers and notebooks that may run as another user.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.{STAGING}-", dir=target.parent))
    try:
        yield staging
        _make_readable(staging)
        _swap_into_place(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already after a successful swap


def remove_tree(target: Path) -> None:
    """Delete a directory so that no reader ever sees it half deleted: renamed aside first, then removed."""
    shutil.rmtree(_retire(Path(target)), ignore_errors=True)


def remove_leftovers(target: Path) -> None:
    """Delete staging and retired folders a killed process left beside `target`.

    Call it only while holding the lock that guards `target`, so that no live build owns them.
    """
    target = Path(target)
    for infix in (STAGING, RETIRED):
        for leftover in target.parent.glob(f".{target.name}.{infix}-*"):
            shutil.rmtree(leftover, ignore_errors=True)


def _retire(target: Path) -> Path:
    retired = target.with_name(f".{target.name}.{RETIRED}-{os.getpid()}-{time.monotonic_ns()}")
    os.rename(target, retired)
    return retired


def _swap_into_place(staging: Path, target: Path) -> None:
    # The old directory is renamed aside before the new one is renamed in, and deleted only after:
    # `target` is missing for the time between two renames, never for the time a large delete takes.
    retired = _retire(target) if target.exists() else None
    os.rename(staging, target)
    if retired is not None:
        shutil.rmtree(retired, ignore_errors=True)


def _make_readable(folder: Path) -> None:
    folder.chmod(0o755)
    for entry in folder.rglob("*"):
        if not entry.is_symlink():
            entry.chmod(0o755 if entry.is_dir() else 0o644)
