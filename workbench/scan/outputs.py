"""The scan's result files: JSON (everything) and CSV (one row per finding), each written atomically
(a temporary file in the same directory, then a rename) and stamped with `workbench.stack.provenance`.

JSON: {"provenance": ..., "scan": {paths, jobs, mapping, complete}, "summary": ..., "findings": [...],
"problems": [...]}. CSV: the first line is `# provenance: {json}`, then a header and the findings;
`read_findings_csv` reads both parts back.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.results.files import write_text
from workbench.scan.report import FINDING_COLUMNS, ScanReport
from workbench.stack.provenance import provenance

CSV_PROVENANCE_PREFIX = "# provenance: "


def _write(path: Path, text: str) -> Path:
    try:
        return write_text(path, text, newline="")
    except OSError as exc:
        raise WorkbenchError(f"{path}: cannot write the scan result ({exc.strerror}); choose another path") from None


def report_payload(report: ScanReport) -> dict[str, Any]:
    """The JSON document for a report."""
    return {
        "provenance": provenance(),
        "scan": {
            "paths": list(report.paths),
            "jobs": report.jobs,
            "mapping": report.mapping,
            "complete": report.complete,
        },
        "summary": report.summary(),
        "findings": [f.as_row() for f in report.findings],
        "problems": [p.as_row() for p in report.problems],
    }


def write_json(report: ScanReport, path: str | Path) -> Path:
    return _write(Path(path), json.dumps(report_payload(report), indent=1, ensure_ascii=False) + "\n")


def write_csv(report: ScanReport, path: str | Path) -> Path:
    buffer = io.StringIO()
    buffer.write(CSV_PROVENANCE_PREFIX + json.dumps(provenance(), ensure_ascii=False) + "\n")
    writer = csv.DictWriter(buffer, fieldnames=FINDING_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for finding in report.findings:
        writer.writerow({k: "" if v is None else v for k, v in finding.as_row().items()})
    return _write(Path(path), buffer.getvalue())


def read_findings_csv(path: str | Path) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """(provenance, rows) of a CSV written by `write_csv`."""
    with open(path, encoding="utf-8", newline="") as handle:
        first = handle.readline()
        if not first.startswith(CSV_PROVENANCE_PREFIX):
            raise WorkbenchError(f"{path}: not a scan CSV (no '{CSV_PROVENANCE_PREFIX.strip()}' first line)")
        return json.loads(first[len(CSV_PROVENANCE_PREFIX) :]), list(csv.DictReader(handle))
