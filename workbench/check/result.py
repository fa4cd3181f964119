"""The typed hand-off of every environment check: one `CheckResult` per question asked of the machine.

A check answers one question ("is /dev/shm big enough?") with a status, what it saw, what it wanted
and, when the answer is not `pass`, the one thing to do about it. Reports, the CLI and the notebook
only ever see these objects, so a new check needs no change anywhere else.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass
from typing import Any

from workbench.results.verdict import Verdict


class Status(str, enum.Enum):
    """Outcome of one check, ordered from good to bad by `severity`."""

    PASS = "pass"
    SKIP = "skip"  # the question does not apply here (e.g. NPU items on a CPU machine); `observed` says why
    WARN = "warn"  # works, but a known way to lose hours later
    FAIL = "fail"  # will not work as is; `fix` says what to change

    @property
    def severity(self) -> int:
        return {Status.PASS: 0, Status.SKIP: 1, Status.WARN: 2, Status.FAIL: 3}[self]

    @property
    def verdict(self) -> Verdict:
        """On the shared scale: a skipped check did not find a problem."""
        return {Status.FAIL: Verdict.ERROR, Status.WARN: Verdict.WARNING}.get(self, Verdict.PASS)


class Group(str, enum.Enum):
    """Which part of the stack a check looks at (the runner reports groups in this order)."""

    VERSIONS = "versions"
    MATRIX = "matrix"
    CANN = "cann"
    NPU_SMI = "npu-smi"
    FIRMWARE = "driver/firmware"
    DEVICE = "device"
    SHM = "shm"
    BUILD = "build"
    LOGGING = "logging"
    SERVING = "serving"


@dataclass(frozen=True)
class CheckResult:
    """One answered question. `name` is stable ("shm.size") so tests and checklists can refer to it."""

    name: str
    group: Group
    status: Status
    observed: str
    expected: str = ""
    fix: str = ""

    def as_row(self) -> dict[str, Any]:
        """Plain dict with enum values as strings (for pandas and JSON)."""
        row = asdict(self)
        row["group"] = self.group.value
        row["status"] = self.status.value
        return row


def passed(name: str, group: Group, observed: str, expected: str = "") -> CheckResult:
    return CheckResult(name, group, Status.PASS, observed, expected)


def skipped(name: str, group: Group, reason: str, expected: str = "") -> CheckResult:
    return CheckResult(name, group, Status.SKIP, reason, expected)


def warned(name: str, group: Group, observed: str, expected: str, fix: str) -> CheckResult:
    return CheckResult(name, group, Status.WARN, observed, expected, fix)


def failed(name: str, group: Group, observed: str, expected: str, fix: str) -> CheckResult:
    return CheckResult(name, group, Status.FAIL, observed, expected, fix)
