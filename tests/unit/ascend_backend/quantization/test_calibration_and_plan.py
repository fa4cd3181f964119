"""Observers, layer plans and fused groups."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ascend_backend.quantization import QuantType, linear_prefixes, observe_linear_inputs, plan_layers, quantize_model
from ascend_backend.quantization.calibration import ActivationRange, RangeObserver


def test_observers_see_each_layers_input_and_unhook_afterwards():
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    with observe_linear_inputs(model, ["0", "2"]) as observers:
        model(torch.tensor([[1.0, -2.0, 3.0, 0.5], [0.0, 0.0, 0.0, 4.0]]))
    first = observers["0"].result()
    assert (first.minimum, first.maximum, first.tokens) == (-2.0, 4.0, 2)
    assert observers["2"].result().minimum >= 0.0  # after the ReLU
    model(torch.zeros(1, 4))
    assert observers["0"].result().tokens == 2  # hooks were removed
    assert not model[0]._forward_pre_hooks


def test_observer_refuses_nan_and_unvisited_layers():
    observer = RangeObserver("model.layers.0.mlp.down_proj")
    with pytest.raises(ValueError, match="saw no calibration input"):
        observer.result()
    with pytest.raises(ValueError, match="holds NaN or Inf"):
        observer.observe(torch.tensor([1.0, float("nan")]))


def test_ranges_of_one_fused_group_are_identical(ranges):
    for layer in range(2):
        qkv = {ranges[f"model.layers.{layer}.self_attn.{p}_proj"] for p in "qkv"}
        gate_up = {ranges[f"model.layers.{layer}.mlp.{p}_proj"] for p in ("gate", "up")}
        assert len(qkv) == 1 and len(gate_up) == 1


def test_linear_prefixes_take_decoder_projections_only(float_state):
    prefixes = linear_prefixes(list(float_state))
    assert len(prefixes) == 14 and "lm_head" not in prefixes
    assert all(".layers." in p and p.endswith("_proj") for p in prefixes)


def test_keep_float_spreads_to_the_fused_group_and_must_match(float_state):
    prefixes = linear_prefixes(list(float_state))
    plan = plan_layers(prefixes, QuantType.W8A8_DYNAMIC, keep_float=["*.layers.0.self_attn.k_proj"])
    assert {p for p, kind in plan.items() if kind is QuantType.FLOAT} == {
        f"model.layers.0.self_attn.{x}_proj" for x in "qkv"
    }
    with pytest.raises(ValueError, match="matches no linear layer"):
        plan_layers(prefixes, QuantType.W8A8, keep_float=["*.layers.9.*"])


def test_static_layers_without_a_range_are_an_error(float_state):
    plan = plan_layers(linear_prefixes(list(float_state)), QuantType.W8A8)
    with pytest.raises(ValueError, match="has no calibration range"):
        quantize_model(float_state, plan, torch.bfloat16, {})


def test_group_members_share_static_input_parameters(float_state):
    plan = plan_layers(linear_prefixes(list(float_state)), QuantType.W8A8)
    ranges = {p: ActivationRange(-1.0 - i, 1.0 + i, 4) for i, p in enumerate(plan)}  # deliberately different
    model = quantize_model(float_state, plan, torch.bfloat16, ranges)
    q, k, v = (model.linears[f"model.layers.0.self_attn.{x}_proj"] for x in "qkv")
    assert float(q.input_scale) == float(k.input_scale) == float(v.input_scale)
    assert q.input_offset == k.input_offset == v.input_offset
