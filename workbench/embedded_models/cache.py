"""Where prepared models live, and how a build gets there without ever looking finished too early.

Layout under `workbench.settings.cache_dir()`:

    models/<name>/                  a complete Hugging Face directory, with provenance.json
    models/.<name>.lock             flock'ed while one process builds <name>
    models/.<name>.staging-XXXX/    staging directory of a build in progress (renamed into place)
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
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench import settings
from workbench.results.files import exclusive_lock, remove_leftovers, staged_directory, write_json

PROVENANCE_FILE = "provenance.json"


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
        remove_leftovers(target)  # the lock is held: no live build owns them, a killed one left them
        with staged_directory(target) as staging:
            extra = build(staging)
            write_json(staging / PROVENANCE_FILE, {**extra, "fingerprint": fingerprint}, indent=2, sort_keys=True)
    return target
