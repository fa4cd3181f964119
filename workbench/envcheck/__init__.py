"""Environment pre-flight: is this machine ready to serve vLLM on Ascend, and if not, what to change.

    from workbench import envcheck
    report = envcheck.run_checks(envcheck.CheckContext.from_environment())
    envcheck.styled_table(report)      # coloured table;  envcheck.fixes_table(report) for what to do

One module per group of checks (versions, compat/matrix, cann, npu_smi, firmware, probe, shm,
buildtools, logging_env, serving); `runner` gathers the facts once and runs them; `report` renders.
"""

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
