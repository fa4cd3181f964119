"""The performance twin's thresholds: policy data (`policy/twin/perf.yaml`), read through the one recipe reader."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from workbench.recipes import Frozen, load_recipe_file, resolve_recipe_path
from workbench.twin.policy import thresholds_dir

DEFAULT_PERF_THRESHOLDS = "perf"


class PerfThresholds(Frozen):
    """See the comments of policy/twin/perf.yaml."""

    name: str
    description: str = ""
    confidence: float = Field(0.95, gt=0.5, lt=1.0)
    min_effect: float = Field(0.05, ge=0.0, lt=1.0)
    cause_share: float = Field(0.5, gt=0.0, le=1.0)
    kernel_share: float = Field(0.05, gt=0.0, lt=1.0)
    slower_ratio: float = Field(0.1, gt=0.0)
    calls_ratio: float = Field(0.05, gt=0.0)
    outlier_step: float = Field(3.0, gt=1.0)
    max_others_cpu: float = Field(0.3, gt=0.0, le=1.0)
    window_attempts: int = Field(2, ge=1)
    source: Path | None = Field(None, exclude=True)


def load_perf_thresholds(name_or_path: str | Path | None = None) -> PerfThresholds:
    """The shipped `policy/twin/perf.yaml`, another shipped name, or a file of your own."""
    chosen = name_or_path or DEFAULT_PERF_THRESHOLDS
    path = resolve_recipe_path(thresholds_dir(), chosen, "performance twin thresholds file")
    return load_recipe_file(PerfThresholds, path, what="performance twin thresholds file", name_from_file=True)


__all__ = ["PerfThresholds", "load_perf_thresholds"]
