"""RMSNorm, plain and fused with the residual add, and Gemma's RMSNorm (weight + 1).

Native math follows vLLM's `RMSNorm.forward_static`: upcast to float32, add the residual there, normalise,
cast back to the input dtype, then multiply by the weight. Gemma's variant (vLLM `GemmaRMSNorm`) differs
twice: the scale is (1 + weight), and the multiplication happens in float32 before the cast.

The NPU adapters (vllm-ascend's `npu_rms_norm` / `npu_add_rms_norm` calls) are in
`ascend_backend.npu.adapters.norm`.
"""

from __future__ import annotations

import torch

from ascend_backend.registry import REGISTRY, Backend


@REGISTRY.declare
def rms_norm(
    x: torch.Tensor,  # [..., hidden]
    weight: torch.Tensor,  # [hidden]
    eps: float = 1e-6,
) -> torch.Tensor:  # [..., hidden] in x's dtype
    """y = x / sqrt(mean(x^2) + eps) * weight over the last dim (fp32 inside)."""


@REGISTRY.declare
def add_rms_norm(
    x: torch.Tensor,  # [..., hidden]
    residual: torch.Tensor,  # [..., hidden]
    weight: torch.Tensor,  # [hidden]
    eps: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor]:  # (rms_norm(x + residual), x + residual), both in x's dtype
    """r = x + residual; y = rms_norm(r); returns (y, r)."""


@REGISTRY.declare
def gemma_rms_norm(
    x: torch.Tensor,  # [..., hidden]
    weight: torch.Tensor,  # [hidden], stored as scale - 1
    eps: float = 1e-6,
) -> torch.Tensor:  # [..., hidden] in x's dtype
    """y = (x / sqrt(mean(x^2) + eps) * (1 + weight)) in fp32, then cast (Gemma RMSNorm)."""


@REGISTRY.declare
def gemma_add_rms_norm(
    x: torch.Tensor,  # [..., hidden]
    residual: torch.Tensor,  # [..., hidden]
    weight: torch.Tensor,  # [hidden], stored as scale - 1
    eps: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor]:  # (gemma_rms_norm(x + residual), x + residual), both in x's dtype
    """r = x + residual; y = gemma_rms_norm(r); returns (y, r)."""


def _normalise(x32: torch.Tensor, weight: torch.Tensor, eps: float, dtype: torch.dtype) -> torch.Tensor:
    variance = x32.pow(2).mean(dim=-1, keepdim=True)
    return (x32 * torch.rsqrt(variance + eps)).to(dtype) * weight


def _normalise_gemma(x32: torch.Tensor, weight: torch.Tensor, eps: float, dtype: torch.dtype) -> torch.Tensor:
    variance = x32.pow(2).mean(dim=-1, keepdim=True)
    return (x32 * torch.rsqrt(variance + eps) * (1.0 + weight.float())).to(dtype)


@REGISTRY.register("rms_norm", Backend.NATIVE)
def rms_norm_native(x, weight, eps):
    return _normalise(x.float(), weight, eps, x.dtype)


@REGISTRY.register("add_rms_norm", Backend.NATIVE)
def add_rms_norm_native(x, residual, weight, eps):
    summed = x.float() + residual.float()
    return _normalise(summed, weight, eps, x.dtype), summed.to(x.dtype)


@REGISTRY.register("gemma_rms_norm", Backend.NATIVE)
def gemma_rms_norm_native(x, weight, eps):
    return _normalise_gemma(x.float(), weight, eps, x.dtype)


@REGISTRY.register("gemma_add_rms_norm", Backend.NATIVE)
def gemma_add_rms_norm_native(x, residual, weight, eps):
    summed = x.float() + residual.float()
    return _normalise_gemma(summed, weight, eps, x.dtype), summed.to(x.dtype)
