"""Lock files: the exact stack written down, and a machine checked against it (docs/METHOD.md §16).

`write_lock(out)` writes two files:

    stack.lock.yaml          kind, format, created_at, stack (the fingerprint of workbench.stack.fingerprint),
                             packages (every installed distribution, pip's normal names), constraints
    stack.constraints.txt    `name==version` for every pinnable distribution: `pip install -c` it to
                             rebuild the environment (editable and local-directory installs are listed
                             as comments: pip cannot pin them)

`check_lock(lock)` compares this machine with a lock file: every difference of the fingerprint and of
the package set, each with what it means (`workbench.regress.stackdiff`). Differences that can move a
result count (a start-up script or CI fails on them); another hostname or container instance is a note.
The lock file is YAML read through the one recipe reader, so a hand-edited file fails with the key.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import yaml
from packaging.utils import canonicalize_name
from pydantic import Field, field_validator

from workbench.errors import WorkbenchError
from workbench.recipes import Frozen, load_recipe_file
from workbench.regress.stackdiff import StackChange, diff_fingerprints, flatten, ordered
from workbench.results.envelope import DocumentKind
from workbench.results.files import write_text

LOCK_CHECK_KIND = DocumentKind("lock-check")

LOCK_KIND = "ascend-workbench-lock"
LOCK_FORMAT = 1
REQUIRED_STACK_KEYS = ("python", "versions")


class LockFile(Frozen):
    """A lock file as read back. `stack` keeps whatever fields the writer had (newer writers may add
    fields; they then show as differences instead of failing to read)."""

    kind: Literal["ascend-workbench-lock"]
    format: int = Field(LOCK_FORMAT, ge=1, le=LOCK_FORMAT)
    created_at: str
    stack: dict[str, Any]
    packages: dict[str, str] = {}
    constraints: str | None = None
    source: Path | None = Field(None, exclude=True)

    @field_validator("stack")
    @classmethod
    def _stack_has_basics(cls, value: dict[str, Any]) -> dict[str, Any]:
        missing = [k for k in REQUIRED_STACK_KEYS if k not in value]
        if missing:
            raise ValueError(
                f"the fingerprint lacks {', '.join(missing)}; write the file with `ascend-workbench lock write`"
            )
        return _versions_as_text(value)

    @field_validator("packages", mode="before")
    @classmethod
    def _package_versions_as_text(cls, value: Any) -> Any:
        return _versions_as_text(value) if isinstance(value, dict) else value


def _versions_as_text(data: dict[str, Any]) -> dict[str, Any]:
    """A hand-edited `torch: 2.5` reads as a YAML float; versions are text (the writer quotes them)."""
    return {
        k: _versions_as_text(v) if isinstance(v, dict) else str(v) if isinstance(v, float) else v
        for k, v in data.items()
    }


# -- the environment's packages --------------------------------------------------------------------


@dataclass(frozen=True)
class Package:
    name: str  # pip's normal form
    version: str
    pinnable: bool  # False for editable and local-directory installs (pip cannot pin them by version)


def _is_local_install(dist: metadata.Distribution) -> bool:
    """Editable or local-directory installs (direct_url.json), and metadata found in a source tree (an
    egg-info beside pyproject.toml, as `pip install -e` or a build leaves it on the path)."""
    root = Path(str(dist.locate_file("")))
    if (root / "pyproject.toml").is_file() or (root / "setup.py").is_file():
        return True
    text = dist.read_text("direct_url.json")
    if not text:
        return False
    try:
        url = json.loads(text)
    except ValueError:
        return False
    return bool(url.get("dir_info")) or str(url.get("url", "")).startswith("file:") and "archive_info" not in url


def installed_packages(search_path: list[str] | None = None) -> list[Package]:
    """Every distribution of this interpreter (or of `search_path`), by name; the first of duplicates wins,
    as it does on import."""
    found: dict[str, Package] = {}
    dists = metadata.distributions(path=search_path) if search_path is not None else metadata.distributions()
    for dist in dists:
        name = canonicalize_name(dist.metadata["Name"] or "")
        if name and name not in found:
            found[name] = Package(name, dist.version, not _is_local_install(dist))
    return [found[k] for k in sorted(found)]


def constraints_text(packages: list[Package], header: str) -> str:
    lines = [f"# {line}" for line in header.splitlines()]
    for p in packages:
        lines.append(
            f"{p.name}=={p.version}" if p.pinnable else f"# {p.name}=={p.version}: local/editable install, not pinnable"
        )
    return "\n".join(lines) + "\n"


# -- writing and reading ---------------------------------------------------------------------------


def default_constraints_path(out: Path) -> Path:
    """stack.lock.yaml -> stack.constraints.txt (beside the lock file)."""
    stem = out.name.split(".")[0] or "stack"
    return out.with_name(f"{stem}.constraints.txt")


def write_lock(out: Path, *, constraints: Path | None = None, stack: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """Write the lock file and its pip constraints file; return both paths."""
    from workbench.stack.provenance import stack as machine_stack

    out = Path(out)
    constraints = Path(constraints) if constraints else default_constraints_path(out)
    fingerprint = stack if stack is not None else machine_stack()
    packages = installed_packages()
    created = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    header = f"pip constraints written by `ascend-workbench lock write` on {fingerprint.get('hostname')} at {created}\n"
    header += f"use: pip install -c {constraints.name} <packages>  (with the lock file {out.name})"
    record = {
        "kind": LOCK_KIND,
        "format": LOCK_FORMAT,
        "created_at": created,
        "constraints": os.path.relpath(constraints.resolve(), out.resolve().parent),
        "stack": fingerprint,
        "packages": {p.name: p.version for p in packages},
    }
    intro = f"# Stack lock (docs/METHOD.md §16). Check a machine against it: ascend-workbench lock check {out.name}\n"
    write_text(constraints, constraints_text(packages, header))
    write_text(out, intro + yaml.safe_dump(record, sort_keys=False, allow_unicode=True))
    return out, constraints


def read_lock(path: Path | str) -> LockFile:
    """A lock file, or one WorkbenchError naming the file and how to get a good one."""
    path = Path(path)
    if not path.is_file():
        raise WorkbenchError(f"{path}: lock file not found; write one with `ascend-workbench lock write --out {path}`")
    return load_recipe_file(LockFile, path, what="lock file", required="'kind', 'created_at' and 'stack'")


# -- checking ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LockCheck:
    """This machine against a lock file: every difference, the ones that count first."""

    lock: LockFile
    changes: tuple[StackChange, ...]

    @property
    def counting(self) -> tuple[StackChange, ...]:
        return tuple(c for c in self.changes if c.counts)

    @property
    def ok(self) -> bool:
        return not self.counting

    def rows(self) -> list[dict[str, Any]]:
        return [c.row() for c in self.changes]

    def write(self, path: Path, lock_file: Path) -> Path:
        """`lock check --json`: the differences, stamped as a `lock-check` document."""
        from workbench.results.envelope import write_result
        from workbench.stack.provenance import provenance

        document = {"lock_file": str(lock_file), "ok": self.ok, "differences": self.rows()}
        return write_result(path, document, provenance(), LOCK_CHECK_KIND)


def check_lock(
    lock: LockFile, *, stack: dict[str, Any] | None = None, packages: list[Package] | None = None
) -> LockCheck:
    """Compare the machine (or the given stack and packages) with `lock`."""
    from workbench.stack.provenance import stack as machine_stack

    current = stack if stack is not None else machine_stack()
    changes = diff_fingerprints(lock.stack, current)
    in_stack = {canonicalize_name(k.split(".", 1)[1]) for k in flatten(lock.stack) if k.startswith("versions.")}
    mine = {p.name: p.version for p in (packages if packages is not None else installed_packages())}
    locked = {canonicalize_name(k): v for k, v in lock.packages.items()}
    extra = diff_fingerprints(
        {f"packages.{k}": v for k, v in locked.items() if k not in in_stack},
        {f"packages.{k}": v for k, v in mine.items() if k not in in_stack},
    )
    return LockCheck(lock, tuple(ordered([*changes, *extra])))


def format_check(check: LockCheck, path: Path) -> str:
    """The report `lock check` prints: one line per difference with its meaning, then the verdict."""
    lines = [f"lock file {path}: written {check.lock.created_at} on {check.lock.stack.get('hostname') or '?'}"]
    for change in check.changes:
        mark = "DIFF" if change.counts else "note"
        lines.append(f"  {mark}  {change.describe()}")
    if check.ok:
        extra = f" ({len(check.changes)} note(s))" if check.changes else ""
        lines.append(f"this machine matches the lock{extra}")
    else:
        lines.append(
            f"{len(check.counting)} difference(s) from the locked stack: re-measure before trusting old baselines "
            f"(`ascend-workbench regress`), or write a new lock after review"
        )
    return "\n".join(lines)
