"""Weight-only layers (W8A16, W4A16 with a group size) in the two layouts that can hold them.

The arithmetic is `fakequant.quantize_weight_groups` (symmetric: int8 per channel, int4 per group); this
module lays the integers out:

    compressed-tensors "pack-quantized" (vLLM's CompressedTensorsWNA16: vllm/model_executor/layers/quantization/
    compressed_tensors/schemes/compressed_tensors_wNa16.py, vLLM 0.32)
        weight_packed  [out, in * bits / 32] int32   unsigned values (q + 2**(bits-1), "uint4b8" / "uint8b128"),
                                                      32 / bits consecutive inputs per word, input i at bits
                                                      bits * (i % per_word) -- vLLM's pack_quantized_values_into_int32
        weight_scale   [out, in / group_size] model dtype   (W8A16 per channel: [out, 1])
        weight_shape   [2] int64 = (out, in)
        config group   weights {num_bits, type int, symmetric, strategy group|channel, group_size}, no inputs
    msmodelslim W8A16 (vllm-ascend w8a16.py, from v0.13.0: `AscendW8A16LinearMethod`)
        weight [out, in] int8, weight_scale [out, 1], weight_offset [out, 1] (zeros), description "W8A16"

vLLM's CPU build serves W4A16 where it has its CPUWNA16 kernel (uint4 / uint4b8; `cpu_gemm_wna16`, built for
AVX512 hosts only: an AVX2 build loads the checkpoint, then fails at the first request) and never 8-bit
weight-only; vllm-ascend
runs W4A16 on MoE experts only, so a dense msmodelslim W4A16 is not written (`lint --checkpoint` says why).
Example of the packing (bits 4): q = [-8, 7, 0, 1, 0, 0, 0, 0] -> unsigned [0, 15, 8, 9, 8, 8, 8, 8] ->
word 0x888898F0 (as int32: -2004313872).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ascend_backend.quantization.fakequant import dequantize_weight_groups, quantize_weight_groups
from ascend_backend.quantization.scheme import PlanScheme, QuantizedCheckpointError


@dataclass(frozen=True, eq=False)
class WeightOnlyLinear:
    """One weight-only layer: integer weight and its scales (float inputs at run time)."""

    scheme: PlanScheme  # W8A16 or W4A16
    weight: torch.Tensor  # [out, in] int8 holding values of `bits` bits
    scale: torch.Tensor  # [out, groups] float32
    group_size: int | None  # None = per channel

    @property
    def bits(self) -> int:
        return 4 if self.scheme is PlanScheme.W4A16 else 8

    def dequantized(self) -> torch.Tensor:
        return dequantize_weight_groups(self.weight, self.scale)

    def same_as(self, other: WeightOnlyLinear) -> bool:
        return (
            self.scheme is other.scheme
            and self.group_size == other.group_size
            and torch.equal(self.weight, other.weight)
            and self.scale.dtype == other.scale.dtype
            and torch.equal(self.scale, other.scale)
        )


def quantize_weight_only(
    weight: torch.Tensor, scheme: PlanScheme, group_size: int | None, scale_dtype: torch.dtype
) -> WeightOnlyLinear:
    if scheme not in (PlanScheme.W8A16, PlanScheme.W4A16):
        raise ValueError(f"weight-only schemes are W8A16 and W4A16, not {scheme.value}")
    group = None if scheme is PlanScheme.W8A16 else group_size
    q, scale = quantize_weight_groups(weight, scheme.weight_bits or 8, group, scale_dtype)
    return WeightOnlyLinear(scheme, q, scale, group)


def pack(q: torch.Tensor, bits: int) -> torch.Tensor:
    """[out, in] int8 signed -> [out, in * bits / 32] int32 (see the module docstring)."""
    per_word = 32 // bits
    if q.shape[1] % per_word:
        raise ValueError(f"input size {q.shape[1]} is not a multiple of {per_word} ({bits}-bit packing)")
    unsigned = (q.to(torch.int64) + (1 << (bits - 1))).reshape(q.shape[0], -1, per_word)  # [out, words, per_word]
    shifts = torch.arange(per_word, dtype=torch.int64) * bits
    words = (unsigned << shifts).sum(dim=-1)  # [out, words], in [0, 2**32)
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def unpack(packed: torch.Tensor, bits: int, in_features: int) -> torch.Tensor:
    """The inverse of `pack`: [out, words] int32 -> [out, in_features] int8 signed."""
    per_word = 32 // bits
    words = packed.to(torch.int64) % 2**32  # [out, words] unsigned
    shifts = torch.arange(per_word, dtype=torch.int64) * bits
    values = (words[..., None] >> shifts) & ((1 << bits) - 1)  # [out, words, per_word]
    return (values.reshape(packed.shape[0], -1)[:, :in_features] - (1 << (bits - 1))).to(torch.int8)


def pack_quantized_tensors(layers: Mapping[str, WeightOnlyLinear], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    out = {}
    for prefix, layer in layers.items():
        out[f"{prefix}.weight_packed"] = pack(layer.weight, layer.bits)
        out[f"{prefix}.weight_scale"] = layer.scale.to(dtype)
        out[f"{prefix}.weight_shape"] = torch.tensor(list(layer.weight.shape), dtype=torch.int64)
    return out


def pack_quantized_config(layers: Mapping[str, WeightOnlyLinear], float_linears: list[str]) -> dict[str, Any]:
    """config.json's quantization_config: one group per (bits, group size) present."""
    kinds = sorted({(layer.bits, layer.group_size or 0) for layer in layers.values()})
    groups = {}
    for i, (bits, group) in enumerate(kinds):
        members = sorted(p for p, layer in layers.items() if (layer.bits, layer.group_size or 0) == (bits, group))
        groups[f"group_{i}"] = {
            "targets": ["Linear"] if len(kinds) == 1 else members,
            "weights": {
                "num_bits": bits,
                "type": "int",
                "symmetric": True,
                "dynamic": False,
                "actorder": None,
                "strategy": "group" if group else "channel",
                "group_size": group or None,
            },
            "input_activations": None,
            "output_activations": None,
        }
    return {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "quantization_status": "compressed",
        "config_groups": groups,
        "ignore": ["lm_head", *sorted(float_linears)],
        "kv_cache_scheme": None,
    }


def read_pack_quantized(tensors: Mapping[str, torch.Tensor], config: Mapping[str, Any]) -> dict[str, WeightOnlyLinear]:
    """Layers back from pack-quantized tensors and their config (QuantizedCheckpointError naming the tensor)."""
    groups = (config.get("config_groups") or {}).values()
    layers = {}
    for name, packed in tensors.items():
        if not name.endswith(".weight_packed"):
            continue
        prefix = name[: -len(".weight_packed")]
        shape = tensors.get(f"{prefix}.weight_shape")
        scale = tensors.get(f"{prefix}.weight_scale")
        if shape is None or scale is None:
            raise QuantizedCheckpointError(f"{name} has no weight_shape / weight_scale beside it; re-export")
        group = next((g for g in groups if g["targets"] == ["Linear"] or prefix in g["targets"]), None)
        if group is None:
            raise QuantizedCheckpointError(f"{prefix}: no config group targets it")
        bits, size = group["weights"]["num_bits"], group["weights"].get("group_size")
        out_features, in_features = (int(v) for v in shape.tolist())
        weight = unpack(packed, bits, in_features)
        if weight.shape[0] != out_features:
            raise QuantizedCheckpointError(f"{name} holds {weight.shape[0]} rows, weight_shape says {out_features}")
        scheme = PlanScheme.W4A16 if bits == 4 else PlanScheme.W8A16
        layers[prefix] = WeightOnlyLinear(scheme, weight, scale.float(), size)
    return layers


def msmodelslim_w8a16_tensors(prefix: str, layer: WeightOnlyLinear, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """msmodelslim's W8A16 tensors of one layer (description entries: "W8A16" for each)."""
    if layer.scheme is not PlanScheme.W8A16:
        raise ValueError("msmodelslim holds dense weight-only layers as W8A16 only (vllm-ascend's W4A16 is MoE)")
    return {
        f"{prefix}.weight": layer.weight,
        f"{prefix}.weight_scale": layer.scale.to(dtype),
        f"{prefix}.weight_offset": torch.zeros(layer.weight.shape[0], 1, dtype=dtype),
    }


def read_msmodelslim_w8a16(prefix: str, tensors: Mapping[str, torch.Tensor]) -> WeightOnlyLinear:
    weight, scale = tensors[f"{prefix}.weight"], tensors[f"{prefix}.weight_scale"]
    offset = tensors.get(f"{prefix}.weight_offset")
    if weight.dtype != torch.int8 or (offset is not None and bool((offset != 0).any())):
        raise QuantizedCheckpointError(f"{prefix}: W8A16 needs an int8 weight and zero weight_offset")
    return WeightOnlyLinear(PlanScheme.W8A16, weight, scale.float(), None)
