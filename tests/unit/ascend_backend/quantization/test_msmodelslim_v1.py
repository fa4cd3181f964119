"""Genuine msmodelslim v1 output reads as vllm-ascend loads it (the refusals are in test_msmodelslim.py).

The v1 saver (tests/fixtures/msmodelslim_v1/SOURCES.md) differs from what our writer makes in three ways
that vllm-ascend accepts: object values (`"metadata": {}`, `"optional": {}`) and an int `group_size`
among the description's keys, static W8A8 layers without weight_scale / weight_offset, and a float32
input_offset. The fixture's description is real in layout; its tensors are built here in the saver's
dtypes and shapes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from ascend_backend.models import Executor, SamplingParams
from ascend_backend.models.config import ModelConfig
from ascend_backend.models.layers import CausalLM
from ascend_backend.models.quantized import quantized_module
from ascend_backend.quantization import QuantType, msmodelslim, read_checkpoint
from ascend_backend.quantization.arithmetic import representable
from tests.conftest import REPO_ROOT

from .test_msmodelslim import edited

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "msmodelslim_v1"
# One (input_scale, input_offset) per input a layer reads: q/k/v share the attention input. Values are
# bf16-exact, as a bf16 model's vllm-ascend parameters hold them.
STATIC_INPUTS = {"qkv": (0.046875, 3.0), "o_proj": (0.0234375, -5.0)}


def v1_tensors(description: dict, config: dict, seed: int = 0) -> dict[str, torch.Tensor]:
    """A tensor for every string entry of `description`, in the dtypes and shapes AscendV1Saver writes."""
    g = torch.Generator().manual_seed(seed)
    with torch.device("meta"):
        shapes = {n: tuple(p.shape) for n, p in CausalLM(ModelConfig.from_dict(config)).named_parameters()}
    entries = {k: v for k, v in description.items() if isinstance(v, str) and k not in msmodelslim.METADATA_KEYS}
    tensors: dict[str, torch.Tensor] = {}
    for name, kind in entries.items():
        prefix, _, leaf = name.rpartition(".")
        if kind == "FLOAT" and not (leaf == "bias" and entries.get(f"{prefix}.weight") == "W8A8"):
            base = 1.0 if name.endswith("norm.weight") else 0.0
            tensors[name] = (base + 0.1 * torch.randn(shapes[name], generator=g)).to(torch.bfloat16)
        elif leaf == "weight" and kind == "W8A8":
            tensors.update(static_layer(prefix, shapes[name], bool(f"{prefix}.bias" in entries), g))
        elif leaf == "weight" and kind == "W8A8_DYNAMIC":
            out, inp = shapes[name]
            scale = representable(0.002 + 0.01 * torch.rand(out, 1, generator=g), torch.bfloat16)
            tensors[name] = torch.randint(-127, 128, (out, inp), generator=g, dtype=torch.int8)
            tensors[f"{prefix}.weight_scale"] = scale  # float32 [out, 1]
            tensors[f"{prefix}.weight_offset"] = torch.zeros(out, 1)  # float32 zeros
    return tensors


def static_layer(prefix: str, shape: tuple[int, int], has_bias: bool, g: torch.Generator) -> dict[str, torch.Tensor]:
    """on_w8a8_static's tensors: deq_scale = input_scale * weight_scale, quant_bias folds the bias and offset."""
    out, inp = shape
    input_scale, input_offset = STATIC_INPUTS["o_proj" if prefix.endswith("o_proj") else "qkv"]
    weight = torch.randint(-127, 128, (out, inp), generator=g, dtype=torch.int8)
    weight_scale = 0.002 + 0.01 * torch.rand(out, generator=g)  # not stored: v1 writes only deq_scale
    deq_scale = (torch.tensor(input_scale) * weight_scale).float()  # [out] float32 (bf16 model)
    bias = 0.1 * torch.randn(out, generator=g) if has_bias else torch.zeros(out)
    quant_bias = torch.round(bias / deq_scale - weight.float().sum(dim=1) * input_offset).to(torch.int32)
    tensors = {
        f"{prefix}.weight": weight,
        f"{prefix}.quant_bias": quant_bias,
        f"{prefix}.input_scale": torch.tensor([input_scale]),  # float32 [1]
        f"{prefix}.input_offset": torch.tensor([input_offset]),  # float32 [1]
        f"{prefix}.deq_scale": deq_scale,
    }
    if has_bias:
        tensors[f"{prefix}.bias"] = bias  # float32, a FLOAT entry
    return tensors


@pytest.fixture(scope="module")
def v1_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("msmodelslim-v1")
    for name in ("config.json", msmodelslim.DESCRIPTION_FILE):
        shutil.copy(FIXTURE / name, path / name)
    description = json.loads((FIXTURE / msmodelslim.DESCRIPTION_FILE).read_text())
    config = json.loads((FIXTURE / "config.json").read_text())
    save_file(v1_tensors(description, config), str(path / "quant_model_weights.safetensors"))
    return path


def test_the_fixture_has_the_v1_traits(v1_dir):
    description = json.loads((v1_dir / msmodelslim.DESCRIPTION_FILE).read_text())
    assert description["metadata"] == {} and description["optional"] == {} and description["group_size"] == 0
    tensors = load_file(str(v1_dir / "quant_model_weights.safetensors"))
    q = "model.layers.0.self_attn.q_proj"
    assert f"{q}.weight_scale" not in tensors and f"{q}.weight_offset" not in tensors
    assert tensors[f"{q}.input_offset"].dtype == torch.float32 and tensors[f"{q}.bias"].dtype == torch.float32


def test_a_genuine_v1_checkpoint_reads_with_its_stored_arithmetic(v1_dir):
    model = read_checkpoint(v1_dir)
    tensors = load_file(str(v1_dir / "quant_model_weights.safetensors"))
    q = "model.layers.0.self_attn.q_proj"
    layer = model.linears[q]
    assert layer.quant_type is QuantType.W8A8 and layer.input_offset == 3
    assert model.linears["model.layers.0.self_attn.o_proj"].input_offset == -5
    assert torch.equal(layer.static_deq_scale(), tensors[f"{q}.deq_scale"])
    assert torch.equal(layer.static_quant_bias(), tensors[f"{q}.quant_bias"])
    # weight_scale is recovered from deq_scale = input_scale * weight_scale (v1 does not store it)
    recovered = layer.weight_scale * float(tensors[f"{q}.input_scale"])
    torch.testing.assert_close(recovered, tensors[f"{q}.deq_scale"], rtol=1e-6, atol=0)
    down = model.linears["model.layers.0.mlp.down_proj"]
    assert down.quant_type is QuantType.W8A8_DYNAMIC
    assert torch.equal(down.weight_scale, tensors["model.layers.0.mlp.down_proj.weight_scale"].flatten())
    assert "lm_head.weight" in model.floats and not model.tied_embeddings


def test_a_v1_static_layer_computes_what_vllm_ascend_computes(v1_dir):
    # vllm-ascend's static apply: x_q = npu_quantize(x, 1/input_scale, input_offset), then
    # npu_quant_matmul(x_q, weight, deq_scale, bias=quant_bias) (w8a8_static.py, v0.23.0), from the
    # stored tensors alone: no weight_scale takes part.
    tensors = load_file(str(v1_dir / "quant_model_weights.safetensors"))
    q = "model.layers.0.self_attn.q_proj"
    x = torch.randn(5, 64, generator=torch.Generator().manual_seed(3))
    scale, offset = float(tensors[f"{q}.input_scale"]), float(tensors[f"{q}.input_offset"])
    x_q = torch.round(x * (1.0 / scale) + offset).clamp(-128, 127).double()
    acc = x_q @ tensors[f"{q}.weight"].double().t()
    expected = (acc + tensors[f"{q}.quant_bias"].double()) * tensors[f"{q}.deq_scale"].double()
    module = quantized_module(read_checkpoint(v1_dir).linears[q], torch.float32, "cpu")
    torch.testing.assert_close(module(x).double(), expected, rtol=1e-6, atol=1e-6)


def test_a_v1_checkpoint_runs_in_the_executor(v1_dir):
    executor = Executor.from_pretrained(v1_dir, dtype=torch.float32, block_size=32, num_blocks=8)
    (result,) = executor.generate([[1, 5, 9, 14]], SamplingParams(max_tokens=3, stop_at_eos=False))
    assert len(result.token_ids) == 3
    assert bool(torch.isfinite(executor.prompt_logits([1, 5, 9, 14])).all())


# ----------------------------------------------------------------------------- each v1 trait alone
def add_metadata_objects(tensors, description):
    description.update({"metadata": {}, "optional": {}, "group_size": 0})


def add_quarot_metadata(tensors, description):
    # QuaRot exports fill both objects (quantization_result.md, "Description Fields", same commit)
    description["metadata"] = {"quarot": {"online": True}}
    description["optional"] = {"quarot": {"rotation_map": {"global": "optional/quarot.safetensors"}}}


def drop_static_weight_scales(tensors, description):
    for prefix in ("model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.o_proj"):
        for leaf in ("weight_scale", "weight_offset"):
            del tensors[f"{prefix}.{leaf}"], description[f"{prefix}.{leaf}"]


def float32_input_offsets(tensors, description):
    for name in [n for n in tensors if n.endswith(".input_offset")]:
        tensors[name] = tensors[name].float()


@pytest.mark.parametrize("edit", [add_metadata_objects, add_quarot_metadata, float32_input_offsets])
def test_v1_description_objects_and_float_offsets_read_unchanged(mixed_model, tmp_path, edit):
    back = read_checkpoint(edited(mixed_model, tmp_path, edit))
    assert sorted(back.linears) == sorted(mixed_model.linears)
    for prefix, layer in mixed_model.linears.items():
        assert back.linears[prefix].same_as(layer), prefix


def test_static_layers_without_weight_scale_keep_their_stored_arithmetic(mixed_model, tmp_path):
    back = read_checkpoint(edited(mixed_model, tmp_path, drop_static_weight_scales))
    for prefix in ("model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.o_proj"):
        ours, theirs = mixed_model.linears[prefix], back.linears[prefix]
        assert theirs.input_offset == ours.input_offset
        assert torch.equal(theirs.static_deq_scale(), ours.static_deq_scale())
        assert torch.equal(theirs.static_quant_bias(), ours.static_quant_bias())
        torch.testing.assert_close(theirs.weight_scale, ours.weight_scale, rtol=1e-6, atol=0)
