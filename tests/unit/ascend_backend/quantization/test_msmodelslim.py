"""msmodelslim layout: round trips, the description file, the tensor table vllm-ascend loads, clear errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from ascend_backend.quantization import (
    QuantFormat,
    QuantizedCheckpointError,
    QuantizedModel,
    QuantType,
    checkpoint_format,
    msmodelslim,
    read_checkpoint,
)
from ascend_backend.quantization.arithmetic import unpack_deq_scale

from .conftest import CONFIG


def write_copy(model: QuantizedModel, path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    msmodelslim.write(model, path)
    return path


def assert_same_model(a: QuantizedModel, b: QuantizedModel) -> None:
    assert a.dtype == b.dtype
    assert sorted(a.linears) == sorted(b.linears)
    for prefix in a.linears:
        assert a.linears[prefix].same_as(b.linears[prefix]), prefix
    assert sorted(a.floats) == sorted(b.floats)
    for name, tensor in a.floats.items():
        assert tensor.dtype == b.floats[name].dtype and torch.equal(tensor, b.floats[name]), name


def test_round_trip_is_bit_exact(mixed_model, tmp_path):
    path = write_copy(mixed_model, tmp_path / "ckpt")
    assert checkpoint_format(path) is QuantFormat.MSMODELSLIM
    back = read_checkpoint(path)
    assert_same_model(mixed_model, back)
    # and writing what was read gives the same files' contents again
    again = write_copy(back, tmp_path / "again")
    name = msmodelslim.weight_file_name(mixed_model)
    first, second = (load_file(str(p / name)) for p in (path, again))
    assert sorted(first) == sorted(second) and all(torch.equal(first[k], second[k]) for k in first)


def test_description_marks_every_tensor_with_mixed_types(mixed_model, tmp_path):
    path = write_copy(mixed_model, tmp_path / "ckpt")
    description = json.loads((path / msmodelslim.DESCRIPTION_FILE).read_text())
    assert msmodelslim.weight_file_name(mixed_model) == "quant_model_weight_w8a8_dynamic.safetensors"
    tensors = load_file(str(path / msmodelslim.weight_file_name(mixed_model)))
    assert set(description) - {"model_quant_type", "version"} == set(tensors)
    assert description["model_quant_type"] == "W8A8_DYNAMIC"  # 7 dynamic projections outnumber 4 static
    kinds = {name: kind for name, kind in description.items() if name.endswith(".weight")}
    assert kinds["model.layers.0.self_attn.q_proj.weight"] == "W8A8"
    assert kinds["model.layers.0.mlp.down_proj.weight"] == "FLOAT"
    assert kinds["model.layers.1.mlp.down_proj.weight"] == "W8A8_DYNAMIC"
    assert kinds["model.embed_tokens.weight"] == "FLOAT" and kinds["lm_head.weight"] == "FLOAT"
    for name in ("input_scale", "input_offset", "quant_bias", "deq_scale", "weight_scale", "weight_offset"):
        assert description[f"model.layers.0.self_attn.o_proj.{name}"] == "W8A8"
    assert "model.layers.1.self_attn.o_proj.deq_scale" not in description
    assert tensors["model.layers.0.mlp.down_proj.weight"].dtype == torch.bfloat16


def test_model_quant_type_is_the_majority_scheme(mixed_model):
    # layer 0: 4 static attention projections (its MLP is FLOAT); layer 1: 7 dynamic projections
    assert msmodelslim.model_quant_type(mixed_model) is QuantType.W8A8_DYNAMIC


@pytest.mark.parametrize("dtype,deq_dtype", [(torch.bfloat16, torch.float32), (torch.float16, torch.int64)])
def test_tensor_table_is_what_vllm_ascend_creates(float_state, ranges, dtype, deq_dtype):
    from ascend_backend.quantization import linear_prefixes, plan_layers, quantize_model

    model = quantize_model(float_state, plan_layers(linear_prefixes(list(float_state)), QuantType.W8A8), dtype, ranges)
    tensors, _ = msmodelslim.to_tensors(model)
    p = "model.layers.1.mlp.gate_proj"
    out, inp = 160, 64
    expected = {  # w8a8_static.py get_weight / get_pertensor_param / get_perchannel_param (vllm-ascend v0.23.0)
        "weight": (torch.int8, (out, inp)),
        "weight_scale": (dtype, (out, 1)),
        "weight_offset": (dtype, (out, 1)),
        "input_scale": (dtype, (1,)),
        "input_offset": (torch.int8, (1,)),
        "quant_bias": (torch.int32, (out,)),
        "deq_scale": (deq_dtype, (out,)),
    }
    for leaf, (want_dtype, shape) in expected.items():
        t = tensors[f"{p}.{leaf}"]
        assert (t.dtype, tuple(t.shape)) == (want_dtype, shape), leaf
    deq = tensors[f"{p}.deq_scale"]
    deq = unpack_deq_scale(deq) if deq.dtype == torch.int64 else deq
    # deq_scale = input_scale * weight_scale, both as stored
    expected_deq = tensors[f"{p}.input_scale"].float() * tensors[f"{p}.weight_scale"].float().flatten()
    assert torch.equal(deq, expected_deq)
    # gate and up read one input: vLLM fuses them into one layer with one input scale
    assert torch.equal(tensors[f"{p}.input_scale"], tensors["model.layers.1.mlp.up_proj.input_scale"])


def test_float32_models_are_refused_with_the_fix(float_state, ranges):
    from ascend_backend.quantization import linear_prefixes, plan_layers, quantize_model

    model = quantize_model(
        float_state, plan_layers(linear_prefixes(list(float_state)), QuantType.W8A8_DYNAMIC), torch.float32
    )
    with pytest.raises(ValueError, match="bf16 or fp16"):
        msmodelslim.to_tensors(model)


# ----------------------------------------------------------------------------- disagreements
def edited(mixed_model, tmp_path: Path, edit) -> Path:
    path = write_copy(mixed_model, tmp_path / "broken")
    weights = path / msmodelslim.weight_file_name(mixed_model)
    desc = path / msmodelslim.DESCRIPTION_FILE
    tensors, description = load_file(str(weights)), json.loads(desc.read_text())
    edit(tensors, description)
    save_file(tensors, str(weights))
    desc.write_text(json.dumps(description))
    return path


def remove_deq_scale(tensors, description):
    del tensors["model.layers.0.self_attn.k_proj.deq_scale"]


def relabel_dynamic_as_static(tensors, description):
    for name in list(description):
        if name.startswith("model.layers.0.self_attn.v_proj."):
            description[name] = "W8A8_DYNAMIC"


def float_entry_for_int8(tensors, description):
    for name in list(description):
        if name.startswith("model.layers.1.self_attn.q_proj."):
            description[name] = "FLOAT"


def entry_without_tensor(tensors, description):
    description["model.layers.1.mlp.up_proj.deq_scale"] = "W8A8_DYNAMIC"


def tensor_without_entry(tensors, description):
    del description["model.norm.weight"]


def wrong_deq_dtype(tensors, description):
    tensors["model.layers.0.self_attn.o_proj.deq_scale"] = tensors["model.layers.0.self_attn.o_proj.deq_scale"].half()


def unknown_scheme(tensors, description):
    description["model.layers.1.mlp.down_proj.weight"] = "W4A8_DYNAMIC"


# msmodelslim v1 stores input_offset as float32 (test_msmodelslim_v1.py); vllm-ascend copies it into an
# int8 parameter, which would truncate a fraction or wrap a value outside int8 silently
def fractional_input_offset(tensors, description):
    tensors["model.layers.0.self_attn.k_proj.input_offset"] = torch.tensor([2.5])


def input_offset_outside_int8(tensors, description):
    tensors["model.layers.0.self_attn.k_proj.input_offset"] = torch.tensor([300.0])


def object_entry_for_a_tensor(tensors, description):
    # objects are model-level keys in v1 ("metadata", "optional"); under a tensor's name one is no type
    description["model.norm.weight"] = {"type": "FLOAT"}


def dynamic_layer_without_weight_scale(tensors, description):
    # static layers may lack weight_scale (v1), dynamic ones compute with it
    del tensors["model.layers.1.mlp.up_proj.weight_scale"], description["model.layers.1.mlp.up_proj.weight_scale"]


@pytest.mark.parametrize(
    "edit,names",
    [
        (remove_deq_scale, "k_proj.deq_scale is described as W8A8 but no weights file holds it (and 1 more"),
        (relabel_dynamic_as_static, "W8A8_DYNAMIC but holds static tensors"),
        (float_entry_for_int8, "model.layers.1.self_attn.q_proj.weight is FLOAT but stored as torch.int8"),
        (entry_without_tensor, "model.layers.1.mlp.up_proj.deq_scale is described as W8A8_DYNAMIC but no weights"),
        (tensor_without_entry, "model.norm.weight (in quant_model_weight_w8a8_dynamic.safetensors) has no entry"),
        (wrong_deq_dtype, "model.layers.0.self_attn.o_proj.deq_scale is torch.float16, expected"),
        (unknown_scheme, "has type 'W4A8_DYNAMIC'"),
        (fractional_input_offset, "model.layers.0.self_attn.k_proj.input_offset holds 2.5, not an int8 integer"),
        (input_offset_outside_int8, "model.layers.0.self_attn.k_proj.input_offset holds 300.0, not an int8 integer"),
        (object_entry_for_a_tensor, "model.norm.weight has type {'type': 'FLOAT'}"),
        (dynamic_layer_without_weight_scale, "W8A8_DYNAMIC but lacks model.layers.1.mlp.up_proj.weight_scale"),
    ],
)
def test_description_and_tensors_that_disagree_give_one_clear_error(mixed_model, tmp_path, edit, names):
    path = edited(mixed_model, tmp_path, edit)
    with pytest.raises(QuantizedCheckpointError) as info:
        read_checkpoint(path)
    message = str(info.value)
    assert names in message
    assert message.startswith(str(path / msmodelslim.DESCRIPTION_FILE)) and "re-export the checkpoint" in message
    assert "\n" not in message


def test_malformed_description_json_is_one_error(mixed_model, tmp_path):
    path = write_copy(mixed_model, tmp_path / "ckpt")
    (path / msmodelslim.DESCRIPTION_FILE).write_text("{not json")
    with pytest.raises(QuantizedCheckpointError, match="is not valid JSON"):
        read_checkpoint(path)


def test_a_float_directory_is_not_read_as_quantized(float_dir, tmp_path):
    copy = tmp_path / "float"
    shutil.copytree(float_dir, copy)
    assert checkpoint_format(copy) is None
    with pytest.raises(QuantizedCheckpointError, match="not a quantized checkpoint"):
        read_checkpoint(copy)


# ----------------------------------------------------------------------------- tied embeddings
def vllm_asked_prefixes(config: dict) -> list[str]:
    """Every layer vLLM's LlamaForCausalLM (vllm/model_executor/models/llama.py, vLLM 0.32) hands to the
    quantization config: the decoder projections (qkv_proj and gate_up_proj asked per shard), the
    embedding and the lm_head, which is built with the quant config before it is tied to the embedding.
    vllm-ascend answers each with `quant_description[prefix + ".weight"]` (modelslim_config.py,
    `get_linear_quant_type` / `is_layer_skipped_ascend`, v0.18.0 and later; quant_config.py before)."""
    layers = [
        f"model.layers.{i}.{leaf}"
        for i in range(config["num_hidden_layers"])
        for leaf in (
            *(f"self_attn.{p}_proj" for p in "qkvo"),
            *(f"mlp.{p}_proj" for p in ("gate", "up", "down")),
        )
    ]
    return ["model.embed_tokens", *layers, "lm_head"]


@pytest.fixture
def tied_model(float_state):
    """The test Llama as a tied model stores it: no lm_head.weight tensor (tiny and SmolLM2 are like this)."""
    from ascend_backend.quantization import linear_prefixes, plan_layers, quantize_model

    state = {k: v for k, v in float_state.items() if k != "lm_head.weight"}
    plan = plan_layers(linear_prefixes(list(state)), QuantType.W8A8_DYNAMIC)
    return quantize_model(state, plan, torch.bfloat16, tied_embeddings=True)


def write_with_config(model: QuantizedModel, path: Path, tied: bool) -> Path:
    write_copy(model, path)
    (path / "config.json").write_text(json.dumps({**CONFIG, "tie_word_embeddings": tied}))
    return path


def test_a_tied_model_describes_every_layer_vllm_asks_about(tied_model, tmp_path):
    path = write_with_config(tied_model, tmp_path / "tied", tied=True)
    description = msmodelslim.read_description(path)
    missing = [p for p in vllm_asked_prefixes(CONFIG) if f"{p}.weight" not in description]
    assert missing == []
    assert description["lm_head.weight"] == "FLOAT"
    # only the entry: vLLM ties the head to model.embed_tokens and loads no lm_head tensor
    assert "lm_head.weight" not in load_file(str(path / msmodelslim.weight_file_name(tied_model)))


def test_a_tied_description_reads_back_and_writes_the_same_description(tied_model, tmp_path):
    path = write_with_config(tied_model, tmp_path / "tied", tied=True)
    back = read_checkpoint(path)
    assert back.tied_embeddings and "lm_head.weight" not in back.floats
    assert_same_model(tied_model, back)
    again = write_copy(back, tmp_path / "again")
    assert msmodelslim.read_description(again) == msmodelslim.read_description(path)


def test_a_described_head_without_tensor_in_an_untied_model_names_the_fix(tied_model, tmp_path):
    path = write_with_config(tied_model, tmp_path / "untied", tied=False)
    with pytest.raises(QuantizedCheckpointError) as info:
        read_checkpoint(path)
    message = str(info.value)
    assert "lm_head.weight is described as FLOAT but no weights file holds it" in message
    assert "tie_word_embeddings" in message and "\n" not in message
