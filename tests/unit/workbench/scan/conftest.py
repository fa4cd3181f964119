"""Helpers for the scan tests: scan a snippet written to a temporary file, without worker processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.scan.runner import ScanOptions, scan


@pytest.fixture
def scan_snippet(tmp_path):
    """scan_snippet(name, content) -> ScanReport of one file holding `content` (str or bytes)."""
    counter = iter(range(1_000_000))

    def run(name: str, content: str | bytes):
        directory = tmp_path / f"case{next(counter)}"
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return scan([directory], ScanOptions(jobs=1))

    return run


def rules_of(report) -> set[str]:
    return {f.rule for f in report.findings}


def lines_of(report, rule: str) -> list[int | None]:
    return [f.line for f in report.findings if f.rule == rule]


def relative(report, root: Path) -> set[tuple[str, int | None, str]]:
    return {(str(Path(f.file).relative_to(root)), f.line, f.rule) for f in report.findings}
