"""RMSNorm on the NPU: the calls vllm-ascend's AscendRMSNorm and AscendGemmaRMSNorm make (vllm_ascend/ops/layernorm.py).

    npu_rms_norm                    npu_rms_norm(x, weight, eps) -> (y, rstd)
    npu_add_rms_norm                npu_add_rms_norm(x, residual, weight, eps) -> (y, rstd, x + residual)
    add_then_npu_rms_norm           310P, v0.9.2rc1 to v0.13.0: x + residual in PyTorch, then npu_rms_norm
    ..._plus_one                    AscendGemmaRMSNorm: the same kernels with 1.0 + weight

The kernel-selection table names the recipe per release and chip, and sends releases whose norm path is
not reproduced native. The native reference is `ascend_backend.ops.norm`.
"""

from __future__ import annotations

from ascend_backend.npu.guard import npu_op
from ascend_backend.ops import norm as _declared  # noqa: F401  (declares the ops adapted here)


def _npu_rms_norm(npu, x, weight, eps):
    y, _rstd = npu.npu_rms_norm(x, weight, eps)
    return y


def _npu_rms_norm_plus_one(npu, x, weight, eps):
    return _npu_rms_norm(npu, x, 1.0 + weight, eps)  # AscendGemmaRMSNorm: npu_rms_norm(x, 1.0 + self.weight, eps)


def _npu_add_rms_norm(npu, x, residual, weight, eps):
    y, _rstd, summed = npu.npu_add_rms_norm(x, residual, weight, eps)
    return y, summed


def _add_then_npu_rms_norm(npu, x, residual, weight, eps):
    # layernorm.py@v0.13.0 (310P): the sum in x's dtype, then the plain kernel on it.
    summed = x + residual.to(x.dtype)
    return _npu_rms_norm(npu, summed, weight, eps), summed


def _npu_add_rms_norm_plus_one(npu, x, residual, weight, eps):
    return _npu_add_rms_norm(npu, x, residual, 1.0 + weight, eps)


def _add_then_npu_rms_norm_plus_one(npu, x, residual, weight, eps):
    return _add_then_npu_rms_norm(npu, x, residual, 1.0 + weight, eps)


# npu_rms_norm takes float32 as well: no dtype limit (vllm-ascend hands it the model's dtype).
rms_norm_npu = npu_op("rms_norm", {"npu_rms_norm": _npu_rms_norm}, dtypes=None)
add_rms_norm_npu = npu_op(
    "add_rms_norm",
    {"npu_add_rms_norm": _npu_add_rms_norm, "add_then_npu_rms_norm": _add_then_npu_rms_norm},
    dtypes=None,
)
gemma_rms_norm_npu = npu_op("gemma_rms_norm", {"npu_rms_norm_plus_one": _npu_rms_norm_plus_one}, dtypes=None)
gemma_add_rms_norm_npu = npu_op(
    "gemma_add_rms_norm",
    {
        "npu_add_rms_norm_plus_one": _npu_add_rms_norm_plus_one,
        "add_then_npu_rms_norm_plus_one": _add_then_npu_rms_norm_plus_one,
    },
    dtypes=None,
)
