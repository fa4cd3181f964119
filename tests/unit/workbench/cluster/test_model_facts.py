"""Parameters from config.json against the exact counts in safetensors headers, and against vLLM's own log."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURES
from workbench.cluster.model_facts import facts_from_config, model_facts, safetensors_parameters
from workbench.errors import WorkbenchError

MODELS = FIXTURES / "cluster" / "models"


def test_tiny_config_count_equals_its_safetensors(tiny_dir):
    facts = model_facts(tiny_dir)
    assert facts.total_parameters() == safetensors_parameters(tiny_dir)
    assert not facts.moe and not facts.mla and facts.tied


def test_smollm2_config_count_equals_its_safetensors():
    # 134,515,008: the count in the prepared smollm2 directory's safetensors header (measured here; the model
    # card's "135M"), so the config arithmetic of a Llama with tied embeddings is exact.
    facts = facts_from_config(json.loads((MODELS / "smollm2" / "config.json").read_text()), "smollm2")
    assert facts.total_parameters() == 134_515_008


def test_qwen3_14b_weights_match_vllm_ascend_log():
    # vllm-ascend #9372: "Loading model weights took 27.5376 GB" (GiB) for Qwen3-14B in bf16
    facts = facts_from_config(json.loads((MODELS / "qwen3-14b" / "config.json").read_text()), "Qwen3-14B")
    gib = facts.total_parameters() * 2 / 2**30
    assert gib == pytest.approx(27.5376, rel=0.005)


def test_kimi_k2_is_a_one_trillion_mla_moe():
    facts = facts_from_config(json.loads((MODELS / "kimi-k2" / "config.json").read_text()), "Kimi-K2")
    params = facts.parameters()
    assert facts.moe and facts.mla and facts.moe_layers == 60
    assert 1.0e12 < facts.total_parameters() < 1.1e12  # "1T MoE" (vllm-ascend #11019)
    assert params["experts"] > 0.97 * facts.total_parameters()
    assert facts.kv_bytes_per_token(layers=61) == (512 + 64) * 61 * 2  # one latent per layer, any tp


def test_missing_fields_name_the_file():
    with pytest.raises(WorkbenchError, match="config.json lacks"):
        facts_from_config({"hidden_size": 8}, "broken")
