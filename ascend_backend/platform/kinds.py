"""The kinds of device and of NPU (un)availability: plain enums and one frozen dataclass, no torch.

Why a module of its own: a process that only reads configuration (the workbench's recipe reader, a
scheduler) names devices without loading torch, so these names must import without it. The probe that
fills them in (`ascend_backend.platform.device`) does import torch; this module never does (a test imports it
in a fresh interpreter and checks that `torch` stays out of `sys.modules`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class DeviceKind(str, enum.Enum):
    """Which tier a tensor or a machine is on: the Ascend NPU, a CUDA GPU, or the CPU."""

    NPU = "npu"
    CUDA = "cuda"
    CPU = "cpu"


class NpuUnavailable(str, enum.Enum):
    """Why the NPU tier is not usable; AVAILABLE when it is."""

    AVAILABLE = "available"
    DISABLED = "disabled by ASCEND_BACKEND_DISABLE_NPU"
    NOT_INSTALLED = "torch_npu not installed"
    CANN_NOT_SOURCED = "CANN libraries not found"
    DRIVER_MISSING = "Ascend driver libraries not found"
    ATB_MISSING = "NNAL/ATB library missing or mismatched"
    TORCH_MISMATCH = "torch and torch_npu are not a matching pair"
    NO_DEVICE = "torch_npu imports but no NPU is visible"
    IMPORT_ERROR = "torch_npu failed to import"


@dataclass(frozen=True)
class NpuStatus:
    """Outcome of trying torch_npu: `kind` is the class, `detail` the evidence, `fix` what to do."""

    kind: NpuUnavailable
    detail: str
    fix: str

    @property
    def available(self) -> bool:
        return self.kind is NpuUnavailable.AVAILABLE


__all__ = ["DeviceKind", "NpuStatus", "NpuUnavailable"]
