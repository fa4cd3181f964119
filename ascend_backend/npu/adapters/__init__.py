"""Every NPU adapter: the torch_npu calls vllm-ascend makes, one module per family of ops.

    norm        rms_norm, add_rms_norm, gemma_rms_norm, gemma_add_rms_norm
    activation  silu_and_mul, quick_gelu
    rotary      rotary_embedding, mrope
    attention   reshape_and_cache and the four attention states
    w8a8        w8a8_linear, w8a8_dynamic_linear

Each registers its ops' NPU implementations through the one guard factory (`ascend_backend.npu.guard`)
when imported; the op registry imports this package the first time it is used.
"""

from ascend_backend.npu.adapters import activation, attention, norm, rotary, w8a8

__all__ = ["activation", "attention", "norm", "rotary", "w8a8"]
