"""Activations on the NPU: the calls vllm-ascend makes where it overrides the layer (vllm_ascend/ops/activation.py).

    npu_swiglu      AscendSiluAndMul: npu_swiglu(x), [..., 2d] -> [..., d]
    npu_fast_gelu   AscendQuickGELU: CANN's FastGelu, x * sigmoid(1.702 x) written as
                    x / (1 + exp(-1.702 |x|)) * exp(0.851 (x - |x|))

vllm-ascend registers no GELU override (activation.py@v0.23.0), so GELU has no adapter: on an NPU it runs
vLLM's native forward (F.gelu, which torch_npu lowers to CANN), and the kernel-selection table says so.
Where the table names no torch_npu kernel for the release and chip (310P's float32 SwiGLU detour,
QuickGELU in v0.8.4rc2), the guard sends the call native. The native reference is `ascend_backend.ops.activation`.
"""

from __future__ import annotations

from ascend_backend.npu.guard import npu_op
from ascend_backend.ops import activation as _declared  # noqa: F401  (declares the ops adapted here)


def _odd_gate(x) -> str | None:
    return None if x.shape[-1] % 2 == 0 else f"last dim {x.shape[-1]} is odd; expected [gate | up]"


def _npu_swiglu(npu, x):
    return npu.npu_swiglu(x)


def _npu_fast_gelu(npu, x):
    return npu.npu_fast_gelu(x)


silu_and_mul_npu = npu_op("silu_and_mul", {"npu_swiglu": _npu_swiglu}, dtypes=None, refuse=_odd_gate)
quick_gelu_npu = npu_op("quick_gelu", {"npu_fast_gelu": _npu_fast_gelu}, dtypes=None)
