"""The backend's ops as plain functions; each dispatches through `ascend_backend.registry`.

Each module declares its ops (the one signature of each) and registers their native implementations,
the accuracy reference; the NPU adapters are in `ascend_backend.npu.adapters`.
"""

from ascend_backend.ops.activation import gelu, gelu_tanh, quick_gelu, silu_and_mul
from ascend_backend.ops.linear import linear
from ascend_backend.ops.multimodal_rotary import mrope
from ascend_backend.ops.norm import add_rms_norm, gemma_add_rms_norm, gemma_rms_norm, rms_norm
from ascend_backend.ops.rotary import build_cos_sin_cache, rotary_embedding

__all__ = [
    "add_rms_norm",
    "build_cos_sin_cache",
    "gelu",
    "gelu_tanh",
    "gemma_add_rms_norm",
    "gemma_rms_norm",
    "linear",
    "mrope",
    "quick_gelu",
    "rms_norm",
    "rotary_embedding",
    "silu_and_mul",
]
