"""The sweep API: what the `ascend-workbench` verb and the notebook call (see the package docstring)."""

from __future__ import annotations

from workbench.sweep.adaptive import AdaptiveOutcome, run_adaptive
from workbench.sweep.analysis import aggregate_repeats, best_under_slo, pareto_front, sensitivity, slo_mask
from workbench.sweep.diagnosis import Bottleneck, Thresholds, diagnose
from workbench.sweep.report import SweepReport, build_report, write_html
from workbench.sweep.runner import ConfirmOutcome, Execution, SweepOutcome, confirm_best, run_sweep
from workbench.sweep.spec import SweepSpec, expand, list_sweep_specs, load_sweep_spec
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
    "diagnose",
    "expand",
    "list_sweep_specs",
    "load_sweep_spec",
    "pareto_front",
    "run_adaptive",
    "run_sweep",
    "sensitivity",
    "slo_mask",
    "write_html",
]
