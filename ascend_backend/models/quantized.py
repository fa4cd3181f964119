"""W8A8 linear modules for the executor: a quantized checkpoint's layers, run through the registry's ops.

Each module holds what vllm-ascend's linear method holds after `process_weights_after_loading`
(vllm_ascend/quantization/methods/w8a8_static.py and w8a8_dynamic.py, v0.23.0): the int8 weight
transposed to [in, out] for the quant matmul, the scales in the model's dtype, and for static layers
deq_scale as float32 (or int64-packed when the model runs in fp16) and the int32 quant_bias. The
module keeps the name of the float layer it replaces (`q_proj`, `down_proj`), so a dump of the
quantized executor lines up with a dump of the float model by module name.
"""

from __future__ import annotations

import torch
from torch import nn

from ascend_backend.quantization import QuantizedLinear, QuantType
from ascend_backend.quantization.arithmetic import pack_deq_scale
from ascend_backend.quantization.ops import quant_weight_layout, w8a8_dynamic_linear, w8a8_linear


class StaticW8A8Linear(nn.Module):
    """x -> npu_quantize (one scale/offset per tensor) -> npu_quant_matmul with deq_scale and quant_bias."""

    def __init__(self, layer: QuantizedLinear, dtype: torch.dtype) -> None:
        super().__init__()
        if layer.quant_type is not QuantType.W8A8:
            raise ValueError(f"StaticW8A8Linear takes a W8A8 layer, got {layer.quant_type.value}")
        assert layer.input_scale is not None and layer.input_offset is not None
        deq_scale = layer.static_deq_scale().float()
        self.register_buffer("weight", layer.weight.t().contiguous())  # [in, out] int8
        self.register_buffer("input_scale", layer.input_scale.reshape(1).to(dtype))  # [1]
        self.register_buffer("input_offset", torch.tensor([layer.input_offset], dtype=torch.int8))  # [1]
        self.register_buffer("deq_scale", pack_deq_scale(deq_scale) if dtype == torch.float16 else deq_scale)  # [out]
        self.register_buffer("quant_bias", layer.static_quant_bias().to(torch.int32))  # [out]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return w8a8_linear(x, self.weight, self.input_scale, self.input_offset, self.deq_scale, self.quant_bias)


class DynamicW8A8Linear(nn.Module):
    """x -> npu_dynamic_quant (a scale per token) -> npu_quant_matmul with weight_scale and pertoken_scale."""

    def __init__(self, layer: QuantizedLinear, dtype: torch.dtype) -> None:
        super().__init__()
        if layer.quant_type is not QuantType.W8A8_DYNAMIC:
            raise ValueError(f"DynamicW8A8Linear takes a W8A8_DYNAMIC layer, got {layer.quant_type.value}")
        self.register_buffer("weight", layer.weight.t().contiguous())  # [in, out] int8
        self.register_buffer("weight_scale", layer.weight_scale.to(dtype))  # [out]
        self.register_buffer("bias", None if layer.bias is None else layer.bias.to(dtype))  # [out] | None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return w8a8_dynamic_linear(x, self.weight, self.weight_scale, self.bias)


def quantized_module(layer: QuantizedLinear, dtype: torch.dtype, device: torch.device | str) -> nn.Module:
    """The executor module for one quantized layer, on `device`, its weight in the layout the release's
    linears take (`quant_weight_layout`: FRACTAL_NZ on an NPU where vllm-ascend casts it, once, here)."""
    cls = StaticW8A8Linear if layer.quant_type is QuantType.W8A8 else DynamicW8A8Linear
    module = cls(layer, dtype).to(device)
    module.weight = quant_weight_layout(module.weight, layer.quant_type.value)
    return module
