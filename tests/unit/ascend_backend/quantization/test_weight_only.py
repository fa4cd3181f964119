"""Weight-only layers: the packing is vLLM's own, and both layouts round-trip bit for bit."""

from __future__ import annotations

import pytest
import torch

from ascend_backend.quantization.fakequant import fake_quant_weight
from ascend_backend.quantization.scheme import PlanScheme, QuantizedCheckpointError
from ascend_backend.quantization.weight_only import (
    msmodelslim_w8a16_tensors,
    pack,
    pack_quantized_config,
    pack_quantized_tensors,
    quantize_weight_only,
    read_msmodelslim_w8a16,
    read_pack_quantized,
    unpack,
)


def test_packing_worked_example():
    q = torch.tensor([[-8, 7, 0, 1, 0, 0, 0, 0]], dtype=torch.int8)
    assert int(pack(q, 4)) % 2**32 == 0x888898F0
    assert torch.equal(unpack(pack(q, 4), 4, 8), q)


@pytest.mark.parametrize("bits", [4, 8])
def test_packing_is_vllms(bits):
    """vLLM's pack_quantized_values_into_int32 on the unsigned values gives the same words (uint4b8 / uint8b128)."""
    from vllm.model_executor.layers.quantization.utils.quant_utils import pack_quantized_values_into_int32
    from vllm.scalar_type import scalar_types

    g = torch.Generator().manual_seed(bits)
    low, high = (-8, 8) if bits == 4 else (-127, 128)
    q = torch.randint(low, high, (6, 64), generator=g, dtype=torch.int8)
    kind = scalar_types.uint4b8 if bits == 4 else scalar_types.uint8b128
    theirs = pack_quantized_values_into_int32(q.int() + (1 << (bits - 1)), kind, packed_dim=1)
    assert torch.equal(pack(q, bits), theirs)
    assert torch.equal(unpack(theirs, bits, 64), q)


@pytest.mark.parametrize("scheme,group", [(PlanScheme.W4A16, 32), (PlanScheme.W8A16, None)])
def test_pack_quantized_round_trips_bit_for_bit(float_state, scheme, group):
    prefixes = ["model.layers.0.mlp.down_proj", "model.layers.1.self_attn.q_proj"]
    layers = {p: quantize_weight_only(float_state[f"{p}.weight"], scheme, group, torch.bfloat16) for p in prefixes}
    tensors = pack_quantized_tensors(layers, torch.bfloat16)
    config = pack_quantized_config(layers, ["model.layers.0.mlp.up_proj"])
    weights = config["config_groups"]["group_0"]["weights"]
    assert weights["num_bits"] == scheme.weight_bits and weights["strategy"] == ("group" if group else "channel")
    assert config["format"] == "pack-quantized" and "model.layers.0.mlp.up_proj" in config["ignore"]
    back = read_pack_quantized(tensors, config)
    assert all(back[p].same_as(layers[p]) for p in prefixes)
    # the served weights are what the executor's fake-quant computes with
    w = float_state[f"{prefixes[0]}.weight"]
    assert torch.equal(back[prefixes[0]].dequantized(), fake_quant_weight(w, scheme.weight_bits, group, torch.bfloat16))


def test_msmodelslim_w8a16_round_trips_and_refuses_w4a16(float_state):
    prefix = "model.layers.0.self_attn.o_proj"
    layer = quantize_weight_only(float_state[f"{prefix}.weight"], PlanScheme.W8A16, None, torch.bfloat16)
    tensors = msmodelslim_w8a16_tensors(prefix, layer, torch.bfloat16)
    assert tensors[f"{prefix}.weight_scale"].shape == (layer.weight.shape[0], 1)
    assert read_msmodelslim_w8a16(prefix, tensors).same_as(layer)
    four = quantize_weight_only(float_state[f"{prefix}.weight"], PlanScheme.W4A16, 32, torch.bfloat16)
    with pytest.raises(ValueError, match="MoE"):
        msmodelslim_w8a16_tensors(prefix, four, torch.bfloat16)
    tensors[f"{prefix}.weight_offset"] = torch.ones_like(tensors[f"{prefix}.weight_offset"])
    with pytest.raises(QuantizedCheckpointError, match="zero weight_offset"):
        read_msmodelslim_w8a16(prefix, tensors)
