"""One finding per setting: what it is on the release judged, how bad, why, the fix, and where that is read.

The classes are the lint's own outcomes; each maps onto the one verdict scale (`workbench.results.verdict`)
as its severity, so a lint table sorts and gates like every other table of the workbench.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from workbench.results.verdict import Verdict


class FindingKind(str, enum.Enum):
    REJECTED = "rejected"  # start-up fails on it
    UNKNOWN = "unknown"  # the release reads no such name (did-you-mean in the reason)
    RENAMED = "renamed"  # read under another name: the fix moves the value there
    DEAD = "dead"  # read by an older release, not this one
    DEPRECATED = "deprecated"  # read, but warned about or slated for removal
    REWRITTEN = "rewritten"  # the platform changes the value
    KNOWN_BROKEN = "known_broken"  # accepted, and known from public reports to fail
    DUPLICATE = "duplicate"  # set twice: the last one wins
    MISUSE = "misuse"  # read, but not by a serving process (build-time), or a value that means otherwise
    REQUIRED_MISSING = "required_missing"  # needs another setting that is not there
    FOREIGN = "foreign"  # another project's name (CANN, HCCL, torch_npu, vLLM, ...)
    OK = "ok"


@dataclass(frozen=True)
class Finding:
    setting: str  # env.NAME, flag.--name, additional_config.a.b, compilation_config.key
    value: Any
    release: str  # the tag judged against ('v0.11.0', 'main')
    release_basis: str
    finding: FindingKind
    severity: Verdict
    reason: str
    fix: str = ""
    cite: str = ""
    line: int = 0
    # what --fix does: None leaves the setting; ("", None) removes it; (setting, value) moves it
    migrate: tuple[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "setting": self.setting,
            "value": self.value,
            "release": self.release,
            "release_basis": self.release_basis,
            "finding": self.finding.value,
            "severity": self.severity.value,
            "reason": self.reason,
            "fix": self.fix,
            "cite": self.cite,
            "line": self.line,
        }
