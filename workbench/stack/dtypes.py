"""Dtype names as users type them ('bf16', 'float16', 'fp32') -> torch dtypes, with a clear error."""

from __future__ import annotations

import torch

from workbench.errors import WorkbenchError

_ALIASES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float": torch.float32,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float64": torch.float64,
    "fp64": torch.float64,
}


def parse_dtype(name: str | torch.dtype) -> torch.dtype:
    if isinstance(name, torch.dtype):
        return name
    key = str(name).strip().lower().removeprefix("torch.")
    if key not in _ALIASES:
        raise WorkbenchError(f"unknown dtype {name!r}; use one of float32, float16, bfloat16 (or fp32, fp16, bf16)")
    return _ALIASES[key]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
