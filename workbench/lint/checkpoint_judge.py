"""The checkpoint lint's record and its judge of one tag: the capability table of what vllm-ascend's loader
accepts (`workbench/truth/data/quant_capabilities.json`), the release to judge, and the findings."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from typing import Any

from workbench.errors import WorkbenchError
from workbench.lint.checkpoint_files import CheckpointFiles


@dataclass(frozen=True)
class CheckpointFinding:
    setting: str  # "<file>:<key or tensor>"
    value: str
    release: str  # the tag judged
    release_basis: str  # why that tag
    finding: str  # rule id
    severity: str  # warning | error
    reason: str
    fix: str
    cite: str  # file@tag:line in vllm-ascend

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


# -- the capability table -------------------------------------------------------------------------------


@cache
def capability_table() -> dict[str, Any]:
    path = resources.files("workbench.truth") / "data" / "quant_capabilities.json"
    return json.loads(path.read_text(encoding="utf-8"))


def _version(tag: str):
    from packaging.version import InvalidVersion, Version

    try:
        return Version(tag.lstrip("v"))
    except InvalidVersion:
        return None


def resolve_release(release: str | None, basis: str | None = None) -> list[tuple[str, str]]:
    """(tag, basis) to judge: every tag of the table for None; else the tag itself, main, or -- as the
    config-truth lint places a release (`ConfigTable.tag_for`) -- main's column for a release newer than
    the newest tag read and the newest older tag's column otherwise."""
    tags = capability_table()["tags"]
    if release is None:
        return [(tag, basis or "no release named: every tag of the capability table") for tag in tags]
    said = basis or f"--release {release}"
    text = str(release).strip()
    for tag in (text, f"v{text}", text.lower()):
        if tag in tags:
            return [(tag, said)]
    wanted = _version(text)
    if wanted is None:
        raise WorkbenchError(
            f"--release {release!r}: give a vllm-ascend version such as 0.18.0, or one of {', '.join(tags)}"
        )
    numbered = [(t, _version(t)) for t in tags if _version(t) is not None]
    if wanted > numbered[-1][1]:
        return [("main", f"{said}: newer than {numbered[-1][0]}, the newest tag read, so main's column")]
    older = [t for t, v in numbered if v <= wanted]
    if not older:
        raise WorkbenchError(f"--release {release}: older than the first tag the table reads ({tags[0]})")
    return [(older[-1], f"{said}: judged by {older[-1]}, the newest tag read before it")]


def cell(row_id: str, tag: str) -> dict[str, Any]:
    row = next((r for r in capability_table()["rows"] if r["id"] == row_id), None)
    if row is None:
        raise KeyError(f"capability table has no row {row_id!r}")
    return row["tags"][tag]


class CheckpointJudge:
    def __init__(self, ckpt: CheckpointFiles, tag: str, basis: str):
        self.ckpt, self.tag, self.basis = ckpt, tag, basis
        self.findings: list[CheckpointFinding] = []

    def add(
        self,
        setting: str,
        value: str,
        row: str | None,
        finding: str,
        severity: str,
        reason: str,
        fix: str,
        cite: str | None = None,
    ) -> None:
        cite = cite or (cell(row, self.tag)["cite"] if row else "")
        self.findings.append(
            CheckpointFinding(setting, value, self.tag, self.basis, finding, severity, reason, fix, cite)
        )

    def supported(self, row: str) -> bool:
        return bool(cell(row, self.tag)["supported"])
