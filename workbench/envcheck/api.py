"""The envcheck API: what the `ascend-workbench` verb and the notebook call (see the package docstring)."""

from __future__ import annotations

from workbench.envcheck.context import CheckContext
from workbench.envcheck.logging_env import FocusedLogging, focused_logging
from workbench.envcheck.report import (
    checklist_table,
    fixes_table,
    styled_checklist,
    styled_table,
    to_frame,
    to_html,
    to_json,
    to_text,
    write_html,
    write_json,
)
from workbench.envcheck.result import CheckResult, Group, Status
from workbench.envcheck.runner import Report, run_checks

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
    "to_json",
    "to_text",
    "write_html",
    "write_json",
]
