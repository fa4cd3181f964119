"""The evaluate API: what the `ascend-workbench` verb and the notebook call (see the package docstring)."""

from __future__ import annotations

from typing import Any

from workbench.evaluate.datasets import (
    Dataset,
    DatasetKind,
    Problem,
    calibration_set,
    calibration_texts,
    load_dataset,
)

__all__ = [
    "Any",
    "Dataset",
    "DatasetKind",
    "Problem",
    "annotations",
    "calibration_set",
    "calibration_texts",
    "load_dataset",
]
