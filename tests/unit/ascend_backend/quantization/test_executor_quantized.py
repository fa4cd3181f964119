"""The executor runs quantized checkpoints of both formats, through the registry's W8A8 ops."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from ascend_backend import registry
from ascend_backend.models import CheckpointError, Executor, SamplingParams
from ascend_backend.models.layers import Linear
from ascend_backend.models.quantized import DynamicW8A8Linear, StaticW8A8Linear
from ascend_backend.quantization import compressed_tensors, linear_prefixes, msmodelslim

from .conftest import CONFIG, PROMPTS


@pytest.fixture(scope="module")
def checkpoints(mixed_model, float_dir, tmp_path_factory):
    """The mixed model written in both formats, each a complete directory (config.json included)."""
    root = tmp_path_factory.mktemp("quantized")
    ms, ct = root / "msmodelslim", root / "compressed"
    ms.mkdir()
    ct.mkdir()
    shutil.copy(float_dir / "config.json", ms / "config.json")
    msmodelslim.write(mixed_model, ms)
    floats = [p for p in linear_prefixes(list(mixed_model.floats)) if f"{p}.weight" in mixed_model.floats]
    compressed_tensors.write(mixed_model, ct, CONFIG, floats)
    return ms, ct


def executor(path, dtype=torch.float32):
    return Executor.from_pretrained(path, dtype=dtype, block_size=32, num_blocks=16)


def test_quantized_layers_load_as_w8a8_modules(checkpoints):
    model = executor(checkpoints[0]).model
    layer0, layer1 = model.model.layers
    assert isinstance(layer0.self_attn.q_proj, StaticW8A8Linear)
    assert isinstance(layer0.mlp.down_proj, Linear)  # kept FLOAT
    assert isinstance(layer1.mlp.down_proj, DynamicW8A8Linear)
    assert layer0.self_attn.q_proj.weight.dtype == torch.int8 and layer0.self_attn.q_proj.weight.shape == (64, 64)


def test_both_formats_compute_identical_logits(checkpoints):
    ms, ct = (executor(p).prompt_logits(PROMPTS[2]) for p in checkpoints)
    assert torch.equal(ms, ct)


def test_quantized_logits_stay_close_to_float(checkpoints, float_dir):
    reference = executor(float_dir).prompt_logits(PROMPTS[2])  # [tokens, vocab]
    registry.reset_stats()
    quantized = executor(checkpoints[0]).prompt_logits(PROMPTS[2])
    cosine = torch.nn.functional.cosine_similarity(quantized, reference, dim=-1)
    print(f"per-position logit cosine: min {cosine.min():.5f}")
    assert cosine.min() > 0.995
    stats = registry.stats()
    assert stats["w8a8_linear"]["native"] == 4 and stats["w8a8_dynamic_linear"]["native"] == 7
    assert stats["linear"]["native"] == 3 + 1  # layer 0's float MLP + lm_head


def test_fp16_run_uses_packed_deq_scale_and_agrees(checkpoints):
    half = executor(checkpoints[0], torch.float16)
    assert half.model.model.layers[0].self_attn.o_proj.deq_scale.dtype == torch.int64
    full = executor(checkpoints[0]).prompt_logits(PROMPTS[0])
    logits = half.prompt_logits(PROMPTS[0])
    assert torch.nn.functional.cosine_similarity(logits, full, dim=-1).min() > 0.999


def test_generation_runs_on_a_quantized_checkpoint(checkpoints):
    results = executor(checkpoints[1]).generate(PROMPTS, SamplingParams(max_tokens=6, stop_at_eos=False))
    assert [len(r.token_ids) for r in results] == [6, 6, 6]


def test_a_broken_quantized_checkpoint_is_a_checkpoint_error(checkpoints, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(checkpoints[0], broken)
    description = json.loads((broken / msmodelslim.DESCRIPTION_FILE).read_text())
    description["model.layers.0.self_attn.q_proj.weight"] = "W8A8_DYNAMIC"
    (broken / msmodelslim.DESCRIPTION_FILE).write_text(json.dumps(description))
    with pytest.raises(CheckpointError, match="disagrees with the weights"):
        executor(broken)
