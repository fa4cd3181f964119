"""`--adaptive`: find the largest KV budget that starts, then the best throughput under the SLO.

In the spirit of vLLM's benchmarks/auto_tune/auto_tune.sh, in two steps:

1. Budget: try the KV budgets from the largest down (`kv_cache_memory_bytes` on CPU,
   `gpu_memory_utilization` on NPU/GPU — on Ascend the CANN runtime and graph compilation need the
   rest) with the most demanding candidate (largest max_num_seqs and max_num_batched_tokens); the
   first budget whose server starts is kept, and that server's measurements count as the first
   candidate's (no second start).
2. Candidates: every max_num_seqs x max_num_batched_tokens pair with that budget, each under the
   spec's workloads. The answer is the point with the highest output throughput that meets the SLO.

Every measurement goes through the same results store as a grid sweep, so an interrupted search
resumes: budgets already known not to start are not tried again, points already measured are reused.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.errors import WorkbenchError
from workbench.recipes import ServingRecipe
from workbench.sweep.analysis import aggregate_repeats, best_under_slo, format_value
from workbench.sweep.runner import SweepRunner
from workbench.sweep.spec import AdaptiveSpec, SweepPoint, SweepSpec, config_points, load_base_recipe
from workbench.sweep.store import PointResult, PointStatus, results_frame

RunPoints = Callable[[Sequence[SweepPoint]], list[PointResult]]


@dataclass(frozen=True)
class BudgetTrial:
    value: float | int
    started: bool
    crash_kind: str | None


@dataclass(frozen=True)
class AdaptiveOutcome:
    budget_key: str  # "kv_cache_memory_bytes" or "gpu_memory_utilization"
    trials: tuple[BudgetTrial, ...]  # largest first, up to and including the one kept
    budget: float | int | None  # None: no budget started
    candidates: tuple[dict[str, Any], ...]  # in the order measured
    results: tuple[PointResult, ...]
    best: pd.Series | None  # best configuration under the SLO (repeats averaged)

    def summary(self) -> str:
        tried = ", ".join(f"{format_value(t.value)} ({'starts' if t.started else t.crash_kind})" for t in self.trials)
        if self.budget is None:
            return f"{self.budget_key}: none of {tried} starts; lower max_num_seqs / max_model_len or free memory"
        best = (
            "no candidate meets the SLO"
            if self.best is None
            else (
                f"best: max_num_seqs={self.best['max_num_seqs']}, max_num_batched_tokens="
                f"{self.best['max_num_batched_tokens']} at {self.best['output_throughput']:.1f} tok/s"
            )
        )
        return f"{self.budget_key}={format_value(self.budget)} (tried {tried}); {best}"


def budget_axis(adaptive: AdaptiveSpec) -> tuple[str, list[float | int]]:
    """('kv_cache_memory_bytes', [largest, ..., smallest]) or the same for gpu_memory_utilization."""
    if adaptive.kv_cache_memory_bytes:
        return "kv_cache_memory_bytes", sorted(adaptive.kv_cache_memory_bytes, reverse=True)
    return "gpu_memory_utilization", sorted(adaptive.gpu_memory_utilization, reverse=True)


def candidates(adaptive: AdaptiveSpec) -> list[dict[str, int]]:
    """max_num_seqs x max_num_batched_tokens, most demanding first (the budget probe uses the first)."""
    seqs = sorted(adaptive.max_num_seqs, reverse=True)
    tokens = sorted(adaptive.max_num_batched_tokens, reverse=True)
    return [{"max_num_seqs": s, "max_num_batched_tokens": t} for s, t in itertools.product(seqs, tokens)]


def search(spec: SweepSpec, base: ServingRecipe, run_points: RunPoints) -> AdaptiveOutcome:
    """The two-step search over `run_points` (a `SweepRunner.run_points`, or any function with its contract)."""
    if spec.adaptive is None:
        raise WorkbenchError(
            f"{spec.source or spec.name}: --adaptive needs an 'adaptive:' section "
            "(kv_cache_memory_bytes or gpu_memory_utilization, max_num_seqs, max_num_batched_tokens)"
        )
    key, budgets = budget_axis(spec.adaptive)
    combos = candidates(spec.adaptive)
    trials: list[BudgetTrial] = []
    results: list[PointResult] = []
    chosen = None
    for value in budgets:
        probe = run_points(config_points(spec, base, {key: value, **combos[0]}))
        failed = [r for r in probe if r.status is PointStatus.START_FAILED]
        trials.append(BudgetTrial(value, not failed, (failed[0].crash or {}).get("kind") if failed else None))
        if not failed:
            chosen = value
            results += probe
            break
    if chosen is None:
        return AdaptiveOutcome(key, tuple(trials), None, (), (), None)
    for combo in combos[1:]:
        results += run_points(config_points(spec, base, {key: chosen, **combo}))
    return AdaptiveOutcome(
        key, tuple(trials), chosen, tuple(combos), tuple(results), pick_best(results, spec.slo.limits())
    )


def pick_best(results: Sequence[PointResult], limits: Mapping[str, float]) -> pd.Series | None:
    """The configuration (repeats averaged) with the highest output throughput meeting every limit."""
    configs = aggregate_repeats(results_frame(results))
    if configs.empty:
        return None
    return best_under_slo(configs, limits)


def run_adaptive(
    spec: SweepSpec, out_dir: Path, *, progress: bool = True, extra_env: Mapping[str, str] | None = None
) -> AdaptiveOutcome:
    """The adaptive search with a real `SweepRunner` writing `out_dir/results.jsonl`."""
    runner = SweepRunner(spec, out_dir, progress=progress, extra_env=extra_env)
    return search(spec, load_base_recipe(spec), runner.run_points)
