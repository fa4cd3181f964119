"""The backend API: what the backend sees on this machine — device, NPU status, op registry, NPU kernels,
one op against its reference — and which kernel each op runs on a stored stack.

Behind notebook 01 (each function returns a table or text, so the notebook stays one call per cell) and
`ascend-workbench kernels` (`context_of`, `side_context`, `with_serving`, `selection_table`, `kernel_diff`,
`kernel_diff_contexts`, `read_stack`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import torch

from ascend_backend.platform.device import detect, npu_status
from ascend_backend.registry import REGISTRY
from workbench.results.envelope import DocumentKind, write_result
from workbench.stack.devices import resolve_device
from workbench.stack.dtypes import parse_dtype
from workbench.stack.kernels import (
    context_of,
    kernel_diff,
    kernel_diff_contexts,
    read_stack,
    selection_table,
    side_context,
    with_serving,
)

KERNELS_KIND = DocumentKind("kernels")  # `kernels --json`: the selection table, or A/B kernel changes

__all__ = [
    "compare_op",
    "context_of",
    "device_table",
    "kernel_diff",
    "kernel_diff_contexts",
    "kernel_table",
    "npu_explanation",
    "read_stack",
    "registry_table",
    "selection_table",
    "side_context",
    "with_serving",
    "write_kernel_rows",
]


def device_table() -> pd.DataFrame:
    info = detect()
    gib = 1024**3

    def fmt(value: int | None) -> str:
        return "unknown" if value is None else f"{value / gib:.1f} GiB"

    rows = [
        ("device", info.kind.value),
        ("name", info.name),
        ("count", str(info.count)),
        ("memory total", fmt(info.total_memory)),
        ("memory free", fmt(info.free_memory)),
        ("torch", torch.__version__),
        ("NPU status", info.npu.kind.value),
        ("NPU detail", info.npu.detail),
        ("NPU fix", info.npu.fix or "-"),
    ]
    return pd.DataFrame(rows, columns=["item", "value"])


def npu_explanation() -> str:
    """A sentence on why the NPU tier is or is not in use, for the notebook's markdown output."""
    status = npu_status()
    if status.available:
        return f"The NPU is in use: {status.detail}. Ops with an NPU kernel run it; the rest run natively on the NPU."
    return (
        f"No NPU in use here: **{status.kind.value}** ({status.detail}). Every op runs its native PyTorch path, "
        f"which is also the accuracy reference. To use an NPU: {status.fix}."
    )


def registry_table(device: str = "auto") -> pd.DataFrame:
    return REGISTRY.describe(resolve_device(device))


def kernel_table(stack_file: str | None = None):
    """The NPU kernel per op and attention state on this machine (or a stored stack), with the table row,
    its vllm-ascend source and vllm-ascend's own default kernel where it has one; the caption says how the
    release, chip and graph mode were found."""
    stack = read_stack(stack_file) if stack_file else None
    table = selection_table(stack)[["op", "state", "kernel", "recipe", "vllm_default", "row", "source"]]
    return table.style.set_caption(context_of(stack).describe()).hide(axis="index")


def compare_op(
    op: str = "rms_norm",
    dtype: str = "bfloat16",
    shapes: Sequence[Sequence[int]] = ((4, 256),),
    device: str = "auto",
    seed: int = 0,
) -> pd.DataFrame:
    """The chosen implementation on `device` in `dtype` vs native float32 on CPU, one row per shape.

    Each shape is one op-suite case run by the suite's own case runner, so this table and notebook 04's
    report the same numbers for the same op, dtype and size (the reference sees the inputs rounded to
    `dtype`: it measures the op's arithmetic, not input rounding).
    """
    from workbench.accuracy.op_inputs import as_params
    from workbench.accuracy.opsuite import OpCase, run_case

    REGISTRY.entry(op)  # unknown op -> error listing the known ones
    target = resolve_device(device)
    cases = [OpCase(op, tuple(sorted(as_params(op, shape).items())), parse_dtype(dtype), seed) for shape in shapes]
    columns = [
        "op",
        "case",
        "dtype",
        "device",
        "implementation",
        "verdict",
        "cosine",
        "max_abs_err",
        "max_rel_err",
        "one_thousandth_ratio",
        "reason",
    ]
    return pd.DataFrame([run_case(case, target).row() for case in cases])[columns]


def write_kernel_rows(path: Path, records: list[dict]) -> Path:
    """`kernels --json`: the rows (selection table or kernel changes), stamped as a `kernels` document."""
    from workbench.stack.provenance import provenance

    return write_result(path, {"rows": records}, provenance(), KERNELS_KIND)
