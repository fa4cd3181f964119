"""The twin verdict's thresholds: policy data (`policy/twin/thresholds.yaml`), read through the one recipe reader.

How far two configurations of the same model may answer the same greedy requests apart before the
verdict says warning or error (the workbench's one verdict scale), and the tie tolerance under which a
diverging token is a legitimate near tie. Limits are raised to `noise_factor` times what side A measured
against its own repeat, so a divergence is always judged against the configuration's run-to-run noise.
Bands and their judging are the evaluate thresholds' own (`workbench.evaluate.thresholds`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from workbench.evaluate.thresholds import Band
from workbench.recipes import Frozen, load_recipe_file, resolve_recipe_path
from workbench.settings import policy_dir

DEFAULT_THRESHOLDS = "thresholds"


class TwinThresholds(Frozen):
    name: str
    description: str = ""
    tie_tolerance_nats: float = Field(0.02, ge=0.0)
    diverged_share: Band = Band(error=0.0)
    near_tie_share: Band = Band(warning=0.25)
    logprob_drift_nats: Band = Band(warning=0.01, error=0.1)
    noise_factor: float = Field(3.0, ge=1.0)
    source: Path | None = Field(None, exclude=True)


def thresholds_dir() -> Path:
    return policy_dir() / "twin"


def load_thresholds(name_or_path: str | Path | None = None) -> TwinThresholds:
    """The shipped `policy/twin/thresholds.yaml`, another shipped name, or a file of your own."""
    path = resolve_recipe_path(thresholds_dir(), name_or_path or DEFAULT_THRESHOLDS, "twin thresholds file")
    return load_recipe_file(TwinThresholds, path, what="twin thresholds file", name_from_file=True)
