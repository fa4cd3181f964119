"""vLLM's module names and layouts, mapped onto a Hugging Face (or executor) reference's.

A vLLM engine and transformers run the same checkpoint through different modules. To hold an engine
dump (`ascend_backend.vllm_plugin.dump`) against a float32 reference dump, each engine module output is
mapped to the reference output it equals, at the level where both exist:

| engine (vLLM)                         | reference (transformers)              | level             |
|---------------------------------------|---------------------------------------|-------------------|
| `X` (embed_tokens, self_attn, o_proj, | `X`, output 0                         | module            |
|  mlp, down_proj, input_layernorm ...) |                                       |                   |
| `...self_attn.qkv_proj` [T, q+k+v]    | `q_proj`, `k_proj`, `v_proj`          | split             |
| `...mlp.gate_up_proj` [T, 2I]         | `gate_proj`, `up_proj`                | split             |
| `model.layers.N` -> (hidden, residual)| `model.layers.N` (their sum)          | hidden+residual   |
| `logits_processor` [sequences, V]     | `lm_head` at each sequence's last row | last token        |

Norms fused with the residual add return (normed, residual); output 0 is the norm's output in both
worlds. Some engine modules have no counterpart and are compared one level up instead:
`rotary_emb` (vLLM returns rotated q and k, transformers returns cos/sin), `attn` (the attention
core is a function in transformers; compared at `self_attn`), `act_fn` (vLLM's SiluAndMul returns
silu(gate) * up, transformers' act_fn silu(gate) alone; compared at `mlp`), the model's own output
(compared at `model.norm`) and `lm_head` (vLLM never calls its forward; compared at `logits_processor`).

Sources: vLLM 0.32's model files (vllm/model_executor/models/qwen2.py, llama.py: `Qwen2DecoderLayer.forward`
returns `hidden_states, residual`; `qkv_proj` / `gate_up_proj` are QKVParallelLinear /
MergedColumnParallelLinear) and transformers' Qwen2/Llama modeling files. Pure names, no torch.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class Level(str, enum.Enum):
    """Where an engine output meets the reference."""

    MODULE = "module"  # the same module's output on both sides
    SPLIT = "split"  # a fused engine output cut into the reference's separate modules
    SUM = "hidden+residual"  # a decoder layer's (hidden, residual) pair summed into the layer output
    LAST_TOKEN = "last token"  # the engine's logits (one row per sequence) against lm_head's last row


@dataclass(frozen=True)
class Mapping:
    """How one engine module's output meets the reference.

    `reference_modules`: one module, or for SPLIT the parts in the order the fused output holds them;
    `engine_outputs`: the engine output indices used (SUM adds 0 and 1).
    """

    engine_module: str
    level: Level
    reference_modules: tuple[str, ...]
    engine_outputs: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class Unmapped:
    """An engine module with no reference counterpart, and where it is compared instead."""

    engine_module: str
    reason: str


_LAYER = re.compile(r"^(?:.*\.)?layers\.\d+$")
_FUSED = {
    "self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    "mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj"),
}
_NO_COUNTERPART = {
    "rotary_emb": "vLLM returns the rotated q and k, transformers' rotary embedding returns cos/sin; compared at "
    "self_attn",
    "attn": "the attention core is a function in transformers, not a module; compared at self_attn",
    "act_fn": "vLLM's SiluAndMul returns silu(gate) * up, transformers' act_fn silu(gate) alone; compared at mlp",
}
LOGITS_MODULE = "logits_processor"


def map_module(name: str) -> Mapping | Unmapped:
    """The mapping of engine module `name` (vLLM's `named_modules` name; the root is "<root>")."""
    for fused, parts in _FUSED.items():
        if name == fused or name.endswith("." + fused):
            prefix = name[: -len(fused)]
            return Mapping(name, Level.SPLIT, tuple(prefix + part for part in parts))
    if _LAYER.match(name):
        return Mapping(name, Level.SUM, (name,), (0, 1))
    if name == LOGITS_MODULE:
        return Mapping(name, Level.LAST_TOKEN, ("lm_head",))
    leaf = name.rsplit(".", 1)[-1]
    if leaf in _NO_COUNTERPART:
        return Unmapped(name, _NO_COUNTERPART[leaf])
    if name in ("<root>", "model"):
        return Unmapped(name, "the model's hidden states; transformers returns a ModelOutput; compared at model.norm")
    if name == "lm_head":
        return Unmapped(name, "vLLM computes logits through logits_processor, never lm_head's forward")
    return Mapping(name, Level.MODULE, (name,))


__all__ = ["LOGITS_MODULE", "Level", "Mapping", "Unmapped", "map_module"]
