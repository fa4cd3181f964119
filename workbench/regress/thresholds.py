"""The regression thresholds: policy data (`policy/regress/*.yaml`) read through the one recipe reader.

Which metrics `regress` compares, which direction is better for each, and the relative change that
counts (default 5%). The noise rule that uses them is in `workbench.regress.compare`.
"""

from __future__ import annotations

import difflib
import enum
from pathlib import Path

from pydantic import Field, field_validator

from workbench.recipes import Frozen, load_recipe_file, resolve_recipe_path
from workbench.settings import policy_dir

DEFAULT_THRESHOLDS = "thresholds"


class Better(str, enum.Enum):
    HIGHER = "higher"  # throughput
    LOWER = "lower"  # latency


class MetricRule(Frozen):
    """One compared metric. `threshold` None = the file's default_threshold."""

    better: Better
    threshold: float | None = Field(None, gt=0, lt=1)
    label: str = ""


def load_metric_names() -> tuple[str, ...]:
    """Every metric a bench JSON / sweep point summary carries ('output_throughput', 'p99_ttft_ms', ...),
    from the load generator's own definitions."""
    from dataclasses import fields

    from workbench.serving.load.metrics import PERCENTILES, LoadSummary

    stats = ("mean", "median", "std", *(f"p{p:g}" for p in PERCENTILES))
    scalars = tuple(f.name for f in fields(LoadSummary) if not f.name.endswith("_ms"))
    return scalars + tuple(f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for s in stats)


class Thresholds(Frozen):
    """A thresholds file. `min_repeats`: runs needed on each side before the spread can be judged."""

    name: str
    description: str = ""
    default_threshold: float = Field(0.05, gt=0, lt=1)
    min_repeats: int = Field(2, ge=2)
    metrics: dict[str, MetricRule] = Field(min_length=1)
    source: Path | None = Field(None, exclude=True)

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: dict[str, MetricRule]) -> dict[str, MetricRule]:
        known = load_metric_names()
        for name in value:
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(known)}"
                raise ValueError(f"unknown metric {name!r}; {hint}")
        return value

    def threshold(self, metric: str) -> float:
        rule = self.metrics[metric]
        return rule.threshold if rule.threshold is not None else self.default_threshold

    def label(self, metric: str) -> str:
        return self.metrics[metric].label or metric


def thresholds_dir() -> Path:
    return policy_dir() / "regress"


def load_thresholds(name_or_path: str | Path | None = None) -> Thresholds:
    """The shipped `policy/regress/thresholds.yaml`, another shipped name, or a file of your own."""
    path = resolve_recipe_path(thresholds_dir(), name_or_path or DEFAULT_THRESHOLDS, "thresholds file")
    return load_recipe_file(Thresholds, path, what="thresholds file", required="'metrics'", name_from_file=True)
