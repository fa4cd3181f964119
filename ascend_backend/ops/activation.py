"""Activations: SiLU-and-mul (SwiGLU gate), GELU (erf) and GELU (tanh approximation).

Native math follows vLLM's `SiluAndMul.forward_native` and torch's GELU; NPU adapters call
`npu_swiglu` (as vllm-ascend's `AscendSiluAndMul`) and `npu_gelu` with the matching approximation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ascend_backend.device import torch_npu
from ascend_backend.registry import REGISTRY, Backend


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """x: [..., 2*d] = [gate | up] -> silu(gate) * up: [..., d]."""
    return REGISTRY.dispatch("silu_and_mul", x.device, x)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """Exact GELU: x * Phi(x)."""
    return REGISTRY.dispatch("gelu", x.device, x)


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU with the tanh approximation used by GPT-2-style models."""
    return REGISTRY.dispatch("gelu_tanh", x.device, x)


def _even_last_dim(x: torch.Tensor) -> str | None:
    return None if x.shape[-1] % 2 == 0 else f"last dim {x.shape[-1]} is odd; expected [gate | up]"


@REGISTRY.register("silu_and_mul", Backend.NATIVE, doc="silu(x[..., :d]) * x[..., d:]")
def silu_and_mul_native(x: torch.Tensor) -> torch.Tensor:
    if _even_last_dim(x):
        raise ValueError(f"silu_and_mul: {_even_last_dim(x)}")
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


@REGISTRY.register("gelu", Backend.NATIVE, doc="0.5 x (1 + erf(x / sqrt 2))")
def gelu_native(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x)


@REGISTRY.register("gelu_tanh", Backend.NATIVE, doc="0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))")
def gelu_tanh_native(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


@REGISTRY.register("silu_and_mul", Backend.NPU, supports=_even_last_dim)
def silu_and_mul_npu(x: torch.Tensor) -> torch.Tensor:
    return torch_npu().npu_swiglu(x)


@REGISTRY.register("gelu", Backend.NPU)
def gelu_npu(x: torch.Tensor) -> torch.Tensor:
    return torch_npu().npu_gelu(x, approximate="none")


@REGISTRY.register("gelu_tanh", Backend.NPU)
def gelu_tanh_npu(x: torch.Tensor) -> torch.Tensor:
    return torch_npu().npu_gelu(x, approximate="tanh")
