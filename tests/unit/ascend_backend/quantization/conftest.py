"""A small random Llama checkpoint (bf16, two layers) written once per session, and its quantizations.

Built with the executor's own CausalLM so the tensor names are Hugging Face's; no tokenizer is needed
(prompts are token ids). Seeded: every run quantizes the same weights.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from ascend_backend.models import Executor
from ascend_backend.models.config import ModelConfig
from ascend_backend.models.layers import CausalLM
from ascend_backend.quantization import (
    QuantType,
    linear_prefixes,
    observe_linear_inputs,
    plan_layers,
    quantize_model,
)

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 97,
    "hidden_size": 64,
    "intermediate_size": 160,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "max_position_embeddings": 256,
    "tie_word_embeddings": False,
    "eos_token_id": 2,
    "torch_dtype": "bfloat16",
}
PROMPTS = [[1, 5, 9, 14, 20, 33, 47, 60], [3, 3, 3, 70, 71, 72], list(range(10, 60))]


def random_state(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    with torch.device("meta"):
        model = CausalLM(ModelConfig.from_dict(CONFIG))
    state = {}
    for name, param in model.named_parameters():
        if name.endswith("layernorm.weight") or name == "model.norm.weight":
            state[name] = 1.0 + 0.1 * torch.randn(param.shape, generator=g)
        else:
            state[name] = torch.randn(param.shape, generator=g) / param.shape[-1] ** 0.5
    return {k: v.to(torch.bfloat16) for k, v in state.items()}


@pytest.fixture(scope="session")
def float_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("float-llama")
    (path / "config.json").write_text(json.dumps(CONFIG))
    save_file(random_state(), str(path / "model.safetensors"))
    return path


@pytest.fixture(scope="session")
def float_state(float_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(float_dir / "model.safetensors"))


@pytest.fixture(scope="session")
def ranges(float_dir: Path, float_state):
    """Calibration ranges of every decoder linear, observed by running the float executor on PROMPTS."""
    executor = Executor.from_pretrained(float_dir, dtype=torch.float32, block_size=32, num_blocks=16)
    names = linear_prefixes(list(float_state))
    with observe_linear_inputs(executor.model, names) as observers:
        for prompt in PROMPTS:
            executor.prompt_logits(prompt)
    return {name: obs.result() for name, obs in observers.items()}


@pytest.fixture(scope="session")
def mixed_model(float_state, ranges):
    """Layer 0 static W8A8 except its MLP kept FLOAT; layer 1 W8A8_DYNAMIC (every kind in one checkpoint).

    The static layers are calibrated asymmetrically (nonzero zero points), so the round trips also
    cover the offset arithmetic that genuine msmodelslim checkpoints carry.
    """
    prefixes = linear_prefixes(list(float_state))
    plan = plan_layers(prefixes, QuantType.W8A8, keep_float=["model.layers.0.mlp.*"])
    plan.update({p: QuantType.W8A8_DYNAMIC for p in prefixes if p.startswith("model.layers.1.")})
    model = quantize_model(float_state, plan, torch.bfloat16, ranges, symmetric_inputs=False)
    assert any(layer.input_offset for layer in model.linears.values()), "the fixture needs nonzero offsets"
    return model
