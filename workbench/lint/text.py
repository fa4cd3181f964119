"""A lint result as the terminal shows it: the headline, one block per finding, the upgrade's changes, the
migrated copy's diff; for a checkpoint, its findings and the verdict per tag."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from workbench.lint.checkpoint import findings_text, verdicts

if TYPE_CHECKING:
    from pathlib import Path

    from workbench.lint.checkpoint import CheckpointFinding
    from workbench.lint.findings import Finding
    from workbench.lint.reports import LintReport, UpgradeReport

BLOCK_INDENT = " " * 10


def report_text(
    report: LintReport,
    upgrade: UpgradeReport | None = None,
    fix: tuple[Path, str] | None = None,
    show_all: bool = False,
) -> str:
    """`fix`: where the migrated copy went and its diff ('' when nothing changed)."""
    lines = [report.headline()]
    shown = [f for f in report.findings if show_all or f.severity.value != "pass"]
    if not shown:
        lines.append("no findings: every setting is read as written" + ("" if show_all else " (--all lists them)"))
    lines += [finding_block(f) for f in shown]
    if upgrade is not None:
        lines += ["", *upgrade_lines(upgrade)]
    if fix is not None:
        out, diff = fix
        lines += [diff or f"{out}: nothing to migrate (written unchanged)", f"wrote {out}"]
    return "\n".join(lines)


def finding_block(finding: Finding) -> str:
    value = "" if finding.value is None else f" = {_short(finding.value)}"
    lines = [
        f"line {finding.line:<4} {finding.setting}{value}",
        f"{BLOCK_INDENT}{finding.finding.value} ({finding.severity.value}): {finding.reason}",
    ]
    if finding.fix:
        lines.append(f"{BLOCK_INDENT}fix: {finding.fix}")
    if finding.cite:
        lines.append(f"{BLOCK_INDENT}source: {finding.cite}")
    return "\n".join(lines)


def upgrade_lines(upgrade: UpgradeReport) -> list[str]:
    changes = upgrade.changes()
    before, after = upgrade.before.target.release, upgrade.after.target.release
    lines = [f"upgrade {before} -> {after}: {len(changes)} setting(s) change"]
    for row in changes:
        fix = f" (fix: {row['fix']})" if row["fix"] else ""
        lines.append(
            f"line {row['line']:<4} {row['setting']}: {row['at ' + before]} -> {row['at ' + after]}: "
            f"{row['what changes']}{fix}"
        )
    return lines


def checkpoint_text(checkpoint: Path, findings: list[CheckpointFinding], release: str | None, basis: str | None) -> str:
    where = f"checkpoint {checkpoint}: "
    if release:
        where += f"release {release} ({basis})"
    else:
        where += "every tag of the capability table (name one with --release)"
    lines = [where, findings_text(findings)]
    if release is None:
        per_tag = verdicts(findings)
        lines.append("verdict per tag: " + ", ".join(f"{tag} {v}" for tag, v in per_tag.items()))
    return "\n".join(lines)


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."
