"""The W8A8 SmolLM2 (made by `quantize`, compressed-tensors) served by the real vLLM CPU server from its recipe.

One server for the module. It must start from `recipes/serving/cpu-smollm2-w8a8.yaml` on a fresh cache
(the embedded model is quantized on first use), load the int8 checkpoint through vLLM's compressed-tensors
W8A8 int8 scheme, and answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from workbench.embedded_models import prepare
from workbench.recipes import load_serving_recipe
from workbench.serving.server import Server, launch
from workbench.serving.smoke import run_smoke

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def w8a8_server(server_env, log_dir) -> Iterator[Server]:
    recipe = load_serving_recipe("cpu-smollm2-w8a8")
    with launch(recipe, extra_env=server_env, log_dir=log_dir, progress=False) as server:
        yield server
    assert server.group_pids() == []


def test_the_served_checkpoint_is_int8(w8a8_server):
    config = json.loads((prepare("smollm2-w8a8") / "config.json").read_text())
    groups = config["quantization_config"]["config_groups"]
    assert groups["group_0"]["weights"]["num_bits"] == 8 and groups["group_0"]["input_activations"]["dynamic"]
    log = w8a8_server.log_text()
    assert "CompressedTensorsW8A8Int8" in log or "compressed-tensors" in log, log[-2000:]


def test_w8a8_smollm2_knows_the_capital_of_france(w8a8_server):
    response = httpx.post(
        f"{w8a8_server.url}/v1/completions",
        json={"model": w8a8_server.model, "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0},
        timeout=120,
    )
    response.raise_for_status()
    text = response.json()["choices"][0]["text"]
    assert "Paris" in text, text


def test_smoke_passes_on_the_w8a8_server(w8a8_server):
    report = run_smoke(w8a8_server, prompt="What is the capital of France? Answer in one word.", expect="Paris")
    assert report.passed, report.summary()
