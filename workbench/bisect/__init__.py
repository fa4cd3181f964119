"""Feature-by-feature enabling: find the feature that breaks a vLLM server, automatically.

plan      feature plans (recipes/features/*.yaml) and how features compose into a serving recipe
outputs   greedy outputs with logprobs, and the comparison that catches "runs but answers wrong"
runner    baseline -> alone -> cumulative -> pairs, resumable, each step saved as it finishes
report    tables and charts of a bisect
"""

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
