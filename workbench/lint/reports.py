"""What a lint says: the findings of one command at one release (`LintReport`), and what changes between two
releases (`UpgradeReport`), as tables and records."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.lint.command import ParsedInput
from workbench.lint.findings import Finding, FindingKind
from workbench.lint.judge_base import Target
from workbench.results.verdict import Verdict

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = ["line", "setting", "value", "finding", "severity", "reason", "fix", "cite"]


@dataclass(frozen=True)
class LintReport:
    parsed: ParsedInput
    target: Target
    findings: tuple[Finding, ...]
    source: Path | None = None
    model: str = ""  # where the served model's identity came from (config.json, --model-type, its name)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Verdict.ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Verdict.WARNING]

    @property
    def exit_code(self) -> int:
        return 1 if self.errors else 0

    def records(self) -> list[dict[str, Any]]:
        return [f.to_dict() for f in self.findings]

    def table(self) -> pd.DataFrame:
        import pandas as pd

        rows = [{**f.to_dict(), "value": _short(f.value)} for f in self.findings]
        return pd.DataFrame(rows, columns=[*COLUMNS, "release", "release_basis"])[COLUMNS]

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for finding in self.findings:
            counts[finding.finding.value] = counts.get(finding.finding.value, 0) + 1
        return counts

    def headline(self) -> str:
        where = self.parsed.where
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.counts().items()) if k not in {"ok", "foreign"})
        return (
            f"{where}: {len(self.findings)} setting(s) at vllm-ascend {self.target.release} "
            f"({self.target.basis}; vLLM {self.target.vllm_label}: {self.target.vllm_basis}): "
            f"{len(self.errors)} error(s), {len(self.warnings)} warning(s)" + (f" [{kinds}]" if kinds else "")
        )


@dataclass(frozen=True)
class UpgradeReport:
    before: LintReport
    after: LintReport

    def changes(self) -> list[dict[str, Any]]:
        """One row per setting of the input whose finding changes between the two releases."""
        rows, seen = [], set()
        for occ in self.before.parsed.occurrences:
            a, b = _covering(self.before, occ), _covering(self.after, occ)
            key = (occ.line, a.setting if a else None, b.setting if b else None)
            if key in seen or (a is None and b is None):
                continue
            seen.add(key)
            if a is not None and b is not None and a.finding is b.finding and a.severity is b.severity:
                if _gist(a.reason) == _gist(b.reason) or a.finding not in _MEANINGFUL:
                    continue
            setting = (b or a).setting
            rows.append(
                {
                    "line": occ.line,
                    "setting": setting,
                    "value": _short((b or a).value),
                    f"at {self.before.target.release}": a.finding.value if a else "-",
                    f"at {self.after.target.release}": b.finding.value if b else "-",
                    "what changes": b.reason if b is not None else "no finding",
                    "fix": b.fix if b is not None else "",
                }
            )
        return rows

    def table(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.changes())


# Same class at both releases: only these can still change what the setting does (a new meaning, a
# different rewrite); a dead setting that stays dead is not news.
_MEANINGFUL = {FindingKind.OK, FindingKind.REWRITTEN, FindingKind.DEPRECATED, FindingKind.RENAMED}


def _gist(reason: str) -> str:
    """A reason without release and vLLM version numbers, so two releases' texts compare on substance."""
    return re.sub(r"\bv?\d+\.\d+[\w.]*|\bmain\b", "", reason)


def _covering(report: LintReport, occ: Any) -> Finding | None:
    """The finding that speaks for an occurrence: its own, or its unknown section's."""
    for finding in report.findings:
        if finding.line == occ.line and (
            finding.setting == occ.setting or occ.setting.startswith(finding.setting + ".")
        ):
            return finding
    return None


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else "" if value is None else str(value)
    return text if len(text) <= 60 else text[:57] + "..."
