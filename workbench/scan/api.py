"""The scan API: what `ascend-workbench scan` and notebook 00 call (one function per notebook cell).

report = scan_path("service/")                   # notebook 00: one directory or file
report = scan(paths, scan_options(jobs=0, ...))  # the verb: many paths, every option
write_json(report, "scan.json"); write_csv(report, "scan.csv"); print(summary(report))
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from workbench import settings
from workbench.errors import WorkbenchError
from workbench.scan.mapping import MappingRow, load_mapping
from workbench.scan.outputs import write_csv, write_json
from workbench.scan.report import SEVERITY_ORDER, ScanReport
from workbench.scan.runner import ScanOptions, scan
from workbench.scan.summary_text import render as summary
from workbench.scan.walker import DEFAULT_IGNORES, WalkOptions

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFAULT_IGNORES",
    "SEVERITY_ORDER",
    "ScanOptions",
    "ScanReport",
    "WalkOptions",
    "cuda_tie",
    "resolve_target",
    "scan",
    "scan_options",
    "scan_path",
    "severity_table",
    "summary",
    "write_csv",
    "write_json",
]


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


def scan_options(
    *,
    jobs: int = 0,
    ignore: tuple[str, ...] = (),
    default_ignores: bool = True,
    follow_symlinks: bool = True,
    max_file_mib: float = ScanOptions.max_file_mib,
    mapping: str | Path | None = None,
    progress: bool = True,
) -> ScanOptions:
    """Options of one scan; `default_ignores=False` also scans .git, caches and virtual environments."""
    if max_file_mib <= 0:
        raise WorkbenchError(f"--max-file-mb must be positive, got {max_file_mib}")
    walk = WalkOptions(
        ignore=(DEFAULT_IGNORES if default_ignores else ()) + tuple(ignore),
        skip_virtualenvs=default_ignores,
        follow_symlinks=follow_symlinks,
    )
    return ScanOptions(jobs=jobs, walk=walk, max_file_mib=max_file_mib, mapping=mapping, progress=progress)


def scan_path(path: str | Path | None, jobs: int = 0) -> ScanReport:
    """Scan one directory or file for notebook 00; see `workbench.scan.runner.scan`."""
    return scan([resolve_target(path)], ScanOptions(jobs=jobs))


def severity_table(report: ScanReport) -> pd.DataFrame:
    """Severity, what it means for the port, and how many findings have it (worst first)."""
    import pandas as pd

    counts = report.severity_counts()
    rows = [{"severity": s.value, "findings": counts[s.value], "meaning": s.meaning} for s in SEVERITY_ORDER]
    return pd.DataFrame(rows, columns=["severity", "findings", "meaning"])


def cuda_tie(kind: str, name: str, value: str | None = None) -> tuple[str, MappingRow] | None:
    """The scan rule and its Ascend meaning for one environment variable (`kind` "env") or vLLM option
    (`kind` "option", with its literal value), or None when the name does not tie a service to CUDA.

    The lint of a serving command asks this, so a CUDA-ism gets the same counterpart in both places.
    """
    from workbench.scan import catalog

    rule = catalog.env_rule(name) if kind == "env" else catalog.option_rule(name, value)
    if rule is None:
        return None
    return rule.value, load_mapping().rules[rule.value]
