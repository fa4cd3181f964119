"""Activations: SiLU-and-mul (SwiGLU gate), GELU (erf), GELU (tanh approximation) and QuickGELU.

Native math follows vLLM's `SiluAndMul.forward_native`, torch's GELU and vLLM's `QuickGELU.forward_native`
(x * sigmoid(1.702 x), CLIP-style vision towers). The NPU adapters (`npu_swiglu`, `npu_fast_gelu`; no
GELU kernel, as in vllm-ascend) are in `ascend_backend.npu.adapters.activation`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ascend_backend.registry import REGISTRY, Backend

QUICK_GELU_ALPHA = 1.702  # QuickGELU's sigmoid slope (CLIP; vLLM QuickGELU.forward_native)


@REGISTRY.declare
def silu_and_mul(x: torch.Tensor) -> torch.Tensor:  # x: [..., 2*d] = [gate | up] -> [..., d]
    """silu(x[..., :d]) * x[..., d:]: the SwiGLU gate."""


@REGISTRY.declare
def gelu(x: torch.Tensor) -> torch.Tensor:
    """Exact GELU: 0.5 x (1 + erf(x / sqrt 2))."""


@REGISTRY.declare
def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU with the tanh approximation of GPT-2-style models: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""


@REGISTRY.declare
def quick_gelu(x: torch.Tensor) -> torch.Tensor:
    """QuickGELU: x * sigmoid(1.702 x), computed in float32 and returned in x's dtype."""


def _even_last_dim(x: torch.Tensor) -> str | None:
    return None if x.shape[-1] % 2 == 0 else f"last dim {x.shape[-1]} is odd; expected [gate | up]"


@REGISTRY.register("silu_and_mul", Backend.NATIVE)
def silu_and_mul_native(x):
    if _even_last_dim(x):
        raise ValueError(f"silu_and_mul: {_even_last_dim(x)}")
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


@REGISTRY.register("gelu", Backend.NATIVE)
def gelu_native(x):
    return F.gelu(x)


@REGISTRY.register("gelu_tanh", Backend.NATIVE)
def gelu_tanh_native(x):
    return F.gelu(x, approximate="tanh")


@REGISTRY.register("quick_gelu", Backend.NATIVE)
def quick_gelu_native(x):
    # float32 inside, one rounding at the end: computed in bfloat16 the product of two rounded factors
    # drifts beyond msprobe's bf16 error threshold, which no kernel does.
    x32 = x.float()
    return (x32 * torch.sigmoid(QUICK_GELU_ALPHA * x32)).to(x.dtype)
