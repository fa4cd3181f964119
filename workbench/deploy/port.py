"""Write the Ascend counterpart of every file a port changes, with a unified diff per file (docs/METHOD.md
§1, §2, §4). The output tree mirrors the input; files with nothing to change are not copied. The ported
files are read back with the same readers, and every engine container is linted at the picked release, so
the result says whether the ported serve commands lint clean there.
"""

from __future__ import annotations

import difflib
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from workbench.deploy.model import ReadResult
from workbench.deploy.plan import Change, Edit, plan
from workbench.deploy.policy import port_policy
from workbench.deploy.rewrite import apply_edits
from workbench.errors import WorkbenchError
from workbench.results.files import write_text


@dataclass(frozen=True)
class PortedFile:
    source: str
    target: str
    diff: str
    changes: tuple[Change, ...]
    not_applied: tuple[Edit, ...]

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "target": self.target,
            "diff": self.diff,
            "changes": [c.to_dict() for c in self.changes],
            "not_applied": [e.__dict__ for e in self.not_applied],
        }


def plan_all(result: ReadResult, release: str, npu_resource: str | None = None) -> list[Change]:
    policy = port_policy()
    consumed = frozenset(result.convention.flags)
    changes: list[Change] = []
    seen: set[tuple[str, int, str, str]] = set()
    for container in (*result.containers, *result.companions):
        for change in plan(container, release, policy, consumed, npu_resource):
            key = (
                change.where,
                change.edits[0].line if change.edits else 0,
                change.setting,
                change.edits[0].action if change.edits else "",
            )
            if key not in seen:  # one Dockerfile line shared by several deployments is changed once
                seen.add(key)
                changes.append(change)
    return changes


def write_port(changes: list[Change], out: Path, roots: tuple[Path, ...]) -> list[PortedFile]:
    """Apply the changes file by file under `out`; a `out` inside the inputs is refused (it would be read next time)."""
    by_file: dict[str, list[Change]] = defaultdict(list)
    for change in changes:
        for edit in change.edits:
            if change not in by_file[edit.file]:
                by_file[edit.file].append(change)
    ported: list[PortedFile] = []
    for source in sorted(by_file):
        path = Path(source)
        text = path.read_text(encoding="utf-8")
        edits = [e for c in by_file[source] for e in c.edits if e.file == source]
        new_text, failed = apply_edits(text, edits)
        target = out / _relative(path, roots)
        write_text(target, new_text)
        diff = "".join(
            difflib.unified_diff(
                text.splitlines(True),
                new_text.splitlines(True),
                f"a/{_relative(path, roots)}",
                f"b/{_relative(path, roots)}",
            )
        )
        ported.append(PortedFile(source, str(target), diff, tuple(by_file[source]), tuple(failed)))
    return ported


def check_out(out: Path, roots: tuple[Path, ...]) -> None:
    resolved = out.resolve()
    for root in roots:
        base = root.resolve() if root.is_dir() else root.resolve().parent
        if resolved == base or base in resolved.parents:
            raise WorkbenchError(
                f"--to-ascend {out}: inside the input {root}; write the ported files somewhere else (e.g. ported/)"
            )


def _relative(path: Path, roots: tuple[Path, ...]) -> Path:
    bases = [r.resolve() if r.is_dir() else r.resolve().parent for r in roots]
    resolved = path.resolve()
    for base in bases:
        if base == resolved or base in resolved.parents:
            return resolved.relative_to(base)
    common = Path(os.path.commonpath([str(b) for b in bases] + [str(resolved)]))
    return resolved.relative_to(common)
