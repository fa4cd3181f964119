"""Verdicts on a profile, each with its evidence and the fix (docs/METHOD.md §12).

    busy share under `host_bound_busy_share` on a rank     -> HOST_BOUND, naming the host phase that dominates
    communication share over `communication_share`         -> COMMUNICATION_BOUND: lower the TP degree
    ranks spread over `slow_rank_spread` of the step time  -> SLOW_RANK (msprof-analyze's rule, below)
    long free time right before prefill<->decode switches  -> BUBBLES
    torch.compile compiling inside the window (CPU/CUDA)   -> COMPILATION: a shape not seen before
    nothing fires                                          -> BALANCED, with the shares as evidence

The slow-rank rule is msprof-analyze's `SlowRankAnalyzer` (Ascend/msprof-analyze @8399c1cd,
`msprof_analyze/advisor/analyzer/cluster/slow_rank_analyzer.py`): for each of Computing,
Communication(Not Overlapped) and Free, (max - min) over ranks divided by the mean total step time; a
ratio over RATIO_THRESHOLD = 0.05 flags that dimension. Here each rank's values are per-step means, so
ranks that profiled a different number of steps still compare.

The thresholds are data: `policy/profiling/thresholds.yaml`, read through the one recipe reader.
"""

from __future__ import annotations

import enum
import statistics
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from pydantic import Field

from workbench.profiling.profile import Profile
from workbench.recipes import Frozen, load_recipe_file
from workbench.results.verdict import Verdict
from workbench.settings import policy_dir

COMPUTE_PHASES = ("gpu_model_runner: forward",)  # the scope holding the model's compute: never "the host phase"


class Thresholds(Frozen):
    """policy/profiling/thresholds.yaml (see its comments)."""

    name: str
    description: str = ""
    host_bound_busy_share: float = Field(0.5, gt=0, lt=1)
    communication_share: float = Field(0.2, gt=0, lt=1)
    slow_rank_spread: float = Field(0.05, gt=0, lt=1)
    bubble_gap_factor: float = Field(3.0, gt=1)
    bubble_min_share: float = Field(0.05, ge=0, lt=1)
    min_steps: int = Field(3, ge=1)
    graph_mode_gain: float = Field(0.05, ge=0, lt=1)
    compile_share: float = Field(0.01, ge=0, lt=1)
    source: Path | None = Field(None, exclude=True)


def thresholds_path() -> Path:
    return policy_dir() / "profiling" / "thresholds.yaml"


def load_thresholds(path: Path | str | None = None) -> Thresholds:
    return load_recipe_file(
        Thresholds, Path(path) if path else thresholds_path(), what="profiling thresholds", name_from_file=True
    )


class ProfileFindingKind(str, enum.Enum):
    """What a profile shows, in profiling's own words; `verdict` puts it on the shared scale."""

    HOST_BOUND = "host_bound"
    COMMUNICATION_BOUND = "communication_bound"
    SLOW_RANK = "slow_rank"
    BUBBLES = "bubbles"
    COMPILATION = "compilation"
    THIN_SAMPLE = "thin_sample"
    NO_SHARES = "no_shares"
    BALANCED = "balanced"

    @property
    def verdict(self) -> Verdict:
        """Balanced passes; every other finding is a warning: the service runs, time is being lost (or, for a
        thin sample and missing shares, the profile cannot tell)."""
        return Verdict.PASS if self is ProfileFindingKind.BALANCED else Verdict.WARNING


@dataclass(frozen=True)
class ProfileFinding:
    """One judgement of a profile: what, about which rank, the evidence and the fix."""

    kind: ProfileFindingKind
    rank: str  # the rank it is about, or "all"
    evidence: str
    fix: str

    @property
    def verdict(self) -> Verdict:
        return self.kind.verdict


def _pct(value: float) -> str:
    return f"{value:.0%}" if value >= 0.01 or value == 0 else f"{value:.1%}"


def dominant_host_phase(profile: Profile, rank: str) -> tuple[str, float] | None:
    """The host phase of `rank` with the most time (the model forward excluded), and its time in µs."""
    phases = [
        (h.phase, h.total_us)
        for h in profile.host
        if h.rank == rank and not any(word in h.phase for word in COMPUTE_PHASES)
    ]
    return max(phases, key=lambda p: p[1]) if phases else None


HOST_FIXES = {
    "between ops": "the model's own Python and op dispatch between kernels dominate: graph mode (enforce_eager: "
    "false) removes most of it; larger batches (max_num_seqs, concurrency) give each op more work",
    "torch.compile": "torch.compile compiled a shape it had not seen, inside the window: warm up with the workload's "
    "whole range of batch sizes and lengths before profiling; in production such shapes recompile again (graph "
    "mode on dynamic shapes, docs/METHOD.md §13): pad or bucket lengths",
    "between steps": "the engine loop between steps (scheduling, output processing, IPC) dominates: give each "
    "step more work — raise max_num_seqs and the offered concurrency — and use graph mode (enforce_eager: false)",
    "schedule": "the scheduler dominates: larger, fewer steps (max_num_batched_tokens, max_num_seqs) amortise it",
    "preprocess": "input preparation dominates: larger batches amortise it; check the block table and prefix "
    "caching costs",
    "sample": "sampling dominates: greedy or top-k without penalties is cheapest; batch more requests per step",
    "postprocess": "output handling dominates: stream fewer, larger chunks; batch more requests per step",
    "bookkeep": "bookkeeping dominates: batch more requests per step",
}


def _host_fix(phase: str | None) -> str:
    if phase is None:
        return (
            "no host phases in this trace: capture with VLLM_CUSTOM_SCOPES_FOR_PROFILING=1 to see them; "
            "meanwhile raise the batch (max_num_seqs, concurrency) and try graph mode (enforce_eager: false)"
        )
    return next((fix for key, fix in HOST_FIXES.items() if key in phase), HOST_FIXES["between steps"])


def _host_bound(profile: Profile, ranks: pd.DataFrame, t: Thresholds) -> list[ProfileFinding]:
    """One verdict for the ranks busy less than the threshold, named after the least busy one's host phase."""
    low = ranks[ranks["busy_share"] < t.host_bound_busy_share].sort_values("busy_share")
    if low.empty:
        return []
    worst = low.iloc[0]
    rank = str(worst["rank"])
    phase = dominant_host_phase(profile, rank)
    named = (
        f"; the largest host phase on rank {rank} is '{phase[0]}' "
        f"({_pct(phase[1] / worst['total_us'])} of its step time)"
        if phase
        else ""
    )
    listing = ", ".join(
        f"rank {r['rank']} busy {_pct(r['busy_share'])} (computing {_pct(r['computing_share'])}, "
        f"communication {_pct(r['communication_share'])}, free {_pct(r['free_share'])})"
        for r in low.to_dict("records")
    )
    return [
        ProfileFinding(
            ProfileFindingKind.HOST_BOUND,
            ",".join(low["rank"].astype(str)),
            f"busy under {_pct(t.host_bound_busy_share)} of the step: {listing}{named}",
            _host_fix(phase[0] if phase else None),
        )
    ]


def _communication(ranks: pd.DataFrame, t: Thresholds) -> list[ProfileFinding]:
    heavy = ranks[ranks["communication_share"] > t.communication_share]
    if heavy.empty:
        return []
    listing = ", ".join(
        f"rank {r['rank']} {_pct(r['communication_share'])} (overlapped {_pct(r['overlapped_share'])})"
        for r in heavy.to_dict("records")
    )
    return [
        ProfileFinding(
            ProfileFindingKind.COMMUNICATION_BOUND,
            ",".join(heavy["rank"].astype(str)),
            f"communication not hidden by compute over {_pct(t.communication_share)} of the step: {listing}",
            "the tensor-parallel degree is too high for this model and link: lower tensor_parallel_size "
            "(more cards will not help), or serve more replicas (data parallel) instead",
        )
    ]


SPREAD_DIMENSIONS = (
    (
        "computing_us",
        "Computing",
        max,
        "slower compute on this card: check its health, clocks and temperature "
        "(npu-smi info -t ...), or an uneven split of the work",
    ),
    (
        "communication_not_overlapped_us",
        "Communication(Not Overlapped)",
        min,
        "the other ranks wait for this one "
        "in collectives: it is the slow card (or is late to each step); check it first",
    ),
    (
        "free_us",
        "Free",
        max,
        "this rank's host is slower (CPU contention, binding, another process): check the "
        "core binding and what else runs there",
    ),
)


def _slow_rank(ranks: pd.DataFrame, t: Thresholds) -> list[ProfileFinding]:
    """msprof-analyze's slow-rank rule on per-step means (see the module docstring)."""
    if len(ranks) < 2:
        return []
    per_step = ranks.assign(
        **{
            c: ranks[c] / ranks["steps"]
            for c in ("computing_us", "communication_not_overlapped_us", "free_us", "total_us")
        }
    )
    mean_total = float(per_step["total_us"].mean())
    found = []
    for column, label, pick, fix in SPREAD_DIMENSIONS:
        values = dict(zip(per_step["rank"].astype(str), per_step[column].astype(float)))
        spread = (max(values.values()) - min(values.values())) / mean_total if mean_total > 0 else 0.0
        if spread > t.slow_rank_spread:
            slow = pick(values, key=values.get)
            listing = ", ".join(f"rank {r} {v / 1000:.2f} ms" for r, v in values.items())
            found.append(
                ProfileFinding(
                    ProfileFindingKind.SLOW_RANK,
                    slow,
                    f"{label} per step differs by {_pct(spread)} of the mean step time "
                    f"(over {_pct(t.slow_rank_spread)}): {listing}",
                    f"rank {slow}: {fix}",
                )
            )
    return found


def _bubbles(profile: Profile, t: Thresholds) -> list[ProfileFinding]:
    """Steps right before a prefill<->decode switch whose free time is `bubble_gap_factor` x the usual."""
    found = []
    for rank in profile.ranks:
        steps = sorted((s for s in profile.steps if s.rank == rank), key=lambda s: s.step)
        if len(steps) < 3 or not all(s.phase for s in steps):
            continue
        switches = [
            a
            for a, b in zip(steps, steps[1:])
            if {a.phase, b.phase} == {"prefill", "decode"} or (a.phase != b.phase and "mixed" not in (a.phase, b.phase))
        ]
        usual = [a.free_us for a, b in zip(steps, steps[1:]) if a.phase == b.phase]
        if not switches or not usual:
            continue
        median = statistics.median(usual)
        excess = sum(s.free_us - median for s in switches if s.free_us > t.bubble_gap_factor * median)
        total = sum(s.total_us for s in steps)
        if total > 0 and excess / total >= t.bubble_min_share:
            count = sum(s.free_us > t.bubble_gap_factor * median for s in switches)
            found.append(
                ProfileFinding(
                    ProfileFindingKind.BUBBLES,
                    rank,
                    f"rank {rank}: {count} of {len(switches)} prefill/decode switches leave the device "
                    f"idle {excess / 1000:.1f} ms beyond the usual {median / 1000:.2f} ms per step "
                    f"({_pct(excess / total)} of the profiled time)",
                    "enable chunked prefill (enable_chunked_prefill: true, with max_num_batched_tokens) "
                    "so prefills ride along with decodes instead of draining the batch",
                )
            )
    return found


def _compilation(profile: Profile, ranks: pd.DataFrame, t: Thresholds) -> list[ProfileFinding]:
    """torch.compile compiling inside the window (a host phase the torch trace reader reports)."""
    totals = dict(zip(ranks["rank"].astype(str), ranks["total_us"].astype(float)))
    found = []
    for phase in profile.host:
        total = totals.get(phase.rank, 0.0)
        if "torch.compile" in phase.phase and total > 0 and phase.total_us / total > t.compile_share:
            found.append(
                ProfileFinding(
                    ProfileFindingKind.COMPILATION,
                    phase.rank,
                    f"rank {phase.rank}: torch.compile compiled for {phase.total_us / 1000:.1f} ms inside the window "
                    f"({_pct(phase.total_us / total)} of the profiled time): a shape the engine had not seen",
                    HOST_FIXES["torch.compile"],
                )
            )
    return found


def judge(profile: Profile, t: Thresholds | None = None) -> list[ProfileFinding]:
    """Every verdict that fires on `profile` (BALANCED when none does), most actionable first."""
    t = t or load_thresholds()
    ranks = profile.ranks_frame()
    if ranks.empty:
        return [
            ProfileFinding(
                ProfileFindingKind.NO_SHARES,
                "all",
                "; ".join(profile.notes) or "the profile holds no steps",
                "capture with the step timeline (step_trace_time.csv / trace_view.json / a torch trace)",
            )
        ]
    found = [
        *_host_bound(profile, ranks, t),
        *_communication(ranks, t),
        *_slow_rank(ranks, t),
        *_bubbles(profile, t),
        *_compilation(profile, ranks, t),
    ]
    thin = ranks[ranks["steps"] < t.min_steps] if not profile.whole_window else ranks.iloc[0:0]
    if not thin.empty:
        found.append(
            ProfileFinding(
                ProfileFindingKind.THIN_SAMPLE,
                ",".join(thin["rank"].astype(str)),
                "only " + ", ".join(f"{r['steps']} step(s) on rank {r['rank']}" for r in thin.to_dict("records")),
                "profile a longer window (more requests between /start_profile and /stop_profile)",
            )
        )
    if not found:
        shares = "; ".join(
            f"rank {r['rank']} busy {_pct(r['busy_share'])}, communication {_pct(r['communication_share'])}"
            for r in ranks.to_dict("records")
        )
        found.append(ProfileFinding(ProfileFindingKind.BALANCED, "all", shares, ""))
    return found


def verdicts_frame(verdicts: list[ProfileFinding]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"verdict": v.kind.value, "rank": v.rank, "evidence": v.evidence, "fix": v.fix} for v in verdicts],
        columns=["verdict", "rank", "evidence", "fix"],
    )
