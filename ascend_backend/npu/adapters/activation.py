"""Activations on the NPU: the calls vllm-ascend makes where it overrides the layer (vllm_ascend/ops/activation.py).

    npu_swiglu      AscendSiluAndMul: npu_swiglu(x), [..., 2d] -> [..., d]
    npu_fast_gelu   AscendQuickGELU: CANN's FastGelu, x * sigmoid(1.702 x) written as
                    x / (1 + exp(-1.702 |x|)) * exp(0.851 (x - |x|))

vllm-ascend registers no GELU override (activation.py@v0.23.0), so GELU has no adapter: on an NPU it runs
vLLM's native forward (F.gelu, which torch_npu lowers to CANN), and the kernel-selection table says so.
310P runs SwiGLU in float32 (`npu_swiglu_fp32`, v0.9.2rc1 to v0.13.0), in PyTorch in v0.14.0rc1, and from
v0.15.0rc1 npu_swiglu only when the last dimension is a multiple of 32 (the table's `last_dim_multiple`).
Where the table names no torch_npu kernel for the release and chip (QuickGELU in v0.8.4rc2, unaligned
310P SwiGLU), the guard sends the call native. The native reference is `ascend_backend.ops.activation`.
"""

from __future__ import annotations

import torch

from ascend_backend.npu.guard import npu_op
from ascend_backend.ops import activation as _declared  # noqa: F401  (declares the ops adapted here)
from ascend_backend.platform.kernels import CallFacts, kernels_typical


def _odd_gate(x) -> str | None:
    return None if x.shape[-1] % 2 == 0 else f"last dim {x.shape[-1]} is odd; expected [gate | up]"


def _npu_swiglu(npu, x):
    return npu.npu_swiglu(x)


def _npu_swiglu_fp32(npu, x):
    # activation.py@v0.13.0 (310P): npu_swiglu(x.to(torch.float32)).to(torch.float16)
    return npu.npu_swiglu(x.to(torch.float32)).to(x.dtype)


def _last_dim(x) -> CallFacts:
    return kernels_typical(last_dim=int(x.shape[-1]))


def _npu_fast_gelu(npu, x):
    return npu.npu_fast_gelu(x)


silu_and_mul_npu = npu_op(
    "silu_and_mul",
    {"npu_swiglu": _npu_swiglu, "npu_swiglu_fp32": _npu_swiglu_fp32},
    dtypes=None,
    facts=_last_dim,
    refuse=_odd_gate,
)
quick_gelu_npu = npu_op("quick_gelu", {"npu_fast_gelu": _npu_fast_gelu}, dtypes=None)
