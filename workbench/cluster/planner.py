"""The layout planner: device memory per rank before anything starts, and the largest context and batch that fit.

For a model (its config.json), chips and a layout (tp, dp, ep, pp), each rank holds:

    weights      its share: tensor parallelism splits attention, MLP, embedding and LM head; pipeline
                 parallelism gives each stage its layers (the embedding to the first, the LM head to the last);
                 data parallelism *replicates* all of it; expert parallelism splits whole experts over tp x dp
                 ranks (without it, tensor parallelism splits each expert)
    activations  the profile run's peak: max_num_batched_tokens tokens through the widest layer, plus the
                 sampler's logits for max_num_seqs sequences (an estimate; no NPU measured here)
    graphs       captured graphs (0 with --enforce-eager)
    hccl         2 x HCCL_BUFFSIZE for every communicator the rank is in (world, tp, pp, dp for MoE, ep)
    connector    what the KV connector takes at load (prefill/decode with --pd)
    kv cache     the rest of gpu_memory_utilization x chip memory; on the CPU engine VLLM_CPU_KVCACHE_SPACE

KV tokens per rank = floor(kv bytes / (block_size x bytes per token)) x block_size, bytes per token
= 2 x max(1, kv_heads / tp) x head_dim x layers of the stage x dtype bytes (MLA: one latent per layer),
as vLLM v1 sizes its KV cache (vllm/v1/core/kv_cache_utils.py). A layout that leaves no room, or less than one
request of --max-model-len, is refused naming the knob and the number (vllm-ascend #9372 asks for exactly this).
The figures come from policy/cluster/planner.yaml, each cited.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from workbench.cluster.model_facts import ModelFacts
from workbench.errors import WorkbenchError
from workbench.recipes.reader import Frozen, load_recipe_file
from workbench.settings import policy_dir

GIB = 2**30
MIB = 2**20
DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2, "auto": 2, "int8": 1}


class ChipFigure(Frozen):
    memory_mb: int = Field(gt=0)
    source: str


class Figure(Frozen):
    gib: float = Field(ge=0)
    source: str


class HcclFigure(Frozen):
    buffsize_mb: int = Field(gt=0)
    per_communicator: int = Field(gt=0)
    source: str


class PlannerFigures(Frozen):
    chips: dict[str, ChipFigure]
    hccl: HcclFigure
    graph_capture: Figure
    runtime: Figure
    connectors: dict[str, Figure]


def load_figures(path: Path | str | None = None) -> PlannerFigures:
    where = Path(path) if path else policy_dir() / "cluster" / "planner.yaml"
    return load_recipe_file(PlannerFigures, where, what="planner figures file", required="'chips' and 'hccl'")


@dataclass(frozen=True)
class Layout:
    """tp x pp x dp ranks; `ep` True spreads experts over tp x dp ranks (vLLM's --enable-expert-parallel)."""

    tp: int = 1
    dp: int = 1
    pp: int = 1
    ep: bool = False

    @property
    def ranks(self) -> int:
        return self.tp * self.pp * self.dp

    @classmethod
    def parse(cls, text: str) -> Layout:
        """'tp=8,dp=2,ep=16,pp=1' -> Layout(8, 2, 1, True); ep=N must be tp x dp (or 0/1 for off)."""
        values: dict[str, int] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, eq, value = part.partition("=")
            if not eq or key.strip() not in ("tp", "dp", "pp", "ep") or not value.strip().isdigit():
                raise WorkbenchError(
                    f"--layout {text!r}: write tp=N,dp=N,ep=N,pp=N (each a whole number), e.g. tp=8,dp=2"
                )
            values[key.strip()] = int(value)
        layout = cls(
            values.get("tp", 1) or 1, values.get("dp", 1) or 1, values.get("pp", 1) or 1, values.get("ep", 0) > 1
        )
        if layout.ep and values["ep"] != layout.tp * layout.dp:
            raise WorkbenchError(
                f"--layout {text!r}: vLLM's expert parallelism spans tp x dp = {layout.tp * layout.dp} ranks, not ep={values['ep']}"
            )
        return layout

    def text(self) -> str:
        return f"tp={self.tp},dp={self.dp},pp={self.pp}" + (f",ep={self.tp * self.dp}" if self.ep else "")


@dataclass(frozen=True)
class Chips:
    """`2x8x910B3` (nodes x chips per node x kind), `16x910B3`, or `1xcpu` (the CPU engine)."""

    nodes: int
    per_node: int
    kind: str
    memory_bytes: int | None  # None on the CPU engine: its KV budget is VLLM_CPU_KVCACHE_SPACE

    @property
    def count(self) -> int:
        return self.nodes * self.per_node

    @classmethod
    def parse(cls, text: str, figures: PlannerFigures) -> Chips:
        match = re.fullmatch(r"(?:(\d+)x)?(\d+)x([\w.-]+)", text.strip())
        if not match:
            raise WorkbenchError(f"--chips {text!r}: write NODESxCHIPSxKIND, CHIPSxKIND or 1xcpu, e.g. 2x8x910B3")
        nodes, per_node, kind = int(match.group(1) or 1), int(match.group(2)), match.group(3)
        if kind.lower() == "cpu":
            return cls(nodes, per_node, "cpu", None)
        if kind not in figures.chips:
            raise WorkbenchError(
                f"--chips {text!r}: unknown chip {kind!r}; known: {', '.join(figures.chips)} (policy/cluster/planner.yaml)"
            )
        return cls(nodes, per_node, kind, figures.chips[kind].memory_mb * MIB)


@dataclass(frozen=True)
class Engine:
    """The engine settings the plan depends on (vLLM's flags of the same names)."""

    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    kv_cache_bytes: int | None = None  # the CPU engine's VLLM_CPU_KVCACHE_SPACE, or --kv-cache-memory-bytes
    block_size: int = 128
    dtype: str | None = None  # None: the model's
    weight_bits: int | None = None  # quantized linear weights (8 for W8A8, 4 for W4A8); None: dtype
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    enforce_eager: bool = False
    hccl_buffsize_mb: int | None = None
    connector: str | None = None  # with --pd: the KV connector both sides load


def _stage_layers(facts: ModelFacts, pp: int) -> int:
    return math.ceil(facts.layers / pp)


def weights_per_rank(facts: ModelFacts, layout: Layout, engine: Engine) -> dict[str, int]:
    """Bytes of weights the busiest rank holds, by part (see the module docstring for what each split does)."""
    params = facts.parameters()
    float_bytes = DTYPE_BYTES.get(engine.dtype or facts.dtype, 2)
    linear_bytes = engine.weight_bits / 8 if engine.weight_bits else float_bytes
    stage = _stage_layers(facts, layout.pp) / facts.layers
    experts_share = 1 / (layout.tp * layout.dp) if layout.ep else 1 / layout.tp
    return {
        "embedding": int(params["embedding"] * float_bytes / layout.tp),
        "lm_head": int(params["lm_head"] * float_bytes / layout.tp) if layout.pp == 1 else 0,
        "attention": int(params["attention"] * stage * linear_bytes / layout.tp),
        "mlp": int(params["mlp"] * stage * linear_bytes / layout.tp),
        "experts": int(params["experts"] * stage * linear_bytes * experts_share),
        "norms": int(params["norms"] * stage * float_bytes),
    }


def kv_bytes_per_token(facts: ModelFacts, layout: Layout, engine: Engine) -> int:
    kv_heads = max(1, facts.kv_heads // layout.tp)
    return facts.kv_bytes_per_token(
        kv_heads, _stage_layers(facts, layout.pp), DTYPE_BYTES.get(engine.dtype or facts.dtype, 2)
    )


def communicators(facts: ModelFacts, layout: Layout) -> int:
    """HCCL communicators one rank joins: the world group, tp, pp, dp (MoE ranks synchronise), ep."""
    if layout.ranks == 1:
        return 0
    found = 1 + (layout.tp > 1) + (layout.pp > 1)
    if facts.moe:
        found += (layout.dp > 1) + layout.ep
    return found


def activation_bytes(facts: ModelFacts, layout: Layout, engine: Engine) -> int:
    """The profile run's peak estimate: hidden states and the MLP's widest intermediate for the batched tokens,
    plus float32 logits for every running sequence."""
    width = max(facts.intermediate, facts.expert_intermediate * max(1, facts.shared_experts)) // layout.tp
    per_token = (2 * facts.hidden + 2 * width) * DTYPE_BYTES.get(engine.dtype or facts.dtype, 2)
    return engine.max_num_batched_tokens * per_token + engine.max_num_seqs * facts.vocab // layout.tp * 4


__all__ = [
    "Chips",
    "DTYPE_BYTES",
    "Engine",
    "GIB",
    "Layout",
    "PlannerFigures",
    "activation_bytes",
    "communicators",
    "kv_bytes_per_token",
    "load_figures",
    "weights_per_rank",
]
