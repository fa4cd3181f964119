"""The scan summary as plain text for the terminal: headline, by severity, by category, by rule (with
the counterpart and the verify step), by file, and what could not be scanned."""

from __future__ import annotations

from typing import Any

from workbench.scan.report import SEVERITY_ORDER, ScanReport

_SEVERITIES = [s.value for s in SEVERITY_ORDER]


def _table(rows: list[dict[str, Any]], columns: list[str], widths: dict[str, int] | None = None) -> list[str]:
    """Left-aligned text columns; `widths` caps a column (long text is cut with an ellipsis)."""
    widths = widths or {}

    def cell(row: dict[str, Any], column: str) -> str:
        text = str(row.get(column, ""))
        cap = widths.get(column)
        return text if cap is None or len(text) <= cap else text[: cap - 1] + "…"

    cells = [[cell(r, c) for c in columns] for r in rows]
    sizes = [max([len(c)] + [len(line[i]) for line in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, sizes)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(line, sizes)).rstrip() for line in cells]
    return ["  " + line for line in lines]


def render(report: ScanReport, files: int = 20, list_findings: bool = False) -> str:
    """The grouped summary; `files` caps the by-file table (0: all); `list_findings` adds every finding."""
    lines = [report.headline(), ""]
    lines += ["Severity (docs/METHOD.md §1):"]
    lines += [f"  {s.value:<8} {report.severity_counts()[s.value]:>6}  {s.meaning}" for s in SEVERITY_ORDER]
    if report.findings:
        lines += ["", "By where it runs (the engine container first; docs/METHOD.md §1):"]
        lines += _table(report.tier_counts(), ["tier", "findings", "files", *_SEVERITIES])
        lines += ["", "By category:", *_table(report.category_counts(), ["category", "findings", *_SEVERITIES])]
        lines += ["", "By rule (counterpart on Ascend, and the step that verifies it):"]
        lines += _table(
            report.rule_counts(),
            ["rule", "severity", "findings", "files", "counterpart", "verify"],
            {"counterpart": 70, "verify": 60},
        )
        shown = report.file_counts() if files == 0 else report.file_counts()[:files]
        lines += ["", f"By file ({len(shown)} of {len(report.file_counts())}, most work first):"]
        lines += _table(shown, ["tier", "file", "findings", *_SEVERITIES, "categories"], {"categories": 60})
    if list_findings:
        lines += ["", "Findings:"]
        for f in report.findings:
            where = f"{f.file}:{f.line}" if f.line is not None else f.file
            lines.append(
                f"  {f.tier:<10} {where}  [{f.severity.value}] {f.rule}  {f.excerpt}"
                + (f"  ({f.detail})" if f.detail else "")
            )
    if report.problems:
        lines += ["", f"Scan problems ({len(report.problems)}; these files were not, or not fully, scanned):"]
        lines += [
            f"  {p.kind.value:<15} {p.path}" + (f":{p.line}" if p.line else "") + f"  {p.message}"
            for p in report.problems[:20]
        ]
        if len(report.problems) > 20:
            lines.append(f"  ... and {len(report.problems) - 20} more (all of them are in the JSON file)")
    if report.skipped:
        lines += ["", "Not scanned: " + "; ".join(f"{n} {reason}" for reason, n in report.skipped)]
        named = [(f, r) for f, r in report.not_scanned if not r.startswith("ignored directory")]
        lines += [f"  {f}  ({r})" for f, r in named[:20]]
        if len(named) > 20:
            lines.append(f"  ... and {len(named) - 20} more (all of them are in the JSON file)")
    return "\n".join(lines)
