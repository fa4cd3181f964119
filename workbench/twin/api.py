"""The twin API: what `ascend-workbench twin` and notebook 11 call.

a, b = make_sides([("recipe", "cpu-tiny")], load_serving_recipe, settings=["B:engine.tensor_parallel_size=2"])
result = run_twin(a, b, "text", num_prompts=8, settings=TwinSettings(max_tokens=16))   # resumable, saved
print(result.text()); result.prompt_table(); result.summary_table()
located = locate(result) if wants_locate(result) else None   # dumps at the diverging step -> module, op, repro
print(located.text())
"""

from __future__ import annotations

from workbench.twin.charts import cosine_by_kind_chart, divergence_chart
from workbench.twin.locate import LocateResult, locate, module_kind, wants_locate, worst_cosine_by_kind
from workbench.twin.policy import TwinThresholds, load_thresholds
from workbench.twin.run import TwinResult, TwinSettings, read_twin, run_twin
from workbench.twin.sides import Side, make_sides

__all__ = [
    "LocateResult",
    "Side",
    "TwinResult",
    "TwinSettings",
    "TwinThresholds",
    "cosine_by_kind_chart",
    "divergence_chart",
    "load_thresholds",
    "locate",
    "make_sides",
    "module_kind",
    "read_twin",
    "run_twin",
    "wants_locate",
    "worst_cosine_by_kind",
]
