"""What the backend sees on this machine: device, NPU status, op registry, one op comparison.

The functions behind notebook 01; each returns a table or text so the notebook stays one call per cell.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch

import ascend_backend
from ascend_backend.device import DeviceKind, detect
from ascend_backend.registry import REGISTRY, Backend
from workbench.accuracy.op_inputs import make_inputs
from workbench.dtypes import dtype_name, parse_dtype
from workbench.errors import WorkbenchError


def resolve_device(name: str = "auto") -> torch.device:
    """'auto' -> the detected device; otherwise a torch device string that must be usable here."""
    if name == "auto":
        return detect().torch_device
    kind = ascend_backend.device.kind_of(name)
    if kind is DeviceKind.NPU and not ascend_backend.device.npu_status().available:
        status = ascend_backend.device.npu_status()
        raise WorkbenchError(f"device {name!r}: NPU not usable here ({status.kind.value}: {status.detail}). Fix: {status.fix}")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise WorkbenchError(f"device {name!r} is not a device name (use auto, cpu, cuda:0, npu:0): {exc}") from None
    if kind is DeviceKind.CUDA and not torch.cuda.is_available():
        raise WorkbenchError(f"device {name!r}: no CUDA device visible; use device='auto' or 'cpu'")
    return device


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
    status = ascend_backend.device.npu_status()
    if status.available:
        return f"The NPU is in use: {status.detail}. Ops with an NPU kernel run it; the rest run natively on the NPU."
    return (
        f"No NPU in use here: **{status.kind.value}** ({status.detail}). Every op runs its native PyTorch path, "
        f"which is also the accuracy reference. To use an NPU: {status.fix}."
    )


def registry_table(device: str = "auto") -> pd.DataFrame:
    return REGISTRY.describe(resolve_device(device))


def compare_op(
    op: str = "rms_norm",
    dtype: str = "bfloat16",
    shapes: Sequence[Sequence[int]] = ((4, 256),),
    device: str = "auto",
    seed: int = 0,
) -> pd.DataFrame:
    """The chosen implementation on `device` in `dtype` vs native float32 on CPU, one row per shape."""
    from workbench.accuracy.metrics import compare_tensors

    REGISTRY.entry(op)  # unknown op -> error listing the known ones
    target = resolve_device(device)
    torch_dtype = parse_dtype(dtype)
    selection = REGISTRY.select(op, target)
    native = REGISTRY.impl(op, Backend.NATIVE)
    rows = []
    for shape in shapes:
        inputs = make_inputs(op, shape, seed)
        reference = _first_tensor(native(*inputs.args))
        test = _first_tensor(REGISTRY.dispatch(op, target, *inputs.to(target, torch_dtype).args))
        result = compare_tensors(test.cpu(), reference)
        rows.append({
            "op": op, "shape": "x".join(map(str, shape)), "dtype": dtype_name(torch_dtype),
            "device": str(target), "implementation": selection.backend.value,
            "cosine": result.cosine, "max_abs_err": result.max_abs_err, "max_rel_err": result.max_rel_err,
            "one_thousandth_ratio": result.one_thousandth_ratio, "verdict": _verdict_text(result),
        })
    return pd.DataFrame(rows)


def _first_tensor(out: object) -> torch.Tensor:
    # Ops returning (out, residual) or (query, key): compare the primary output.
    return out[0] if isinstance(out, tuple) else out  # type: ignore[index,return-value]


def _verdict_text(result: object) -> str:
    verdict = result.verdict
    return getattr(verdict, "value", str(verdict))
