"""What notebook 00 calls: one function per cell, so the notebook stays free of logic."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from workbench import settings
from workbench.errors import WorkbenchError
from workbench.scan.report import SEVERITY_ORDER, ScanReport
from workbench.scan.runner import ScanOptions, scan

if TYPE_CHECKING:
    import pandas as pd

SAMPLE_SERVICE = Path("tests") / "fixtures" / "scan_service"


def resolve_target(path: str | Path | None) -> Path:
    """The path to scan: as given when it exists; a relative path that does not exist from the working
    directory is tried from the repository root (notebooks run from notebooks/ or from the root);
    None is the sample service shipped with the workbench."""
    if path is None:
        path = SAMPLE_SERVICE
    candidate = Path(path).expanduser()
    if candidate.exists() or candidate.is_absolute():
        return candidate
    from_root = settings.REPO_ROOT / candidate
    if from_root.exists():
        return from_root
    raise WorkbenchError(
        f"path {str(path)!r} does not exist (nor under {settings.REPO_ROOT}); set `path` to the service"
    )


def scan_path(path: str | Path | None, jobs: int = 0) -> ScanReport:
    """Scan one directory or file for notebook 00; see `workbench.scan.runner.scan`."""
    return scan([resolve_target(path)], ScanOptions(jobs=jobs))


def severity_table(report: ScanReport) -> pd.DataFrame:
    """Severity, what it means for the port, and how many findings have it (worst first)."""
    import pandas as pd

    counts = report.severity_counts()
    rows = [{"severity": s.value, "findings": counts[s.value], "meaning": s.meaning} for s in SEVERITY_ORDER]
    return pd.DataFrame(rows, columns=["severity", "findings", "meaning"])
