"""Where prepared models live, and how a build gets there without ever looking finished too early.

Layout under `workbench.settings.cache_dir()`:

    models/<name>/                  a complete Hugging Face directory, with provenance.json
    models/.<name>.lock             flock'ed while one process builds <name>
    models/.<name>.building-XXXX/   staging directory of a build in progress (renamed into place)
    downloads/                      source artefacts kept so a rebuild needs no network

Why the staging rename: a build takes from seconds (tiny) to a minute (smollm2) and can be killed at
any point. Building straight into `models/<name>` would leave a half-written directory that the next
`prepare` (or a vLLM server pointed at it) takes for a model. Building next to it and renaming makes
the switch atomic: the directory either is not there or is complete. `provenance.json` is written
last inside the staging directory and carries a fingerprint of the build recipe, so a cache built by
an older recipe is rebuilt rather than trusted.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from workbench import settings

PROVENANCE_FILE = "provenance.json"


def models_root() -> Path:
    """`<cache>/models`: one sub-directory per prepared model."""
    return settings.cache_dir() / "models"


def downloads_root() -> Path:
    """`<cache>/downloads`: downloaded source artefacts (wheels), kept for offline rebuilds."""
    return settings.cache_dir() / "downloads"


def read_provenance(model_dir: Path) -> dict[str, Any] | None:
    """The provenance record of a prepared model directory, or None when it is absent or unreadable."""
    try:
        return json.loads((model_dir / PROVENANCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def is_current(model_dir: Path, fingerprint: str) -> bool:
    """True when `model_dir` is a finished build of the recipe identified by `fingerprint`."""
    record = read_provenance(model_dir)
    return record is not None and record.get("fingerprint") == fingerprint


def write_json(path: Path, payload: dict[str, Any]) -> None:
    """Write JSON with sorted keys and a trailing newline, so equal content gives equal bytes."""
    path.write_text(json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


@contextlib.contextmanager
def exclusive_lock(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive flock on `lock_path` (created if missing): one builder per model at a time.

    The kernel drops the lock when the holder dies, so a killed build never blocks the next one.
    """
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def build_atomically(
    target: Path,
    fingerprint: str,
    build: Callable[[Path], dict[str, Any]],
    *,
    force: bool = False,
    guard: contextlib.AbstractContextManager[Any] | None = None,
) -> Path:
    """Return `target` holding a finished build of `fingerprint`, building it first if needed.

    `build(staging_dir)` writes the model files into an empty directory and returns extra provenance
    fields. The staging directory becomes `target` only after `build` returned and provenance.json was
    written; on any exception (including KeyboardInterrupt) it is deleted and `target` is untouched.
    `force=True` rebuilds even a current `target` (it is replaced only once the new build is done).
    `guard`, when given, is held only when a build may be needed (not for a current `target`), and is
    entered before the file lock, always in that order.
    """
    if not force and is_current(target, fingerprint):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with guard or contextlib.nullcontext(), exclusive_lock(target.parent / f".{target.name}.lock"):
        if not force and is_current(target, fingerprint):  # another process finished it while we waited
            return target
        _remove_abandoned_staging(target)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.building-", dir=target.parent))
        try:
            extra = build(staging)
            write_json(staging / PROVENANCE_FILE, {**extra, "fingerprint": fingerprint})
            _swap_into_place(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return target


def _remove_abandoned_staging(target: Path) -> None:
    # Called with the lock held, so no live build owns these: they are left over from a killed one.
    for pattern in (f".{target.name}.building-*", f".{target.name}.stale-*"):
        for leftover in target.parent.glob(pattern):
            shutil.rmtree(leftover, ignore_errors=True)


def _swap_into_place(staging: Path, target: Path) -> None:
    """Rename `staging` to `target`; an outdated `target` is first renamed aside, then deleted."""
    _make_readable(staging)
    if target.exists():
        stale = Path(tempfile.mkdtemp(prefix=f".{target.name}.stale-", dir=target.parent))
        target.rename(stale / "old")
        staging.rename(target)
        shutil.rmtree(stale, ignore_errors=True)
    else:
        staging.rename(target)


def _make_readable(folder: Path) -> None:
    # mkdtemp (and some writers) create owner-only entries; a model directory is read by servers and
    # notebooks that may run as another user, so give it the usual 755/644.
    folder.chmod(0o755)
    for entry in folder.rglob("*"):
        entry.chmod(0o755 if entry.is_dir() else 0o644)
