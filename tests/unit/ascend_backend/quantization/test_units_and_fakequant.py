"""Rollback units and the fake-quant arithmetic, against worked examples and float64 formulas."""

from __future__ import annotations

import pytest
import torch

from ascend_backend.quantization import linear_prefixes
from ascend_backend.quantization.fakequant import (
    FakeQuantLinear,
    dequantize_weight_groups,
    fake_quant_kv,
    fake_quant_per_token,
    kv_channel_scale,
    quantize_weight_groups,
)
from ascend_backend.quantization.units import UNIT_KINDS, expand, rollback_units, unit_of


def test_units_group_the_fused_members_per_layer(float_state):
    units = rollback_units(linear_prefixes(list(float_state)))
    assert [u.name for u in units[:4]] == [f"model.layers.0.{kind}" for kind in UNIT_KINDS]
    assert len(units) == 8
    qkv = units[0]
    assert qkv.members == tuple(f"model.layers.0.self_attn.{p}_proj" for p in "qkv")
    assert units[2].members == ("model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj")
    assert unit_of(units)["model.layers.1.mlp.down_proj"].name == "model.layers.1.down"
    plan = expand({"model.layers.1.gate_up": "FLOAT"}, units)
    assert plan == {"model.layers.1.mlp.gate_proj": "FLOAT", "model.layers.1.mlp.up_proj": "FLOAT"}
    with pytest.raises(KeyError, match="unknown rollback unit 'model.layers.9.o'"):
        expand({"model.layers.9.o": "FLOAT"}, units)
    with pytest.raises(ValueError, match="not a decoder projection"):
        rollback_units(["lm_head"])


def test_int4_groups_worked_example():
    weight = torch.tensor([[0.7, -1.4, 0.0, 0.0]])
    q, scale = quantize_weight_groups(weight, 4, 2)
    assert torch.allclose(scale, torch.tensor([[0.2, 1.0]]))
    assert q.tolist() == [[4, -7, 0, 0]]  # 0.7 / 0.2 = 3.5 rounds half to even -> 4
    assert torch.allclose(dequantize_weight_groups(q, scale), torch.tensor([[0.8, -1.4, 0.0, 0.0]]))


@pytest.mark.parametrize("bits,group_size", [(8, None), (4, 32), (4, None)])
def test_weight_groups_match_a_float64_formula(bits, group_size):
    g = torch.Generator().manual_seed(bits)
    weight = torch.randn(6, 64, generator=g, dtype=torch.float64)
    weight[2] = 0.0  # an all-zero row keeps scale 1 and values 0
    q, scale = quantize_weight_groups(weight, bits, group_size)
    size = group_size or 64
    qmax = 127 if bits == 8 else 7
    qmin = -127 if bits == 8 else -8
    grouped = weight.reshape(6, 64 // size, size)
    expected_scale = grouped.abs().amax(-1) / qmax
    expected_scale[expected_scale == 0] = 1.0
    assert torch.allclose(scale.double(), expected_scale, rtol=1e-6)
    expected_q = torch.round(grouped / scale.double()[..., None]).clamp(qmin, qmax).reshape(6, 64)
    assert torch.equal(q.double(), expected_q)
    assert int(q.min()) >= qmin and int(q.max()) <= qmax
    assert torch.equal(q[2], torch.zeros(64, dtype=torch.int8))


def test_group_size_must_divide_the_input():
    with pytest.raises(ValueError, match="must divide the input size 64"):
        quantize_weight_groups(torch.ones(2, 64), 4, 48)


def test_per_token_fake_quant_keeps_each_tokens_max():
    x = torch.tensor([[1.0, -0.5, 0.25], [0.0, 0.0, 0.0], [100.0, 1.0, -3.0]])
    y = fake_quant_per_token(x)
    assert torch.equal(y[:, 0].abs(), x[:, 0].abs())  # the max of each token is exact
    assert torch.equal(y[1], x[1])
    assert (y - x).abs().max() <= 100.0 / 127 / 2 + 1e-6  # half a step of the outlier token


def test_kv_fake_quant_is_half_a_step_at_most():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(10, 2, 8, generator=g)
    scale = kv_channel_scale(x.abs().amax(dim=0))
    y = fake_quant_kv(x, scale)
    assert ((y - x).abs() <= scale / 2 + 1e-7).all()
    assert torch.allclose(y.abs().amax(dim=0), x.abs().amax(dim=0))


def test_fake_quant_linear_is_the_float_linear_of_the_rounded_weight():
    g = torch.Generator().manual_seed(2)
    weight, bias, x = torch.randn(8, 32, generator=g), torch.randn(8, generator=g), torch.randn(5, 32, generator=g)
    module = FakeQuantLinear(weight, bias, 4, 16)
    w = dequantize_weight_groups(*quantize_weight_groups(weight, 4, 16))
    assert torch.allclose(module(x), x @ w.T + bias, atol=1e-5)
    w8a = FakeQuantLinear(weight, None, 8, None, int8_inputs=True)
    assert torch.allclose(w8a(x), fake_quant_per_token(x) @ w8a.weight.T, atol=1e-5)
