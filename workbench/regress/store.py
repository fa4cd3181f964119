"""Named baselines: result files kept with their fingerprints under the workbench's data directory.

    <data>/baselines/<name>/manifest.json     name, created_at, updated_at, and per stored file: its
                                              original path, sha256, kind, runs and series
    <data>/baselines/<name>/results/NNN-<file> byte-for-byte copies of the saved result files

(<data> is `workbench.settings.data_dir()`, $ASCEND_WORKBENCH_DATA, default ~/.local/share/ascend-workbench.)

Stored data is never changed by a command that fails: every result file is read and checked first,
the new baseline is written into a staging directory next to the store, and only a complete one is
renamed into place (the old one is renamed away first and removed after). Saving, appending and
deleting hold one lock, so two commands cannot interleave. A file already in the baseline (same
sha256) is not added twice: counting one run twice would shrink the measured noise.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.regress.results import Run, read_all, read_results
from workbench.results.files import exclusive_lock, remove_tree, staged_directory, write_json
from workbench.settings import data_dir

MANIFEST = "manifest.json"
RESULTS = "results"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def baselines_root() -> Path:
    return data_dir() / "baselines"


def check_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name or ""):
        raise WorkbenchError(
            f"baseline name {name!r}: use letters, digits, '.', '_' and '-' (up to 64, starting with a letter or "
            "digit), e.g. --name cann-8.2-tiny"
        )
    return name


@dataclass(frozen=True)
class Baseline:
    """A stored baseline: its manifest and every run of its stored files."""

    name: str
    path: Path
    manifest: dict[str, Any]
    runs: tuple[Run, ...]

    @property
    def created_at(self) -> str:
        return str(self.manifest.get("created_at", ""))

    @property
    def updated_at(self) -> str:
        return str(self.manifest.get("updated_at", ""))


@dataclass(frozen=True)
class SaveOutcome:
    baseline: Baseline
    added: tuple[str, ...]  # original paths stored by this command
    duplicates: tuple[str, ...]  # original paths skipped: the same content is already stored


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _stored() -> list[str]:
    """Names of the stored baselines (staging and retired directories start with '.')."""
    root = baselines_root()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(".") and p.is_dir())


def _unknown(name: str) -> WorkbenchError:
    known = _stored()
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    listing = ", ".join(known) if known else "none yet"
    return WorkbenchError(
        f"no baseline named {name!r} in {baselines_root()} (stored: {listing}){hint}; save one with "
        f"`ascend-workbench baseline save --name {name} RESULT...`"
    )


def _read_manifest(directory: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise WorkbenchError(
            f"{directory / MANIFEST}: unreadable baseline manifest ({exc}); delete the baseline "
            f"(`ascend-workbench baseline delete {directory.name}`) and save it again"
        ) from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        raise WorkbenchError(f"{directory / MANIFEST}: not a baseline manifest; delete the baseline and save it again")
    return manifest


def load_baseline(name: str) -> Baseline:
    """A stored baseline with its runs, or one WorkbenchError (unknown name with a hint, damaged store)."""
    directory = baselines_root() / check_name(name)
    if not (directory / MANIFEST).is_file():
        raise _unknown(name)
    manifest = _read_manifest(directory)
    runs = [run for entry in manifest["files"] for run in read_results(directory / entry["stored"])]
    return Baseline(name, directory, manifest, tuple(runs))


@dataclass(frozen=True)
class Listed:
    """One entry of `baseline list`: the baseline, or why it cannot be read (a damaged store)."""

    name: str
    baseline: Baseline | None
    problem: str | None = None


def list_baselines() -> list[Listed]:
    """Every stored baseline by name; a damaged one is listed with its problem instead of stopping the list."""
    listed = []
    for name in _stored():
        try:
            listed.append(Listed(name, load_baseline(name)))
        except WorkbenchError as exc:
            listed.append(Listed(name, None, str(exc)))
    return listed


def _entry(original: Path, stored: str, digest: str, runs: list[Run], now: str) -> dict[str, Any]:
    return {
        "stored": stored,
        "original": str(original.resolve()),
        "sha256": digest,
        "kind": runs[0].kind.value,
        "runs": len(runs),
        "series": sorted({r.series for r in runs}),
        "saved_at": now,
    }


def _fill(
    staging: Path,
    name: str,
    old: dict[str, Any] | None,
    old_dir: Path | None,
    new: list[tuple[Path, str, list[Run]]],
    now: str,
) -> None:
    """Write a complete baseline directory into `staging`: the old files (when appending) plus the new ones."""
    (staging / RESULTS).mkdir()
    entries = list(old["files"]) if old else []
    for entry in entries:
        shutil.copy2(old_dir / entry["stored"], staging / entry["stored"])  # type: ignore[operator]
    for path, digest, runs in new:
        stored = f"{RESULTS}/{len(entries) + 1:03d}-{path.name}"
        shutil.copy2(path, staging / stored)
        entries.append(_entry(path, stored, digest, runs, now))
    manifest = {"name": name, "created_at": old["created_at"] if old else now, "updated_at": now, "files": entries}
    write_json(staging / MANIFEST, manifest)


def save_baseline(name: str, paths: list[Path], *, replace: bool = False, append: bool = False) -> SaveOutcome:
    """Store result files as baseline `name` (new; or replacing / adding to an existing one)."""
    if replace and append:
        raise WorkbenchError("--replace and --append exclude each other: replace the baseline or add runs to it")
    check_name(name)
    paths = [Path(p) for p in paths]
    read_all(paths)  # every file must read before anything is written
    root = baselines_root()
    root.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(root / ".lock"):
        target = root / name
        exists = (target / MANIFEST).is_file()
        if exists and not (replace or append):
            current = load_baseline(name)
            raise WorkbenchError(
                f"baseline {name!r} already exists (saved {current.created_at}, {len(current.runs)} run(s)); pass "
                "--append to add these runs to it or --replace to overwrite it"
            )
        old = _read_manifest(target) if exists and append else None
        known = {e["sha256"] for e in old["files"]} if old else set()
        new, duplicates = [], []
        for path in paths:
            digest = _sha256(path)
            if digest in known:
                duplicates.append(str(path))
                continue
            known.add(digest)
            new.append((path, digest, read_results(path)))
        if not new:
            raise WorkbenchError(f"baseline {name!r}: every file given is already stored in it; nothing to add")
        now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        with staged_directory(target) as staging:
            _fill(staging, name, old, target if old else None, new, now)
    return SaveOutcome(load_baseline(name), tuple(str(p) for p, _, _ in new), tuple(duplicates))


def delete_baseline(name: str) -> Path:
    """Remove a stored baseline; an unknown name is an error (nothing else is touched)."""
    root = baselines_root()
    target = root / check_name(name)
    if not target.is_dir():
        raise _unknown(name)
    with exclusive_lock(root / ".lock"):
        remove_tree(target)
    return target
