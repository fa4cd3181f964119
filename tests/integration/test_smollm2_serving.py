"""The real SmolLM2-135M-Instruct, prepared from its GGUF by the workbench, served by vLLM on CPU."""

from __future__ import annotations

import httpx
import pytest

from workbench.recipes import load_serving_recipe
from workbench.serving.server import launch
from workbench.serving.smoke import run_smoke

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_smollm2_knows_the_capital_of_france(server_env, log_dir):
    recipe = load_serving_recipe("cpu-smollm2")
    with launch(recipe, extra_env=server_env, log_dir=log_dir, progress=False) as server:
        response = httpx.post(
            f"{server.url}/v1/completions",
            json={"model": server.model, "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0},
            timeout=120,
        )
        response.raise_for_status()
        text = response.json()["choices"][0]["text"]
        assert "Paris" in text, text
        report = run_smoke(server, prompt="What is the capital of France? Answer in one word.", expect="Paris")
        assert report.passed, report.summary()
    assert server.group_pids() == []
