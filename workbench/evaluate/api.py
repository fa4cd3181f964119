"""The evaluate API: what `ascend-workbench evaluate` and notebook 10 call.

with connect(recipe=load_serving_recipe("cpu-smollm2")) as server:
    float_dir = evaluate(server, ["humaneval", "text"], "runs/eval/float", limit=20)
...                                                      # the same for the W8A8 server -> w8a8_dir
comparison = compare_runs(float_dir, w8a8_dir); print(comparison.text()); comparison.table()
"""

from __future__ import annotations

from workbench.evaluate.charts import comparison_figure
from workbench.evaluate.datasets import calibration_texts, load_dataset
from workbench.evaluate.execution import Limits
from workbench.evaluate.report import compare_runs, read_run, summarize_run, summary_table, write_summary
from workbench.evaluate.request import EvaluateRequest, EvaluateResult, run_evaluate
from workbench.evaluate.runner import Measure, Settings, default_out_dir, evaluate, evaluate_target, target_for
from workbench.evaluate.thresholds import load_thresholds

__all__ = [
    "EvaluateRequest",
    "EvaluateResult",
    "run_evaluate",
    "Limits",
    "Measure",
    "Settings",
    "calibration_texts",
    "compare_runs",
    "comparison_figure",
    "default_out_dir",
    "evaluate",
    "evaluate_target",
    "load_dataset",
    "load_thresholds",
    "read_run",
    "summarize_run",
    "summary_table",
    "target_for",
    "write_summary",
]
