"""The bisect API: what the `ascend-workbench` verb and the notebook call (see the package docstring)."""

from __future__ import annotations

from workbench.bisect.plan import FeaturePlan, FeatureSpec, compose, default_plan_for, load_plan
from workbench.bisect.runner import Bisect, StepRecord, Verdict, check_resumable, default_out_dir, recipe_fingerprint

__all__ = [
    "Bisect",
    "FeaturePlan",
    "FeatureSpec",
    "StepRecord",
    "Verdict",
    "check_resumable",
    "compose",
    "default_out_dir",
    "default_plan_for",
    "load_plan",
    "recipe_fingerprint",
]
