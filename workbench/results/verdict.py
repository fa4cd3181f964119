"""The one verdict scale: pass, warning, error — what every table, chart and gate orders by.

msprobe judges accuracy on these three levels, and the workbench uses them for everything it judges:
an op or a module (accuracy), a pre-flight check, a first request, a bisect, a profile, a regression.
Each domain keeps names for its own outcomes (a check can be *skipped*, a bisect finds *culprits*, a
profile is *host-bound*) and maps each outcome onto this scale with a `verdict` property, so "the worst
thing that happened" means the same everywhere and one ordering sorts every table.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


class Verdict(str, enum.Enum):
    """Ordered by severity: pass < warning < error."""

    PASS = "pass"
    WARNING = "warning"
    ERROR = "error"

    @property
    def severity(self) -> int:
        """0 pass, 1 warning, 2 error."""
        return _SEVERITY[self.value]

    @classmethod
    def worst(cls, verdicts: Iterable[Verdict | str]) -> Verdict:
        """The most severe of `verdicts` (PASS for none)."""
        return max((cls(v) for v in verdicts), key=lambda v: v.severity, default=cls.PASS)


_SEVERITY = {"pass": 0, "warning": 1, "error": 2}
