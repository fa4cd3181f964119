"""What in a service's code ties it to CUDA, and what replaces each tie on Ascend (docs/METHOD.md §1).

The first step of a porting session (notebook 00, `ascend-workbench scan PATH...`): static analysis
that never imports or runs the scanned code.

    walker        which files: ignores (.git, caches, virtual environments; overridable), symlink loops
    file_kinds    which rules a file gets, by name (and #! line)
    python_rules  Python by AST: torch.cuda and aliases, .cuda(), device strings, amp, backends, graphs,
                  NCCL, extensions, Triton, CUDA-only libraries, FP8, vLLM options and env vars
    python_values local constant propagation for device/backend/module strings ("unresolved" if built
                  at run time from parts the AST cannot see)
    text_rules    shell, YAML/JSON/TOML, requirements and lock files, Dockerfiles, CMake, C/C++, .cu
    catalog       the names, packages, env vars and values the rules recognise
    file_scan     one file -> hits and problems (syntax errors, binary, undecodable, unreadable, too large)
    runner        the scan, parallel over files -> ScanReport
    mapping       rule -> counterpart, severity, verify step, citations (recipes/scan/cuda-mapping.yaml)
    report        counts by category, severity, file and rule; pandas tables
    outputs       JSON and CSV, atomic, with provenance;  summary_text: the terminal summary
    charts        plotly figures;  notebook: what notebook 00 calls

Submodules load on first use (`scan.charts`, `scan.outputs`, ...), so worker processes and the CLI
import only what they need.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "scan": "workbench.scan.runner",
    "ScanOptions": "workbench.scan.runner",
    "ScanReport": "workbench.scan.report",
    "WalkOptions": "workbench.scan.walker",
    "DEFAULT_IGNORES": "workbench.scan.walker",
    "load_mapping": "workbench.scan.mapping",
    "Finding": "workbench.scan.findings",
    "ScanProblem": "workbench.scan.findings",
    "Severity": "workbench.scan.findings",
    "Category": "workbench.scan.findings",
    "Rule": "workbench.scan.rule_ids",
}
_SUBMODULES = frozenset(
    {"catalog", "charts", "file_kinds", "file_scan", "findings", "mapping", "notebook", "outputs", "python_rules",
     "python_values", "report", "rule_ids", "runner", "summary_text", "text_rules", "walker"}
)  # fmt: skip

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"workbench.scan.{name}")
    raise AttributeError(f"module 'workbench.scan' has no attribute {name!r}")
