"""Tuning sweeps with diagnosis (docs/METHOD.md §10–§11: measure before tuning; parameters pull on each other).

    from workbench import sweep
    spec = sweep.load_sweep_spec("cpu-tiny")                 # recipes/sweeps/cpu-tiny.yaml, validated
    outcome = sweep.run_sweep(spec, Path("runs/sweeps/cpu-tiny"))   # resumable; one server per config
    report = sweep.build_report(spec, outcome.results)       # Pareto, best under SLO, sensitivity, diagnosis
    sweep.write_html(report, Path("runs/sweeps/cpu-tiny/report.html"))

Modules: spec (YAML schema, expansion into points with stable ids), store (atomic JSONL results),
runner (serial / parallel / Ray execution, the store's one writer), measure (server, warm-up, load,
/metrics, placement per point), parallel (device groups of this machine), ray_executor (Ray tasks
over a cluster), interference (side by side, --confirm-best), server_metrics (Prometheus scrape), fingerprint
(environment), reaper (no orphaned server after a SIGKILL), analysis, diagnosis, charts (pure
table -> figure), report (tables + HTML), adaptive (auto_tune-style search), widgets (notebook panels).
"""

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
