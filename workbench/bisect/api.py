"""The bisect API: what `ascend-workbench bisect` and notebook 06 call.

request = BisectRequest.load(recipe, only=("ascend_backend_plugin",))   # recipes/features/<target>.yaml
outcome = run_bisect(request)          # baseline, alone, cumulative, pairs; resumable
verdict_table(outcome); steps_table(outcome.records); timeline(outcome.records)
"""

from __future__ import annotations

from workbench.bisect.plan import FeaturePlan, FeatureSpec, compose
from workbench.bisect.report import steps_table, timeline, verdict_table
from workbench.bisect.request import BisectRequest, run_bisect
from workbench.bisect.runner import BisectOutcome, BisectStatus, StepRecord

__all__ = [
    "BisectOutcome",
    "BisectRequest",
    "BisectStatus",
    "FeaturePlan",
    "FeatureSpec",
    "StepRecord",
    "compose",
    "run_bisect",
    "steps_table",
    "timeline",
    "verdict_table",
]
