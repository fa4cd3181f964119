"""The replay verdict's thresholds: policy data (`policy/replay/thresholds.yaml`), read through the one recipe reader.

How close a replayed answer must be to the recorded one to count as the same (tie tolerance of a greedy
divergence; the per-token likelihood tolerances of a sampled answer judged as a distribution), how many
requests of each parity class a port may show before the verdict says warning or error, and the latency
objectives and bootstrap settings of the latency comparison. Bands and their judging are the evaluate
thresholds' own (`workbench.evaluate.thresholds`); the verdict scale is the workbench's one.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from workbench.evaluate.thresholds import Band
from workbench.recipes import Frozen, load_recipe_file, resolve_recipe_path
from workbench.settings import policy_dir

DEFAULT_THRESHOLDS = "thresholds"


class LatencyPolicy(Frozen):
    """Objectives (ms; None = not part of it), the quantiles compared, and the bootstrap of their ratios."""

    ttft_ms: float | None = Field(None, gt=0)
    tpot_ms: float | None = Field(None, gt=0)
    e2el_ms: float | None = Field(None, gt=0)
    quantiles: tuple[float, ...] = (50.0, 90.0, 99.0)
    bootstrap_resamples: int = Field(1000, ge=100)
    confidence: float = Field(0.95, gt=0.5, lt=1.0)
    seed: int = 0
    min_requests: int = Field(10, ge=2)  # a class with fewer requests measured on both sides is shown, not judged
    slower_ratio: Band = Band(warning=1.1, error=1.5)  # replayed / recorded quantile, judged on its CI's low end
    attainment_drop: Band = Band(warning=0.02, error=0.1)  # fall of the share meeting every objective


class ReplayThresholds(Frozen):
    name: str
    description: str = ""
    tie_tolerance_nats: float = Field(0.05, ge=0.0)
    drift_tolerance_nats: float = Field(0.01, ge=0.0)
    distribution_tolerance_nats: float = Field(0.05, ge=0.0)
    noise_factor: float = Field(3.0, ge=1.0)
    different_share: Band = Band(warning=0.0, error=0.01)
    broken_share: Band = Band(error=0.0)
    latency: LatencyPolicy = LatencyPolicy()
    source: Path | None = Field(None, exclude=True)


def thresholds_dir() -> Path:
    return policy_dir() / "replay"


def load_thresholds(name_or_path: str | Path | None = None) -> ReplayThresholds:
    """The shipped `policy/replay/thresholds.yaml`, another shipped name, or a file of your own."""
    path = resolve_recipe_path(thresholds_dir(), name_or_path or DEFAULT_THRESHOLDS, "replay thresholds file")
    return load_recipe_file(ReplayThresholds, path, what="replay thresholds file", name_from_file=True)


__all__ = ["LatencyPolicy", "ReplayThresholds", "load_thresholds"]
