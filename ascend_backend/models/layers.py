"""Llama / Qwen2 decoder modules on registry ops, named like the Hugging Face modules.

Module and parameter names match transformers' `LlamaForCausalLM` / `Qwen2ForCausalLM`
(`model.layers.3.self_attn.q_proj.weight`, `model.norm`, `lm_head`), so an HF state dict loads without
renaming and a layer dump of this executor lines up with a dump of the HF model by name.

Tokens of all sequences in a batch are flattened: hidden states are [T, hidden] where T is the number
of tokens scheduled this step; attention metadata says which tokens belong to which sequence.
"""

from __future__ import annotations

import torch
from torch import nn

from ascend_backend import ops
from ascend_backend.attention import AttentionMetadata, paged_attention_forward
from ascend_backend.models.config import ModelConfig


class RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.rms_norm(x, self.weight, self.variance_epsilon)


class Linear(nn.Module):
    """nn.Linear's parameters and names, computed through the registry's `linear` op."""

    def __init__(self, in_features: int, out_features: int, bias: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.linear(x, self.weight, self.bias)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.scale = config.head_size**-0.5
        self.q_proj = Linear(config.hidden_size, config.q_size, config.qkv_bias)
        self.k_proj = Linear(config.hidden_size, config.kv_size, config.qkv_bias)
        self.v_proj = Linear(config.hidden_size, config.kv_size, config.qkv_bias)
        self.o_proj = Linear(config.q_size, config.hidden_size, False)

    def forward(
        self,
        hidden: torch.Tensor,  # [T, hidden]
        positions: torch.Tensor,  # [T]
        cos_sin_cache: torch.Tensor,  # [max_pos, head_size]
        kv_cache: torch.Tensor,  # [2, num_blocks, block_size, kv_heads, head_size]
        attn_metadata: AttentionMetadata,
    ) -> torch.Tensor:
        c = self.config
        q, k = ops.rotary_embedding(
            positions, self.q_proj(hidden), self.k_proj(hidden), c.head_size, cos_sin_cache, True
        )
        v = self.v_proj(hidden)
        tokens = hidden.shape[0]
        out = paged_attention_forward(
            q.view(tokens, c.num_heads, c.head_size),
            k.view(tokens, c.num_kv_heads, c.head_size),
            v.view(tokens, c.num_kv_heads, c.head_size),
            kv_cache,
            attn_metadata,
            self.scale,
        )  # [T, heads, head_size]
        return self.o_proj(out.reshape(tokens, c.q_size))


class MLP(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.gate_proj = Linear(config.hidden_size, config.intermediate_size, False)
        self.up_proj = Linear(config.hidden_size, config.intermediate_size, False)
        self.down_proj = Linear(config.intermediate_size, config.hidden_size, False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Separate gate/up modules keep HF's names; silu_and_mul takes them side by side.
        return self.down_proj(ops.silu_and_mul(torch.cat([self.gate_proj(x), self.up_proj(x)], dim=-1)))


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = Attention(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = MLP(config)

    def forward(
        self,
        hidden: torch.Tensor,
        positions: torch.Tensor,
        cos_sin_cache: torch.Tensor,
        kv_cache: torch.Tensor,
        attn_metadata: AttentionMetadata,
    ) -> torch.Tensor:
        # Residual adds stay outside the norms, as in HF, so each module's output matches HF's by name.
        hidden = hidden + self.self_attn(
            self.input_layernorm(hidden), positions, cos_sin_cache, kv_cache, attn_metadata
        )
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


class DecoderModel(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class CausalLM(nn.Module):
    """`model.*` + `lm_head`, exactly HF's top-level layout."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.model = DecoderModel(config)
        self.lm_head = Linear(config.hidden_size, config.vocab_size, False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(
        self,
        input_ids: torch.Tensor,  # [T]
        positions: torch.Tensor,  # [T]
        cos_sin_cache: torch.Tensor,
        kv_caches: list[torch.Tensor],  # one [2, num_blocks, block_size, kv_heads, head_size] per layer
        attn_metadata: AttentionMetadata,
        logits_indices: torch.Tensor,  # [B] which token rows need logits (each sequence's last)
    ) -> torch.Tensor:
        hidden = self.model.embed_tokens(input_ids)
        for layer, kv_cache in zip(self.model.layers, kv_caches):
            hidden = layer(hidden, positions, cos_sin_cache, kv_cache, attn_metadata)
        hidden = self.model.norm(hidden)
        return self.lm_head(hidden.index_select(0, logits_indices)).float()  # [B, vocab]
