"""Sampling rules and config parsing, with exact expectations."""

from __future__ import annotations

import json
import math

import pytest
import torch

from ascend_backend.models.config import ModelConfig, ModelConfigError
from ascend_backend.models.rope import inverse_frequencies, model_cos_sin_cache
from ascend_backend.models.sampling import SamplingParams, sample


def test_greedy_is_argmax():
    logits = torch.tensor([[0.1, 2.0, -1.0], [5.0, 4.9, 0.0]])
    assert sample(logits, SamplingParams()).tolist() == [1, 0]


def test_top_p_keeps_the_smallest_set_reaching_p():
    # probs = [0.5, 0.3, 0.2]: top_p=0.5 keeps only token 0; top_p=0.7 keeps {0, 1}.
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]])).repeat(4000, 1)
    g = torch.Generator().manual_seed(0)
    only_top = sample(logits, SamplingParams(temperature=1.0, top_p=0.5), g)
    assert set(only_top.tolist()) == {0}
    two = sample(logits, SamplingParams(temperature=1.0, top_p=0.7), g).tolist()
    assert set(two) == {0, 1}
    assert abs(two.count(0) / len(two) - 0.5 / 0.8) < 0.03


def test_temperature_sampling_follows_the_softmax():
    logits = torch.tensor([[0.0, math.log(3.0)]]).repeat(6000, 1)  # probs 1/4, 3/4
    picks = sample(logits, SamplingParams(temperature=1.0), torch.Generator().manual_seed(1)).tolist()
    assert abs(picks.count(1) / len(picks) - 0.75) < 0.02


@pytest.mark.parametrize("kwargs", [{"max_tokens": 0}, {"temperature": -1}, {"top_p": 0}, {"top_p": 1.5}])
def test_bad_sampling_params(kwargs):
    with pytest.raises(ValueError):
        SamplingParams(**kwargs)


BASE = {
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": 100,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "max_position_embeddings": 256,
    "eos_token_id": 2,
}


def test_config_llama_and_qwen2_defaults():
    llama = ModelConfig.from_dict(BASE)
    assert (llama.architecture, llama.head_size, llama.qkv_bias, llama.eos_token_ids) == ("llama", 16, False, (2,))
    qwen = ModelConfig.from_dict({**BASE, "architectures": ["Qwen2ForCausalLM"], "eos_token_id": [2, 3]})
    assert qwen.qkv_bias is True and qwen.eos_token_ids == (2, 3)


@pytest.mark.parametrize(
    "change,message",
    [
        ({"architectures": ["GPT2LMHeadModel"]}, "not supported"),
        ({"num_key_value_heads": 3}, "not a multiple"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 2}}, "not supported"),
    ],
)
def test_config_errors_name_the_field(change, message):
    with pytest.raises(ModelConfigError, match=message):
        ModelConfig.from_dict({**BASE, **change})


def test_config_missing_field(tmp_path):
    raw = dict(BASE)
    del raw["vocab_size"]
    (tmp_path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ModelConfigError, match="vocab_size"):
        ModelConfig.from_dir(tmp_path)
    with pytest.raises(ModelConfigError, match="not found"):
        ModelConfig.from_dir(tmp_path / "nope")


def test_rope_scaling_rules():
    default = ModelConfig.from_dict(BASE)
    inv = inverse_frequencies(default)
    assert inv[1].item() == pytest.approx(10000.0 ** (-2 / 16))
    linear = ModelConfig.from_dict({**BASE, "rope_scaling": {"type": "linear", "factor": 4.0}})
    assert torch.allclose(inverse_frequencies(linear), inv / 4)
    llama3 = ModelConfig.from_dict(
        {
            **BASE,
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
        }
    )
    scaled = inverse_frequencies(llama3)
    wavelen = 2 * math.pi / inv
    assert torch.allclose(scaled[wavelen < 64 / 4], inv[wavelen < 64 / 4])  # short wavelengths untouched
    assert torch.allclose(scaled[wavelen > 64], inv[wavelen > 64] / 8)  # long ones slowed by factor
    cache = model_cos_sin_cache(default, 10)
    assert cache.shape == (10, 16)
    assert cache[3, 1].item() == pytest.approx(math.cos(3 * inv[1].item()), abs=1e-6)


def test_the_executor_block_size_is_128_on_an_npu_and_32_elsewhere():
    # vllm-ascend forces 128 with prefix caching (platform.py@v0.11.0:272-279): its paged prefill kernels
    # take nothing else; vLLM's CPU engine starts from 32.
    from ascend_backend.models.executor import default_block_size

    assert default_block_size("npu:0") == 128
    assert default_block_size(torch.device("cpu")) == 32 and default_block_size("cuda:0") == 32
