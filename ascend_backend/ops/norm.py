"""RMSNorm, plain and fused with the residual add, and Gemma's RMSNorm (weight + 1).

Native math follows vLLM's `RMSNorm.forward_static`: upcast to float32, add the residual there, normalise,
cast back to the input dtype, then multiply by the weight. Gemma's variant (vLLM `GemmaRMSNorm`) differs
twice: the scale is (1 + weight), and the multiplication happens in float32 before the cast.

NPU adapters make vllm-ascend's calls (vllm_ascend/ops/layernorm.py):
`npu_rms_norm(x, weight, eps) -> (y, rstd)` and `npu_add_rms_norm(x, residual, weight, eps) -> (y, rstd,
x + residual)` in AscendRMSNorm; AscendGemmaRMSNorm passes `1.0 + weight` to the same two kernels. On 310P
(v0.9.2rc1 to v0.13.0) vllm-ascend adds the residual in PyTorch and calls npu_rms_norm on the sum; the
kernel-selection table names that recipe, and sends releases whose norm path is not reproduced native.
"""

from __future__ import annotations

import torch

from ascend_backend.npu import kernels
from ascend_backend.npu.device import torch_npu
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


def _table_guard(op: str):
    def guard(*_args: object, **_kwargs: object) -> str | None:
        choice = kernels.choose(op)
        return choice.reason if choice.native else None

    return guard


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    y, _rstd = torch_npu().npu_rms_norm(x, weight, eps)
    return y


def _add_rms(x, residual, weight, eps, recipe: str) -> tuple[torch.Tensor, torch.Tensor]:
    if recipe.startswith("add_then_npu_rms_norm"):
        # layernorm.py@v0.13.0 (310P): the sum in x's dtype, then the plain kernel on it.
        summed = x + residual.to(x.dtype)
        return _rms(summed, weight, eps), summed
    y, _rstd, summed = torch_npu().npu_add_rms_norm(x, residual, weight, eps)
    return y, summed


@REGISTRY.register("rms_norm", Backend.NPU, supports=_table_guard("rms_norm"))
def rms_norm_npu(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return _rms(x, weight, eps)


@REGISTRY.register("add_rms_norm", Backend.NPU, supports=_table_guard("add_rms_norm"))
def add_rms_norm_npu(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    return _add_rms(x, residual, weight, eps, kernels.choose("add_rms_norm").recipe)


@REGISTRY.register("gemma_rms_norm", Backend.NPU, supports=_table_guard("gemma_rms_norm"))
def gemma_rms_norm_npu(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return _rms(x, 1.0 + weight, eps)  # AscendGemmaRMSNorm: npu_rms_norm(x, 1.0 + self.weight, eps)


@REGISTRY.register("gemma_add_rms_norm", Backend.NPU, supports=_table_guard("gemma_add_rms_norm"))
def gemma_add_rms_norm_npu(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    return _add_rms(x, residual, 1.0 + weight, eps, kernels.choose("gemma_add_rms_norm").recipe)


IMPLEMENTED = {
    "rms_norm": frozenset({"npu_rms_norm"}),
    "add_rms_norm": frozenset({"npu_add_rms_norm", "add_then_npu_rms_norm"}),
    "gemma_rms_norm": frozenset({"npu_rms_norm_plus_one"}),
    "gemma_add_rms_norm": frozenset({"npu_add_rms_norm_plus_one", "add_then_npu_rms_norm_plus_one"}),
}
