"""Run one self-test item: the pinned recipe on the device vs the native float32 reference on the CPU.

The comparison is the op suite's (`workbench.accuracy.metrics.compare_tensors`, msprobe's numbers and
verdict) on the op suite's input handling (`OpInputs`: floats rounded to the dtype under test, host
lengths kept on the host, in-place outputs read back). What this adds per item: the recipe pinned through
ASCEND_BACKEND_KERNELS for the call, the guard asked first (a call it sends native says why), the backend
that really ran read from the registry's counters, the kernel's time (device synchronised around it), and
the CANN error code out of an exception's text.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from ascend_backend.platform.device import kind_of, synchronize
from ascend_backend.platform.kernels import OVERRIDE_VAR, SelectionContext
from ascend_backend.registry import REGISTRY, Backend
from workbench.accuracy.metrics import compare_tensors
from workbench.accuracy.op_inputs import OpInputs
from workbench.results.verdict import Verdict
from workbench.selftest.cases import item_inputs
from workbench.selftest.plan import KernelItem
from workbench.stack.dtypes import dtype_name

# aclnn's "error code is 161002", CANN's "EZ1001" / "EE9999", torch_npu's "ERR00100".
_ERROR_CODES = re.compile(r"error code (?:is )?(\d{5,6})|\b(E[A-Z0-9]\d{4}|ERR\d{5})\b")


def error_code(text: str) -> str | None:
    """The first CANN / aclnn / torch_npu error code in an exception's text, else None."""
    match = _ERROR_CODES.search(text)
    return next((g for g in match.groups() if g), None) if match else None


@dataclass(frozen=True)
class DtypeRun:
    """One dtype of one item: which backend ran, the msprobe numbers against float32, the time or the error."""

    dtype: str
    backend: str  # npu | native | "" (raised before a backend ran)
    verdict: str
    cosine: float
    max_abs_err: float
    max_rel_err: float
    one_thousandth_ratio: float
    seconds: float
    reason: str = ""  # why the guard sent the call native
    error: str = ""
    error_code: str | None = None


@contextlib.contextmanager
def pinned(value: str) -> Iterator[None]:
    """ASCEND_BACKEND_KERNELS=value for the block (the selection reads it per call), then as it was."""
    saved = os.environ.get(OVERRIDE_VAR)
    os.environ[OVERRIDE_VAR] = value
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(OVERRIDE_VAR, None)
        else:
            os.environ[OVERRIDE_VAR] = saved


def _backend_delta(op: str, before: dict[str, dict[str, int]]) -> str:
    after = REGISTRY.stats().get(op, {})
    grown = [b for b, n in after.items() if b != "faulted" and n > before.get(op, {}).get(b, 0)]
    return ",".join(sorted(grown))


def _timed_call(op: str, args: tuple, device: torch.device) -> tuple[list[torch.Tensor] | object, float]:
    kind = kind_of(device)
    synchronize(kind)
    started = time.perf_counter()
    returned = REGISTRY.dispatch(op, device, *args)
    synchronize(kind)
    return returned, time.perf_counter() - started


def run_dtype(op: str, inputs: OpInputs, device: torch.device, dtype: torch.dtype) -> DtypeRun:
    """`op` on `device` in `dtype` against the native float32 reference on the CPU, for one set of inputs."""
    rounded = inputs.to("cpu", dtype).to("cpu", torch.float32)
    reference = rounded.outputs(REGISTRY.impl(op, Backend.NATIVE)(*rounded.args))
    on_device = inputs.to(device, dtype)
    guard = REGISTRY.entry(op).supports.get(Backend.NPU)
    reason = guard(*on_device.args) if guard is not None and kind_of(device).value == "npu" else None
    before = REGISTRY.stats()
    name = dtype_name(dtype)
    try:
        returned, seconds = _timed_call(op, on_device.args, device)
    except Exception as exc:  # noqa: BLE001 - a kernel that raises is the finding the report is for
        text = f"{type(exc).__name__}: {exc}"
        nan = float("nan")
        return DtypeRun(name, "", Verdict.ERROR.value, nan, nan, nan, nan, 0.0, reason or "", text, error_code(text))
    test = on_device.outputs(returned)
    comparisons = [compare_tensors(t.cpu(), r) for t, r in zip(test, reference)]
    return DtypeRun(
        name,
        _backend_delta(op, before),
        Verdict.worst(c.verdict for c in comparisons).value,
        min(c.cosine for c in comparisons),
        max(c.max_abs_err for c in comparisons),
        max(c.max_rel_err for c in comparisons),
        min(c.one_thousandth_ratio for c in comparisons),
        seconds,
        reason or "",
        "" if len(test) == len(reference) else f"{len(test)} outputs, the reference {len(reference)}",
    )


def run_item(
    item: KernelItem, context: SelectionContext, device: torch.device, dtypes: tuple[torch.dtype, ...]
) -> tuple[DtypeRun, ...]:
    """Every dtype of `item` with its recipe pinned (and its chip, for another chip's recipe)."""
    inputs = item_inputs(item)
    with pinned(item.override(context)):
        return tuple(run_dtype(item.op, inputs, device, dtype) for dtype in dtypes)


__all__ = ["DtypeRun", "error_code", "pinned", "run_dtype", "run_item"]
