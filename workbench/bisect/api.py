"""The bisect API: what `ascend-workbench bisect` and notebook 06 call.

plan = load_plan(default_plan_for(recipe))         # recipes/features/<target>.yaml
verdict = Bisect(recipe, plan, out).run()          # baseline, alone, cumulative, pairs; resumable
verdict_table(verdict); steps_table(verdict.records); timeline(verdict.records)
"""

from __future__ import annotations

from workbench.bisect.plan import FeaturePlan, FeatureSpec, compose, default_plan_for, load_plan
from workbench.bisect.report import steps_table, timeline, verdict_table
from workbench.bisect.runner import (
    Bisect,
    BisectOutcome,
    BisectStatus,
    StepRecord,
    check_resumable,
    default_out_dir,
    probe_with_server,
    recipe_fingerprint,
)

__all__ = [
    "Bisect",
    "FeaturePlan",
    "FeatureSpec",
    "StepRecord",
    "BisectOutcome",
    "BisectStatus",
    "check_resumable",
    "compose",
    "default_out_dir",
    "default_plan_for",
    "load_plan",
    "probe_with_server",
    "recipe_fingerprint",
    "steps_table",
    "timeline",
    "verdict_table",
]
