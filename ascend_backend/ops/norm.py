"""RMSNorm, plain and fused with the residual add.

Native math follows vLLM's `RMSNorm.forward_static`: upcast to float32, add the residual there, normalise,
cast back to the input dtype, then multiply by the weight. NPU adapters make the calls vllm-ascend's
`AscendRMSNorm.forward_oot` makes: `npu_rms_norm(x, weight, eps) -> (y, rstd)` and
`npu_add_rms_norm(x, residual, weight, eps) -> (y, rstd, x + residual)`.
"""

from __future__ import annotations

import torch

from ascend_backend.device import torch_npu
from ascend_backend.registry import REGISTRY, Backend

_RMS_DOC = "y = x / sqrt(mean(x^2) + eps) * weight over the last dim (fp32 inside)"
_ADD_DOC = "r = x + residual; y = rms_norm(r); returns (y, r)"


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x: [..., hidden], weight: [hidden] -> [..., hidden] in x's dtype."""
    return REGISTRY.dispatch("rms_norm", x.device, x, weight, eps)


def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """x, residual: [..., hidden] -> (rms_norm(x + residual), x + residual), both in x's dtype."""
    return REGISTRY.dispatch("add_rms_norm", x.device, x, residual, weight, eps)


def _normalise(x32: torch.Tensor, weight: torch.Tensor, eps: float, dtype: torch.dtype) -> torch.Tensor:
    variance = x32.pow(2).mean(dim=-1, keepdim=True)
    return (x32 * torch.rsqrt(variance + eps)).to(dtype) * weight


@REGISTRY.register("rms_norm", Backend.NATIVE, doc=_RMS_DOC)
def rms_norm_native(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return _normalise(x.float(), weight, eps, x.dtype)


@REGISTRY.register("add_rms_norm", Backend.NATIVE, doc=_ADD_DOC)
def add_rms_norm_native(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    summed = x.float() + residual.float()
    return _normalise(summed, weight, eps, x.dtype), summed.to(x.dtype)


@REGISTRY.register("rms_norm", Backend.NPU)
def rms_norm_npu(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    y, _rstd = torch_npu().npu_rms_norm(x, weight, eps)
    return y


@REGISTRY.register("add_rms_norm", Backend.NPU)
def add_rms_norm_npu(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    y, _rstd, summed = torch_npu().npu_add_rms_norm(x, residual, weight, eps)
    return y, summed
