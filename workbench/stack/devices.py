"""Device names as users give them ('auto', 'cpu', 'cuda:0', 'npu:0') -> a usable torch.device.

The one resolver for every verb, notebook and runner: 'auto' is the device `ascend_backend.platform.device`
detects (NPU, else CUDA, else CPU); an NPU that cannot be used says why and how to fix it (the reason
`ascend_backend.platform.device` kept when torch_npu failed to import); a CUDA name without a GPU says so.
"""

from __future__ import annotations

import torch

from ascend_backend.platform import device as npu_device
from ascend_backend.platform.device import detect
from ascend_backend.platform.kinds import DeviceKind
from workbench.errors import WorkbenchError


def resolve_device(name: str | torch.device = "auto", *, flag: str = "device") -> torch.device:
    """'auto' -> the detected device; otherwise a device name that must be usable here.

    `flag` names the setting in errors ('--device' for the CLI, 'device' for notebooks).
    """
    if isinstance(name, torch.device):
        return name
    if name == "auto":
        return detect().torch_device
    kind = npu_device.kind_of(name)
    if kind is DeviceKind.NPU and not npu_device.npu_status().available:
        status = npu_device.npu_status()
        raise WorkbenchError(
            f"{flag} {name!r}: NPU not usable here ({status.kind.value}: {status.detail}); fix: {status.fix}"
        )
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise WorkbenchError(f"{flag} {name!r} is not a device name (use auto, cpu, cuda:0, npu:0): {exc}") from None
    if kind is DeviceKind.CUDA and not torch.cuda.is_available():
        raise WorkbenchError(f"{flag} {name!r}: no CUDA device visible here; use auto or cpu")
    return device
