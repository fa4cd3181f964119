"""What triage makes of a log's first error, for the tests of the knowledge base's rounds (one place, not a
helper per file)."""

from __future__ import annotations

from workbench.triage.api import triage_text
from workbench.triage.diagnosis import Diagnosis
from workbench.triage.kinds import FailureKind


def first_diagnosis(log: str) -> Diagnosis:
    """The first error's diagnosis; the log must hold one."""
    report = triage_text(log, source="test")
    assert report.first is not None
    return report.first.diagnosis


def first_kind(log: str) -> FailureKind | None:
    """The first error's family, or None when the log holds no error (for 'is not read as' checks)."""
    report = triage_text(log, source="test")
    return report.first.diagnosis.kind if report.first is not None else None
