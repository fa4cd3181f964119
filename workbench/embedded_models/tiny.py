"""`tiny`: a Qwen2-architecture checkpoint with random weights, built locally in seconds.

What it is for: every test, notebook and server smoke check that needs *a* real model directory
without a hub or a download. It has the full Qwen2 structure (grouped-query attention with q/k/v
bias, RoPE, RMSNorm, SwiGLU MLP, tied embeddings), so it exercises the same kernels as a large Qwen2,
just at hidden size 256. Its text is gibberish; its numerics are sound.

Determinism: weights come from a seeded generator per tensor (seeded by the tensor's name, so adding a
tensor never shifts the others), the tokenizer from deterministic BPE training, and every JSON file is
written with sorted keys. Two builds with the same library versions give identical bytes.

Initialisation: normal(0, 0.02) for linear, embedding and bias tensors (GPT-2's scale), and
1 + normal(0, 0.1) for norm weights. Non-trivial norm weights and biases make a kernel that drops one
of them visibly wrong. With these scales the logits have a standard deviation of about
sqrt(256) * 0.02 = 0.3: finite, not saturated, no NaN/inf in bf16.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.embedded_models import tiny_tokenizer

SEED = 0
INIT_STD = 0.02
NORM_JITTER = 0.1
BUILD_VERSION = 2  # bump when the build below changes what it writes


@dataclass(frozen=True)
class TinyShape:
    """The architecture numbers of the tiny model."""

    hidden_size: int = 256
    intermediate_size: int = 768
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = tiny_tokenizer.MODEL_MAX_LENGTH
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    vocab_size: int = tiny_tokenizer.VOCAB_SIZE

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


def fingerprint() -> str:
    """Identifies what a build would produce: recipe version, shape and training corpus."""
    return f"tiny-v{BUILD_VERSION}-seed{SEED}-{TinyShape()!r}-corpus:{tiny_tokenizer.corpus_sha256()}"


def build(out_dir: Path) -> dict[str, Any]:
    """Write a complete HF directory for `tiny` into the empty `out_dir`; return provenance fields."""
    import tokenizers
    import torch
    import transformers

    shape = TinyShape()
    special = tiny_tokenizer.write_tokenizer(out_dir)
    config = make_config(shape, special)
    config.save_pretrained(out_dir)
    transformers.GenerationConfig(
        bos_token_id=special.endoftext,
        eos_token_id=[special.im_end, special.endoftext],
        pad_token_id=special.endoftext,
    ).save_pretrained(out_dir)
    _save_weights(init_weights(config, SEED), out_dir / "model.safetensors")
    return {
        "model": "tiny",
        "architecture": "Qwen2ForCausalLM",
        "description": "random-weight Qwen2 (hidden 256, 4 layers, 4 heads, 2 KV heads), byte-level BPE",
        "seed": SEED,
        "init": {"std": INIT_STD, "norm_jitter": NORM_JITTER},
        "corpus_sha256": tiny_tokenizer.corpus_sha256(),
        "dtype": "bfloat16",
        "built_with": {
            "torch": torch.__version__.split("+")[0],
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
        },
    }


def make_config(shape: TinyShape, special: tiny_tokenizer.SpecialTokenIds):
    """The Qwen2Config for `shape`, stored as bf16 with tied embeddings."""
    import torch
    from transformers import Qwen2Config

    config = Qwen2Config(
        vocab_size=shape.vocab_size,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_key_value_heads,
        head_dim=shape.head_dim,
        max_position_embeddings=shape.max_position_embeddings,
        rope_theta=shape.rope_theta,
        rms_norm_eps=shape.rms_norm_eps,
        hidden_act="silu",
        tie_word_embeddings=True,
        use_sliding_window=False,
        bos_token_id=special.endoftext,
        eos_token_id=special.im_end,
        pad_token_id=special.endoftext,
    )
    config.architectures = ["Qwen2ForCausalLM"]
    config.dtype = torch.bfloat16
    return config


def init_weights(config, seed: int) -> dict[str, Any]:
    """Seeded random tensors for every parameter a Qwen2ForCausalLM of `config` has, as bf16.

    The parameter names and shapes come from instantiating the model on the meta device, so they are
    exactly what transformers and vLLM expect; `lm_head.weight` is left out because it is tied.
    """
    import torch
    from transformers import Qwen2ForCausalLM

    with torch.device("meta"):
        skeleton = Qwen2ForCausalLM(config)
    weights: dict[str, torch.Tensor] = {}
    for name, meta in sorted(skeleton.state_dict().items()):
        if name == "lm_head.weight" and config.tie_word_embeddings:
            continue
        generator = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
        noise = torch.randn(tuple(meta.shape), generator=generator, dtype=torch.float32)
        value = 1.0 + NORM_JITTER * noise if name.endswith("norm.weight") else INIT_STD * noise
        weights[name] = value.to(torch.bfloat16).contiguous()
    return weights


def _save_weights(weights: dict[str, Any], path: Path) -> None:
    from safetensors.torch import save_file

    save_file(weights, str(path), metadata={"format": "pt"})
