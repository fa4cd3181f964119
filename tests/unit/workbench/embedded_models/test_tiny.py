"""The `tiny` model: complete, deterministic, loadable, with a working tokenizer and chat template."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from workbench.embedded_models import api as embedded_models
from workbench.embedded_models import tiny, tiny_tokenizer

EXPECTED_FILES = {
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "provenance.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
}


def file_digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_directory_is_complete(tiny_dir: Path) -> None:
    assert {p.name for p in tiny_dir.iterdir()} == EXPECTED_FILES
    config = json.loads((tiny_dir / "config.json").read_text())
    assert config["architectures"] == ["Qwen2ForCausalLM"] and config["model_type"] == "qwen2"
    shape = {k: config[k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads")}
    assert shape == {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2}
    assert config["max_position_embeddings"] >= 2048
    assert config["vocab_size"] == tiny_tokenizer.VOCAB_SIZE
    assert config["dtype"] == "bfloat16"
    generation = json.loads((tiny_dir / "generation_config.json").read_text())
    assert generation["eos_token_id"] == [2, 0]  # <|im_end|>, <|endoftext|>
    provenance = json.loads((tiny_dir / "provenance.json").read_text())
    assert provenance["fingerprint"] == tiny.fingerprint()
    assert provenance["corpus_sha256"] == tiny_tokenizer.corpus_sha256()


def test_weights_are_bf16_tied_and_seeded(tiny_dir: Path) -> None:
    import torch
    from safetensors.torch import load_file

    weights = load_file(tiny_dir / "model.safetensors")
    assert {t.dtype for t in weights.values()} == {torch.bfloat16}
    assert "lm_head.weight" not in weights  # tied to the embedding
    assert weights["model.embed_tokens.weight"].shape == (2048, 256)
    assert weights["model.layers.0.self_attn.k_proj.weight"].shape == (128, 256)  # 2 KV heads x 64
    assert weights["model.layers.0.self_attn.q_proj.bias"].shape == (256,)
    linear = weights["model.layers.1.mlp.down_proj.weight"].double()
    assert abs(linear.std().item() - tiny.INIT_STD) < 0.002 and abs(linear.mean().item()) < 0.001
    norm = weights["model.norm.weight"].double()
    assert abs(norm.mean().item() - 1.0) < 0.03 and abs(norm.std().item() - tiny.NORM_JITTER) < 0.02
    # Seeded by name: regenerating one tensor alone gives the same values.
    generator = torch.Generator().manual_seed(tiny.SEED * 1_000_003 + __import__("zlib").crc32(b"model.norm.weight"))
    expected = (1.0 + tiny.NORM_JITTER * torch.randn(256, generator=generator)).to(torch.bfloat16)
    assert torch.equal(weights["model.norm.weight"], expected)


def test_two_builds_are_byte_identical(tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCEND_WORKBENCH_CACHE", str(tmp_path))
    second = embedded_models.prepare("tiny")
    assert second == tmp_path / "models" / "tiny"
    assert file_digests(second) == file_digests(tiny_dir)


def test_prepare_is_idempotent(tiny_dir: Path) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in tiny_dir.iterdir()}
    assert embedded_models.prepare("tiny") == tiny_dir
    assert embedded_models.status("tiny").ready
    assert {p.name: p.stat().st_mtime_ns for p in tiny_dir.iterdir()} == before


def test_transformers_loads_it_and_logits_are_healthy(tiny_loaded) -> None:
    import torch

    tokenizer, model = tiny_loaded
    assert type(model).__name__ == "Qwen2ForCausalLM"
    ids = tokenizer("The capital of France is", return_tensors="pt").input_ids  # [1, S]
    with torch.no_grad():
        logits = model(ids).logits  # [1, S, 2048]
    assert logits.shape == (1, ids.shape[1], 2048)
    assert torch.isfinite(logits).all()
    # Not degenerate: logits spread (std ~ sqrt(256) * 0.02 = 0.32), and positions differ.
    assert 0.1 < logits.std().item() < 1.0
    assert not torch.allclose(logits[0, 0], logits[0, -1])


@pytest.mark.parametrize(
    "text",
    [
        "The capital of France is Paris.",
        "def f(x):\n    return x ** 2  # square\n",
        "  leading spaces, tabs\tand 12345 digits",
        "Unseen words: xylophone quokka zephyr; déjà vu, Zürich, 東京, emoji 🚀🙂",
        "",
    ],
)
def test_tokenizer_round_trip(tiny_loaded, tiny_dir: Path, text: str) -> None:
    from tokenizers import Tokenizer

    tokenizer, _ = tiny_loaded
    ids = tokenizer(text)["input_ids"]
    assert tokenizer.decode(ids) == text
    assert all(0 <= i < tiny_tokenizer.VOCAB_SIZE for i in ids)
    # transformers rebuilds Qwen2 tokenizers with its own pre-tokenizer: it must cut text the way the
    # trained tokenizer.json does, or the served model would see different ids.
    assert Tokenizer.from_file(str(tiny_dir / "tokenizer.json")).encode(text).ids == ids


def test_tokenizer_learned_merges_from_the_corpus(tiny_loaded) -> None:
    tokenizer, _ = tiny_loaded
    # Common corpus words are single tokens; a byte-level fallback would need one id per byte.
    for word in [" the", " model", " capital", "def", " return"]:
        assert len(tokenizer(word)["input_ids"]) == 1, word


def test_special_tokens_and_chat_template(tiny_loaded) -> None:
    tokenizer, _ = tiny_loaded
    assert tokenizer.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]) == [0, 1, 2]
    assert (tokenizer.eos_token, tokenizer.pad_token) == ("<|im_end|>", "<|endoftext|>")
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Capital of France?"},
    ]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi!<|im_end|>\n"
        "<|im_start|>assistant\nHello.<|im_end|>\n"
        "<|im_start|>user\nCapital of France?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    ids = tokenizer(rendered, add_special_tokens=False)["input_ids"]
    assert ids[0] == 1 and ids.count(1) == 5 and ids.count(2) == 4  # markers stay single tokens
    without_prompt = tokenizer.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=False)
    assert without_prompt.endswith("Hi!<|im_end|>\n")


def test_resolve_model_accepts_names_and_checkpoint_dirs(tiny_dir: Path, tmp_path: Path) -> None:
    from workbench.errors import WorkbenchError

    assert embedded_models.resolve_model("tiny") == tiny_dir
    assert embedded_models.resolve_model(str(tiny_dir)) == tiny_dir.resolve()
    with pytest.raises(WorkbenchError, match="neither an embedded model"):
        embedded_models.resolve_model(str(tmp_path / "nowhere"))
    with pytest.raises(WorkbenchError, match="no config.json"):
        embedded_models.resolve_model(str(tmp_path))
    with pytest.raises(WorkbenchError, match="choose one of: tiny, smollm2"):
        embedded_models.prepare("llama-70b")


BUILD_BESIDE_TOKENIZER_IMPORT = """
import sys
from workbench.embedded_models.catalog import prepare
from workbench.serving.load import workload as loadgen
loadgen.import_tokenizer_library_in_background()  # what a sweep starts just before it prepares the model
try:
    print(prepare("tiny").name)
except Exception as error:
    print(repr(error))
"""


@pytest.mark.slow
def test_a_first_build_beside_the_background_tokenizer_import_succeeds(tmp_path: Path) -> None:
    """On a fresh machine, `sweep` built `tiny` while its background tokenizer import ran, and the build
    failed with "module 'transformers' has no attribute 'GenerationConfig'" (transformers' lazy names, two
    threads). Without the shared lock it failed here every time. Two fresh processes, each its own cache."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    trials = [
        subprocess.Popen(
            [sys.executable, "-c", BUILD_BESIDE_TOKENIZER_IMPORT],
            cwd=REPO_ROOT,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "ASCEND_WORKBENCH_CACHE": str(tmp_path / f"cache-{i}")},
        )
        for i in range(2)
    ]
    assert [t.communicate(timeout=300)[0].strip() for t in trials] == ["tiny", "tiny"]
