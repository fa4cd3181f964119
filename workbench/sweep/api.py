"""The sweep API: what `ascend-workbench sweep` and notebook 07 call.

spec = load_sweep_spec("cpu-tiny")                       # recipes/sweeps/cpu-tiny.yaml, validated
outcome = run_sweep(spec, output_dir(spec))              # resumable; one server per configuration
report = build_report(spec, outcome.results)             # Pareto, best under SLO, sensitivity, diagnosis
write_html(report, output_dir(spec) / "report.html")
"""

from __future__ import annotations

from pathlib import Path

from workbench.settings import run_dir
from workbench.sweep.adaptive import AdaptiveOutcome, run_adaptive
from workbench.sweep.analysis import (
    aggregate_repeats,
    best_under_slo,
    overhead_table,
    pareto_front,
    sensitivity,
    slo_mask,
)
from workbench.sweep.diagnosis import Bottleneck, Thresholds, diagnose
from workbench.sweep.interference import confirm_path
from workbench.sweep.report import SweepReport, build_report, plan_frame, write_html
from workbench.sweep.runner import ConfirmOutcome, Execution, SweepOutcome, confirm_best, run_sweep
from workbench.sweep.spec import SweepSpec, expand, list_sweep_specs, load_base_recipe, load_sweep_spec
from workbench.sweep.store import PointResult, PointStatus, ResultStore

__all__ = [
    "AdaptiveOutcome",
    "Bottleneck",
    "ConfirmOutcome",
    "Execution",
    "PointResult",
    "PointStatus",
    "ResultStore",
    "SweepOutcome",
    "SweepReport",
    "SweepSpec",
    "Thresholds",
    "aggregate_repeats",
    "best_under_slo",
    "build_report",
    "confirm_best",
    "confirm_path",
    "diagnose",
    "expand",
    "load_base_recipe",
    "list_sweep_specs",
    "load_sweep_spec",
    "output_dir",
    "overhead_table",
    "pareto_front",
    "plan_frame",
    "run_adaptive",
    "run_sweep",
    "sensitivity",
    "slo_mask",
    "write_html",
]


def output_dir(spec: SweepSpec, out_dir: str | Path = "", resume: bool = True) -> Path:
    """Where a sweep writes: `out_dir` if given, else runs/sweeps/<name>; runs/sweeps/<name>-<stamp> if not resuming.

    Resuming (the default) means re-running the notebook reads the points already measured instead of
    measuring them again.
    """
    if out_dir:
        return Path(out_dir)
    return run_dir("sweeps", spec.name, fresh=not resume)
