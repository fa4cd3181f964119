"""compressed-tensors W8A8 int8: round trips, and the config vLLM 0.32's own parser turns into its int8 scheme."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from ascend_backend.quantization import (
    QuantFormat,
    QuantizedCheckpointError,
    QuantType,
    checkpoint_format,
    compressed_tensors,
    linear_prefixes,
    plan_layers,
    quantize_model,
    read_checkpoint,
)

from .conftest import CONFIG
from .test_msmodelslim import assert_same_model


@pytest.fixture(params=[QuantType.W8A8, QuantType.W8A8_DYNAMIC])
def uniform_model(request, float_state, ranges):
    plan = plan_layers(linear_prefixes(list(float_state)), request.param, keep_float=["model.layers.1.mlp.down_proj"])
    return quantize_model(float_state, plan, torch.bfloat16, ranges)


def write(model, path, float_linears=("model.layers.1.mlp.down_proj",)):
    path.mkdir()
    compressed_tensors.write(model, path, CONFIG, list(float_linears))
    return path


def test_round_trip_is_bit_exact(uniform_model, tmp_path):
    path = write(uniform_model, tmp_path / "ckpt")
    assert checkpoint_format(path) is QuantFormat.COMPRESSED_TENSORS
    assert_same_model(uniform_model, read_checkpoint(path))


def test_mixed_schemes_round_trip(mixed_model, tmp_path):
    floats = [p for p in linear_prefixes(list(mixed_model.floats)) if f"{p}.weight" in mixed_model.floats]
    path = write(mixed_model, tmp_path / "ckpt", floats)
    config = json.loads((path / "config.json").read_text())["quantization_config"]
    assert len(config["config_groups"]) == 2  # one group per scheme, layers listed by name
    # mixed_model is calibrated asymmetrically on purpose: the config says so and the zero points are
    # written, which vLLM's CPU backend serves (vllm-ascend would refuse it; see the test below)
    static = next(g for g in config["config_groups"].values() if not g["input_activations"]["dynamic"])
    assert static["input_activations"]["symmetric"] is False
    assert "model.layers.0.self_attn.q_proj.input_zero_point" in load_file(str(path / compressed_tensors.WEIGHT_FILE))
    assert_same_model(mixed_model, read_checkpoint(path))


def test_static_output_is_symmetric_as_vllm_ascend_requires(float_state, ranges, tmp_path):
    # vllm-ascend maps a static compressed-tensors group to its W8A8 method only when weights and inputs
    # are both symmetric (`_is_static_tensor_w8a8`: vllm_ascend/quantization/compressed_tensors/
    # compressed_tensors.py, v0.12.0rc1:244-256 and v0.13.0:244-256; compressed_tensors_config.py,
    # v0.23.0:380-389), and its static kernel adds the float bias where a zero-point correction would go
    # (w8a8.py, v0.13.0: `quant_bias = bias` for compressed-tensors). vLLM's CPU backend takes either.
    model = quantize_model(
        float_state, plan_layers(linear_prefixes(list(float_state)), QuantType.W8A8), torch.bfloat16, ranges
    )
    path = write(model, tmp_path / "ckpt", float_linears=())
    config = json.loads((path / "config.json").read_text())["quantization_config"]
    for group in config["config_groups"].values():
        weights, inputs = group["weights"], group["input_activations"]
        assert (weights["num_bits"], inputs["num_bits"]) == (8, 8)
        assert (weights["strategy"], inputs["strategy"]) == ("channel", "tensor")
        assert weights["symmetric"] is True and inputs["symmetric"] is True
        assert weights["dynamic"] is False and inputs["dynamic"] is False
    tensors = load_file(str(path / compressed_tensors.WEIGHT_FILE))
    assert [n for n in tensors if n.endswith(".input_zero_point")] == []
    assert {layer.input_offset for layer in model.linears.values()} == {0}
    assert_same_model(model, read_checkpoint(path))


def test_tensors_are_what_the_int8_scheme_creates(uniform_model, tmp_path):
    path = write(uniform_model, tmp_path / "ckpt")
    tensors = load_file(str(path / compressed_tensors.WEIGHT_FILE))
    p = "model.layers.0.self_attn.q_proj"
    # schemes/compressed_tensors_w8a8_int8.py create_weights (vLLM 0.32)
    assert (tensors[f"{p}.weight"].dtype, tuple(tensors[f"{p}.weight"].shape)) == (torch.int8, (64, 64))
    assert (tensors[f"{p}.weight_scale"].dtype, tuple(tensors[f"{p}.weight_scale"].shape)) == (torch.float32, (64, 1))
    static = uniform_model.linears[p].quant_type is QuantType.W8A8
    assert (f"{p}.input_scale" in tensors) == static
    assert f"{p}.input_zero_point" not in tensors  # symmetric inputs: vLLM creates no zero point to load
    if static:
        assert tensors[f"{p}.input_scale"].dtype == torch.float32
    assert tensors["model.layers.1.mlp.down_proj.weight"].dtype == torch.bfloat16  # kept float


def test_vllm_parses_the_config_into_its_int8_w8a8_scheme(uniform_model, tmp_path):
    pytest.importorskip("vllm")
    from compressed_tensors.quantization import QuantizationConfig
    from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import CompressedTensorsConfig

    path = write(uniform_model, tmp_path / "ckpt")
    raw = json.loads((path / "config.json").read_text())["quantization_config"]
    QuantizationConfig.model_validate(raw)  # the compressed-tensors library accepts it
    config = CompressedTensorsConfig.from_config(raw)
    args = config.target_scheme_map["Linear"]
    weights, inputs = args["weights"], args["input_activations"]
    if next(iter(uniform_model.linears.values())).quant_type is QuantType.W8A8:
        assert config._is_static_tensor_w8a8(weights, inputs) and inputs.symmetric
    else:
        assert config._is_dynamic_token_w8a8(weights, inputs) and inputs.symmetric
    assert config.ignore == ["lm_head", "model.layers.1.mlp.down_proj"]


def test_input_scale_against_a_dynamic_config_is_one_clear_error(uniform_model, tmp_path):
    path = write(uniform_model, tmp_path / "ckpt")
    weights = path / compressed_tensors.WEIGHT_FILE
    tensors = load_file(str(weights))
    p = "model.layers.0.self_attn.o_proj"
    if f"{p}.input_scale" in tensors:
        del tensors[f"{p}.input_scale"]
        expected = f"{p} lacks input_scale but config.json's quantization_config says its inputs are static"
    else:
        tensors[f"{p}.input_scale"] = torch.ones(1)
        expected = f"{p} has input_scale but config.json's quantization_config says its inputs are dynamic"
    save_file(tensors, str(weights))
    with pytest.raises(QuantizedCheckpointError, match=expected):
        read_checkpoint(path)


def test_other_schemes_are_refused(uniform_model, tmp_path):
    path = write(uniform_model, tmp_path / "ckpt")
    config = json.loads((path / "config.json").read_text())
    config["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"] = 4
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(QuantizedCheckpointError, match="config_groups.group_0 is not W8A8 int8"):
        read_checkpoint(path)


def test_a_wrong_scale_shape_is_a_checkpoint_error(uniform_model, tmp_path):
    path = write(uniform_model, tmp_path / "ckpt")
    weights = path / compressed_tensors.WEIGHT_FILE
    tensors = load_file(str(weights))
    tensors["model.layers.0.mlp.up_proj.weight_scale"] = torch.ones(7, 1)
    save_file(tensors, str(weights))
    with pytest.raises(QuantizedCheckpointError, match="weight_scale must be"):
        read_checkpoint(path)
