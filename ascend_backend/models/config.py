"""The subset of a Hugging Face `config.json` the executor needs, validated into a frozen dataclass.

Llama and Qwen2 differ in two ways that matter here: Qwen2 has a bias on q/k/v projections, and
defaults differ (Qwen2 ties embeddings in small checkpoints). Everything else is config-driven.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUPPORTED_ARCHITECTURES = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2"}


class ModelConfigError(ValueError):
    """config.json is missing, unsupported or inconsistent; the message names the field."""


@dataclass(frozen=True)
class RopeScaling:
    kind: str  # "default" | "linear" | "llama3"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position: int = 8192


@dataclass(frozen=True)
class ModelConfig:
    architecture: str  # "llama" | "qwen2"
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_size: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: RopeScaling
    max_position: int
    tie_word_embeddings: bool
    qkv_bias: bool
    eos_token_ids: tuple[int, ...]

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_size

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_size

    @classmethod
    def from_dict(cls, raw: dict[str, Any], source: str = "config.json") -> ModelConfig:
        archs = raw.get("architectures") or []
        arch = next((SUPPORTED_ARCHITECTURES[a] for a in archs if a in SUPPORTED_ARCHITECTURES), None)
        if arch is None:
            raise ModelConfigError(
                f"{source}: architectures={archs} not supported by the executor; "
                f"supported: {sorted(SUPPORTED_ARCHITECTURES)}"
            )

        def need(key: str) -> Any:
            if key not in raw:
                raise ModelConfigError(f"{source}: missing required field {key!r}")
            return raw[key]

        heads = int(need("num_attention_heads"))
        hidden = int(need("hidden_size"))
        head_size = int(raw.get("head_dim") or hidden // heads)
        kv_heads = int(raw.get("num_key_value_heads") or heads)
        if heads % kv_heads:
            raise ModelConfigError(
                f"{source}: num_attention_heads={heads} not a multiple of num_key_value_heads={kv_heads}"
            )
        eos = raw.get("eos_token_id")
        eos_ids = tuple(eos) if isinstance(eos, list) else (() if eos is None else (int(eos),))
        rope_params = raw.get("rope_parameters") or {}
        theta = float(raw.get("rope_theta") or rope_params.get("rope_theta") or 10000.0)
        return cls(
            architecture=arch,
            vocab_size=int(need("vocab_size")),
            hidden_size=hidden,
            intermediate_size=int(need("intermediate_size")),
            num_layers=int(need("num_hidden_layers")),
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_size=head_size,
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            rope_theta=theta,
            rope_scaling=_rope_scaling(raw.get("rope_scaling") or rope_params, source),
            max_position=int(raw.get("max_position_embeddings", 4096)),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            qkv_bias=bool(raw.get("attention_bias", arch == "qwen2")),
            eos_token_ids=eos_ids,
        )

    @classmethod
    def from_dir(cls, path: str | Path) -> ModelConfig:
        config_path = Path(path) / "config.json"
        if not config_path.is_file():
            raise ModelConfigError(f"{config_path} not found: point at a Hugging Face model directory")
        try:
            raw = json.loads(config_path.read_text())
        except json.JSONDecodeError as exc:
            raise ModelConfigError(f"{config_path} is not valid JSON: {exc}") from None
        return cls.from_dict(raw, str(config_path))


def _rope_scaling(raw: dict[str, Any] | None, source: str) -> RopeScaling:
    if not raw:
        return RopeScaling("default")
    kind = raw.get("rope_type") or raw.get("type") or "default"
    if kind == "default":
        return RopeScaling("default")
    if kind == "linear":
        return RopeScaling("linear", factor=float(raw["factor"]))
    if kind == "llama3":
        return RopeScaling(
            "llama3",
            factor=float(raw["factor"]),
            low_freq_factor=float(raw.get("low_freq_factor", 1.0)),
            high_freq_factor=float(raw.get("high_freq_factor", 4.0)),
            original_max_position=int(raw.get("original_max_position_embeddings", 8192)),
        )
    raise ModelConfigError(f"{source}: rope_scaling type {kind!r} not supported (default, linear, llama3)")
