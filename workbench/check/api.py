"""The pre-flight API: what `ascend-workbench check` and notebook 02 call.

report = run_checks(CheckContext.from_environment())
styled_table(report); fixes_table(report); styled_checklist(report); focused_logging("HCCL")
"""

from __future__ import annotations

from workbench.check.context import CheckContext
from workbench.check.logging_env import FocusedLogging, focused_logging
from workbench.check.report import (
    checklist_table,
    fixes_table,
    styled_checklist,
    styled_table,
    to_frame,
    to_html,
    to_text,
    write_html,
    write_json,
)
from workbench.check.result import CheckResult, Group, Status
from workbench.check.runner import Report, run_checks

__all__ = [
    "CheckContext",
    "CheckResult",
    "FocusedLogging",
    "Group",
    "Report",
    "Status",
    "checklist_table",
    "fixes_table",
    "focused_logging",
    "run_checks",
    "styled_checklist",
    "styled_table",
    "to_frame",
    "to_html",
    "to_text",
    "write_html",
    "write_json",
]
