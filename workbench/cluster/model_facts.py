"""What a model's `config.json` says about its memory: parameters by part, and the KV cache per token.

    facts = model_facts("tiny")                   # an embedded model, an HF directory, or a config.json path
    facts.parameters()                            # {"embedding": ..., "lm_head": ..., "attention": ..., "mlp": ..., "experts": ..., "norms": ...}

Parameters are counted from the architecture's shapes (no weights needed, so a 1T-parameter checkpoint is
planned from its 5 KB config): per decoder layer an attention block (grouped-query, or DeepSeek's
multi-head latent attention when `kv_lora_rank` is set), a dense MLP (gate, up, down) or a mixture of
experts (`n_routed_experts` / `num_experts` of `moe_intermediate_size`, shared experts, a router), and two
norms. Where the directory holds safetensors files their headers give the exact count, and the unit tests
hold the config count against them for both embedded models (tests/unit/workbench/cluster/test_model_facts.py).
Multimodal configs keep the language model under `text_config`; that part is planned.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench import settings
from workbench.errors import WorkbenchError

_EXPERT_KEYS = ("n_routed_experts", "num_experts", "num_local_experts")


@dataclass(frozen=True)
class ModelFacts:
    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    intermediate: int
    tied: bool
    dtype: str
    max_positions: int | None = None
    qkv_bias: bool = False
    experts: int = 0  # routed experts per MoE layer (0: dense)
    expert_intermediate: int = 0
    shared_experts: int = 0
    dense_layers: int = 0  # leading layers with a dense MLP in a MoE model (first_k_dense_replace)
    kv_lora_rank: int = 0  # > 0: multi-head latent attention
    q_lora_rank: int = 0
    rope_head_dim: int = 0
    nope_head_dim: int = 0
    v_head_dim: int = 0

    @property
    def moe(self) -> bool:
        return self.experts > 0

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.moe else 0

    def attention_per_layer(self) -> int:
        h = self.hidden
        if self.mla:
            qk = self.nope_head_dim + self.rope_head_dim
            q = h * self.q_lora_rank + self.q_lora_rank * self.heads * qk if self.q_lora_rank else h * self.heads * qk
            kv = h * (self.kv_lora_rank + self.rope_head_dim) + self.kv_lora_rank * self.heads * (
                self.nope_head_dim + self.v_head_dim
            )
            norms = self.kv_lora_rank + (self.q_lora_rank or 0)
            return q + kv + self.heads * self.v_head_dim * h + norms
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        bias = (q + 2 * kv) if self.qkv_bias else 0
        qk_norms = 2 * self.head_dim if self.name_has_qk_norm else 0
        return h * q + 2 * h * kv + q * h + bias + qk_norms

    @property
    def name_has_qk_norm(self) -> bool:
        """Qwen3 adds q_norm and k_norm of head_dim each per layer (Qwen3ForCausalLM)."""
        return self.name.startswith("qwen3")

    def parameters(self) -> dict[str, int]:
        """Parameter count by part: what the planner shards differently."""
        h = self.hidden
        dense_mlp = 3 * h * self.intermediate
        expert = 3 * h * self.expert_intermediate
        return {
            "embedding": self.vocab * h,
            "lm_head": 0 if self.tied else self.vocab * h,
            "attention": self.layers * self.attention_per_layer(),
            "mlp": (self.layers - self.moe_layers) * dense_mlp
            + self.moe_layers * (self.shared_experts * expert + h * self.experts),
            "experts": self.moe_layers * self.experts * expert,
            "norms": (2 * self.layers + 1) * h,
        }

    def total_parameters(self) -> int:
        return sum(self.parameters().values())

    def kv_bytes_per_token(
        self, kv_heads_per_rank: int | None = None, layers: int | None = None, dtype_bytes: int = 2
    ) -> int:
        """KV cache bytes one token takes on one rank: 2 (K and V) x heads x head_dim per layer; MLA keeps one
        latent of kv_lora_rank + rope dims per layer, the same on every tensor-parallel rank."""
        n_layers = self.layers if layers is None else layers
        if self.mla:
            return (self.kv_lora_rank + self.rope_head_dim) * n_layers * dtype_bytes
        heads = self.kv_heads if kv_heads_per_rank is None else kv_heads_per_rank
        return 2 * heads * self.head_dim * n_layers * dtype_bytes


def _int(config: dict[str, Any], *keys: str, default: int = 0) -> int:
    for key in keys:
        if config.get(key) is not None:
            return int(config[key])
    return default


def facts_from_config(config: dict[str, Any], name: str = "model") -> ModelFacts:
    """ModelFacts from a parsed config.json (a multimodal one: its `text_config`)."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    try:
        hidden, heads = int(text["hidden_size"]), int(text["num_attention_heads"])
        experts = _int(text, *_EXPERT_KEYS)
        return ModelFacts(
            name=str(text.get("model_type") or config.get("model_type") or name),
            hidden=hidden,
            layers=int(text["num_hidden_layers"]),
            heads=heads,
            kv_heads=_int(text, "num_key_value_heads", default=heads),
            head_dim=_int(text, "head_dim", default=hidden // heads),
            vocab=int(text["vocab_size"]),
            intermediate=_int(text, "intermediate_size"),
            tied=bool(text.get("tie_word_embeddings", config.get("tie_word_embeddings", False))),
            dtype=str(
                text.get("torch_dtype")
                or text.get("dtype")
                or config.get("torch_dtype")
                or config.get("dtype")
                or "bfloat16"
            ),
            max_positions=text.get("max_position_embeddings"),
            qkv_bias=str(text.get("model_type")) == "qwen2" or bool(text.get("attention_bias")),
            experts=experts,
            expert_intermediate=_int(text, "moe_intermediate_size") if experts else 0,
            shared_experts=_int(text, "n_shared_experts"),
            dense_layers=_int(text, "first_k_dense_replace") if experts else 0,
            kv_lora_rank=_int(text, "kv_lora_rank"),
            q_lora_rank=_int(text, "q_lora_rank"),
            rope_head_dim=_int(text, "qk_rope_head_dim"),
            nope_head_dim=_int(text, "qk_nope_head_dim"),
            v_head_dim=_int(text, "v_head_dim"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise WorkbenchError(
            f"{name}: config.json lacks what the planner needs ({exc}); give a Hugging Face model directory"
        ) from None


def config_path(model: str | Path) -> Path:
    """config.json of an embedded model ('tiny'), a model directory, or the file itself."""
    path = Path(model).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        return path / "config.json"
    embedded = settings.embedded_model_dir(str(model)) / "config.json"
    if embedded.is_file():
        return embedded
    raise WorkbenchError(
        f"--model {model}: no config.json there (an embedded model name such as 'tiny', or a model directory)"
    )


def model_facts(model: str | Path) -> ModelFacts:
    path = config_path(model)
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise WorkbenchError(f"{path}: cannot read the model's config.json ({exc})") from None
    return facts_from_config(config, Path(model).name)


def safetensors_parameters(directory: Path) -> int | None:
    """Parameters in a directory's *.safetensors headers (exact, no tensor read); None without such files."""
    files = sorted(Path(directory).glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for file in files:
        with file.open("rb") as handle:
            size = struct.unpack("<Q", handle.read(8))[0]
            header = json.loads(handle.read(size))
        for key, entry in header.items():
            if key != "__metadata__":
                count = 1
                for dim in entry["shape"]:
                    count *= dim
                total += count
    return total


__all__ = ["ModelFacts", "config_path", "facts_from_config", "model_facts", "safetensors_parameters"]
