"""A pre-flight `Report` as a pandas table, JSON, a coloured table, the fixes, the ten-minute
checklist, plain text for the terminal, and one standalone HTML page.

Pure functions of the report: the notebook shows their return values, the CLI writes them to files.
pandas is imported inside the functions that need it, so the CLI's text path stays quick.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.envcheck.result import CheckResult, Status
from workbench.envcheck.runner import Report
from workbench.results.envelope import DocumentKind, write_result

CHECK_KIND = DocumentKind("check")  # `check --json`: every pre-flight result

if TYPE_CHECKING:
    import pandas as pd
    from pandas.io.formats.style import Styler

COLUMNS = ("group", "name", "status", "observed", "expected", "fix")
STATUS_COLOURS = {  # background, text
    Status.PASS: ("#d1e7dd", "#0f5132"),
    Status.SKIP: ("#e2e3e5", "#41464b"),
    Status.WARN: ("#fff3cd", "#664d03"),
    Status.FAIL: ("#f8d7da", "#842029"),
}


def to_frame(report: Report) -> pd.DataFrame:
    """One row per check, columns group/name/status/observed/expected/fix, in run order."""
    import pandas as pd

    return pd.DataFrame([r.as_row() for r in report.results], columns=list(COLUMNS))


def to_dict(report: Report) -> dict[str, Any]:
    return {
        "started_at": report.started_at,
        "seconds": round(report.seconds, 3),
        "host": report.host,
        "ascend_root": report.ascend_root,
        "matrix_files": list(report.matrix_files),
        "summary": {s.value: report.count(s) for s in Status},
        "failed": report.failed,
        "results": [r.as_row() for r in report.results],
    }


def _status_css(value: str) -> str:
    background, colour = STATUS_COLOURS[Status(value)]
    return f"background-color: {background}; color: {colour}; font-weight: bold"


def styled_table(report: Report) -> Styler:
    """The results table with the status column coloured (pass green, skip grey, warn amber, fail red)."""
    return (
        to_frame(report)
        .style.format(escape="html")  # observed texts hold '<3.12' and paths: never raw HTML
        .map(_status_css, subset=["status"])
        .set_properties(**{"text-align": "left", "white-space": "pre-wrap"})
        .hide(axis="index")
    )


def fixes_table(report: Report) -> pd.DataFrame:
    """What to do, worst first: every fail and warn with its fix."""
    import pandas as pd

    todo = sorted(
        (r for r in report.results if r.status in (Status.FAIL, Status.WARN)), key=lambda r: -r.status.severity
    )
    return pd.DataFrame(
        [{"status": r.status.value, "name": r.name, "fix": r.fix} for r in todo], columns=["status", "name", "fix"]
    )


@dataclass(frozen=True)
class ChecklistStep:
    """One step of the ten-minute pre-flight (docs/METHOD.md §14) and the checks that answer it."""

    step: str
    command: str
    checks: tuple[str, ...]


TEN_MINUTE_CHECKLIST = (
    ChecklistStep(
        "1. cards visible, healthy, driver/firmware loaded",
        "npu-smi info",
        (
            "npu_smi.cards",
            "npu_smi.health",
            "npu_smi.memory",
            "firmware.driver_reboot",
            "firmware.firmware_reboot",
            "firmware.compatible",
        ),
    ),
    ChecklistStep(
        "2. CANN env sourced, /usr/local/Ascend versions",
        "source .../set_env.sh; cat .../ascend_toolkit_install.info",
        ("cann.toolkit", "cann.version", "cann.set_env", "cann.nnal_atb", "matrix.combination"),
    ),
    ChecklistStep(
        "3. torch_npu imports and the device initialises",
        "python -c 'import torch, torch_npu; torch_npu.npu.set_device(0)'",
        ("versions.torch_npu", "versions.torch_pair", "device.init_probe"),
    ),
    ChecklistStep("4. shared memory large enough", "df -h /dev/shm", ("shm.size",)),
    ChecklistStep("5. one small-model request", "curl <server>/v1/chat/completions", ("serving.one_request",)),
)


def _step_status(results: list[CheckResult]) -> Status:
    """fail beats warn beats pass; a step whose every check was skipped is skipped."""
    for status in (Status.FAIL, Status.WARN, Status.PASS):
        if any(r.status is status for r in results):
            return status
    return Status.SKIP


def checklist_table(report: Report) -> pd.DataFrame:
    """The ten-minute checklist (docs/METHOD.md §14), each step's status from the checks that answer it."""
    import pandas as pd

    rows = []
    known = {r.name: r for r in report.results}
    for step in TEN_MINUTE_CHECKLIST:
        results = [known[name] for name in step.checks if name in known]
        status = _step_status(results)
        worst = [r for r in results if r.status is status]
        evidence = "; ".join(f"{r.name}: {r.observed}" for r in worst[:2])
        rows.append({"step": step.step, "command": step.command, "status": status.value, "evidence": evidence})
    return pd.DataFrame(rows, columns=["step", "command", "status", "evidence"])


def styled_checklist(report: Report) -> Styler:
    return checklist_table(report).style.format(escape="html").map(_status_css, subset=["status"]).hide(axis="index")


def to_text(report: Report, width: int = 110) -> str:
    """Terminal output: one line per check, then the fixes, then the summary."""
    lines = []
    for r in report.results:
        line = f"{r.status.value.upper():5s} {r.name:28s} {r.observed}"
        lines.append(line if len(line) <= width else line[: width - 3] + "...")
    todo = [r for r in report.results if r.status in (Status.FAIL, Status.WARN)]
    if todo:
        lines += ["", "fixes:"]
        lines += [
            f"  {r.status.value.upper():5s} {r.name}: {r.fix}" for r in sorted(todo, key=lambda r: -r.status.severity)
        ]
    lines += ["", report.summary()]
    return "\n".join(lines)


def to_html(report: Report) -> str:
    """A standalone HTML page: summary, checklist, fixes and every result."""
    fixes = fixes_table(report)
    fixes_html = fixes.to_html(index=False, escape=True) if len(fixes) else "<p>Nothing to fix.</p>"
    title = f"Ascend pre-flight: {html.escape(report.host)}"
    return "\n".join(
        [
            "<!DOCTYPE html>",
            f"<html><head><meta charset='utf-8'><title>{title}</title>",
            "<style>body{font-family:sans-serif;margin:2em} table{border-collapse:collapse} "
            "td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top}</style></head><body>",
            f"<h1>{title}</h1>",
            f"<p>{html.escape(report.summary())}; started {html.escape(report.started_at)}; Ascend root "
            f"{html.escape(report.ascend_root)}</p>",
            "<h2>Ten-minute checklist</h2>",
            styled_checklist(report).to_html(),
            "<h2>Fixes</h2>",
            fixes_html,
            "<h2>All checks</h2>",
            styled_table(report).to_html(),
            "</body></html>",
        ]
    )


def write_json(report: Report, path: Path) -> Path:
    """`check --json`: the report, atomically, stamped as a `check` document.

    The report is itself a reading of the stack it checked (its root, host and every version), so its stamp
    says when and where only: the process-wide stack fingerprint is read from the default root and cached,
    and a check of another root (`--ascend-root`) must not be stamped with it, nor fill that cache."""
    stamp = {"created_at": report.started_at, "host": report.host, "ascend_root": str(report.ascend_root)}
    return write_result(Path(path), to_dict(report), stamp, CHECK_KIND)


def write_html(report: Report, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_html(report), encoding="utf-8")
    return path
