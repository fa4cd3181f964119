"""W8A8 quantization: int8 weights and activations, in Ascend's pack format and in vLLM's.

INT8 matrix work is where Ascend gains most, and where a port drifts silently when the pack format or
the operator contract is wrong (docs/METHOD.md §1, §13). This package holds the whole chain, importable
with torch alone:

    scheme               W8A8 (static per-tensor activations) / W8A8_DYNAMIC (per token) / FLOAT;
                         QuantizedLinear and QuantizedModel, the format-neutral form
    arithmetic           the integer maths: weight/activation quantization, exact int8 x int8 -> int32,
                         deq_scale and quant_bias, the int64 packing of fp16 deq_scale
    calibration          min/max observers on each linear's input while a float model reads prompts
    quantizer            float state dict (+ ranges) -> QuantizedModel; fused q/k/v and gate/up rules
    msmodelslim          quant_model_description.json + quant_model_weight_w8a8.safetensors (vllm-ascend)
    compressed_tensors   config.json quantization_config + int8 tensors (vLLM CPU/CUDA int8 kernels)
    ops                  registry ops `w8a8_linear` and `w8a8_dynamic_linear`: npu_quantize /
                         npu_dynamic_quant + npu_quant_matmul on an NPU, the integer path natively
    units                rollback units: the fused groups (qkv, o, gate_up, down) a plan keeps in float together
    fakequant            the rounding of the schemes no kernel here runs (W8A16, W4A16, W4A8, KV int8), and
                         `Measured`: how a scheme's accuracy was obtained (served / executor / fake-quant)
    weight_only          W8A16 / W4A16 layers in compressed-tensors pack-quantized and msmodelslim W8A16
    kv_c8                the int8 KV cache: calibrated and fake-quantized at the registry's cache write,
                         written in vllm-ascend's v0.11.0 and v0.18.0+ layouts

    from ascend_backend import quantization as q
    model = q.read_checkpoint("/ckpt")            # either format, checked, -> QuantizedModel
    q.checkpoint_format("/ckpt")                  # QuantFormat.MSMODELSLIM, COMPRESSED_TENSORS or None
"""

from __future__ import annotations

from pathlib import Path

from ascend_backend.quantization import compressed_tensors, msmodelslim, ops
from ascend_backend.quantization.calibration import ActivationRange, RangeObserver, observe_linear_inputs
from ascend_backend.quantization.ops import w8a8_dynamic_linear, w8a8_linear
from ascend_backend.quantization.quantizer import linear_prefixes, plan_layers, quantize_linear, quantize_model
from ascend_backend.quantization.scheme import (
    QuantFormat,
    QuantizedCheckpointError,
    QuantizedLinear,
    QuantizedModel,
    QuantType,
)


def checkpoint_format(path: str | Path) -> QuantFormat | None:
    """Which quantized layout a directory holds; None for a float checkpoint.

    msmodelslim wins when both signatures are present, as in vllm-ascend's detection order
    (`detect_quantization_method`, vllm_ascend/quantization/utils.py, v0.23.0).
    """
    if msmodelslim.is_msmodelslim(path):
        return QuantFormat.MSMODELSLIM
    if compressed_tensors.is_compressed_tensors(path):
        return QuantFormat.COMPRESSED_TENSORS
    return None


def read_checkpoint(path: str | Path) -> QuantizedModel:
    """A quantized directory of either format as a QuantizedModel (QuantizedCheckpointError when it is not one)."""
    fmt = checkpoint_format(path)
    if fmt is QuantFormat.MSMODELSLIM:
        return msmodelslim.read(path)
    if fmt is QuantFormat.COMPRESSED_TENSORS:
        return compressed_tensors.read(path)
    raise QuantizedCheckpointError(
        f"{path} is not a quantized checkpoint: it has neither {msmodelslim.DESCRIPTION_FILE} nor a "
        "compressed-tensors quantization_config in config.json"
    )


__all__ = [
    "ActivationRange",
    "QuantFormat",
    "QuantType",
    "QuantizedCheckpointError",
    "QuantizedLinear",
    "QuantizedModel",
    "RangeObserver",
    "checkpoint_format",
    "compressed_tensors",
    "linear_prefixes",
    "msmodelslim",
    "observe_linear_inputs",
    "ops",
    "plan_layers",
    "quantize_linear",
    "quantize_model",
    "read_checkpoint",
    "w8a8_dynamic_linear",
    "w8a8_linear",
]
