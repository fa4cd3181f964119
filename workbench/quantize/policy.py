"""The autopilot's judging policy: `policy/quantize/autopilot.yaml`, read through the one recipe reader."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from workbench.recipes import Frozen, load_recipe_file, resolve_recipe_path
from workbench.settings import policy_dir

DEFAULT_POLICY = "autopilot"


class AutopilotPolicy(Frozen):
    """See the policy file's comments for what each field means."""

    name: str
    description: str = ""
    noise_fraction: float = Field(0.25, gt=0.0, le=1.0)
    bootstrap_samples: int = Field(2000, ge=100)
    confidence: float = Field(0.95, gt=0.5, lt=1.0)
    max_float_fraction: float = Field(0.5, gt=0.0, le=1.0)
    source: Path | None = Field(None, exclude=True)


def load_policy(name_or_path: str | Path | None = None) -> AutopilotPolicy:
    """The shipped `policy/quantize/autopilot.yaml`, or a file of your own (`--policy`)."""
    path = resolve_recipe_path(policy_dir() / "quantize", name_or_path or DEFAULT_POLICY, "autopilot policy file")
    return load_recipe_file(AutopilotPolicy, path, what="autopilot policy file", required="noise_fraction")
