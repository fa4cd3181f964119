"""A twin run's judgement: per-prompt divergences, a summary per pair of runs, and the verdict.

Side A is first compared with its own repeat (the run-to-run noise of that configuration: same server,
same prompts, same batches), then with side B. Every limit of the policy is raised to `noise_factor`
times what the noise pair measured, so on an engine that is not deterministic a divergence is judged
against what the configuration does to itself; on a deterministic one (vLLM on a CPU) the noise is zero
and the policy's own limits apply.

Verdict of A vs B, on the workbench's one scale:
- error: a request failed; or the share of prompts that diverged beyond the tie tolerance is above
  `diverged_share.error`; or the logprob drift of agreed tokens is above `logprob_drift_nats.error`;
- warning: the same against the warning limits, and the share of near ties above `near_tie_share.warning`;
- pass otherwise. Each reason names the number, the limit and where the limit came from.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import NamedTuple

import pandas as pd

from workbench.evaluate.thresholds import Band, judge_loss
from workbench.results.verdict import Verdict
from workbench.twin.diverge import Outcome, PromptDivergence, compare_generations
from workbench.twin.generation import Generation
from workbench.twin.policy import TwinThresholds


@dataclass(frozen=True)
class PairSummary:
    """One pair of runs (A vs B, or A vs its repeat) over the prompts both answered."""

    label: str
    prompts: int
    identical: int
    near_ties: int
    diverged: int
    failed: int
    first_position: int | None  # earliest divergence (near ties included)
    median_position: float | None
    max_drift: float  # largest logprob drift over agreed tokens
    tie_tolerance: float  # the tolerance the prompts were judged at

    @property
    def diverged_share(self) -> float:
        return self.diverged / self.prompts if self.prompts else 0.0

    @property
    def near_tie_share(self) -> float:
        return self.near_ties / self.prompts if self.prompts else 0.0

    def to_dict(self) -> dict:
        return asdict(self) | {"diverged_share": self.diverged_share, "near_tie_share": self.near_tie_share}


@dataclass(frozen=True)
class TwinVerdict:
    verdict: Verdict
    reasons: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"verdict": self.verdict.value, "reasons": list(self.reasons)}


def compare_runs(a: Sequence[Generation], b: Sequence[Generation], tie_tolerance: float) -> list[PromptDivergence]:
    """Prompt by prompt (the prompts both runs hold), in prompt order."""
    by_prompt = {g.prompt: g for g in b}
    return [
        compare_generations(g, by_prompt[g.prompt], tie_tolerance)
        for g in sorted(a, key=lambda g: g.prompt)
        if g.prompt in by_prompt
    ]


def summarize(rows: Sequence[PromptDivergence], label: str, tie_tolerance: float) -> PairSummary:
    count = {o: sum(r.outcome is o for r in rows) for o in Outcome}
    positions = [r.position for r in rows if r.position is not None]
    return PairSummary(
        label=label,
        prompts=len(rows),
        identical=count[Outcome.IDENTICAL],
        near_ties=count[Outcome.NEAR_TIE],
        diverged=count[Outcome.DIVERGED],
        failed=count[Outcome.FAILED],
        first_position=min(positions) if positions else None,
        median_position=float(statistics.median(positions)) if positions else None,
        max_drift=max((r.drift for r in rows), default=0.0),
        tie_tolerance=tie_tolerance,
    )


def effective_tie_tolerance(policy: TwinThresholds, noise: PairSummary | None) -> float:
    """The policy's tie tolerance, raised to noise_factor x the noise pair's drift."""
    return max(policy.tie_tolerance_nats, policy.noise_factor * noise.max_drift) if noise else policy.tie_tolerance_nats


def _raised(band: Band, floor: float) -> Band:
    """`band` with each limit raised to at least `floor` (the noise allowance)."""
    lift = lambda limit: None if limit is None else max(limit, floor)  # noqa: E731
    return Band(warning=lift(band.warning), error=lift(band.error))


class _Check(NamedTuple):
    """One number of the verdict: its value on A vs B, the policy's band, the noise pair's value, a share or not."""

    what: str
    value: float
    band: Band
    noise_value: float
    share: bool


_NO_NOISE = PairSummary("no noise run", 0, 0, 0, 0, 0, None, None, 0.0, 0.0)


def judge(pair: PairSummary, noise: PairSummary | None, policy: TwinThresholds) -> TwinVerdict:
    """The verdict of `pair` under `policy`, its limits raised by the noise pair (see the module docstring)."""
    reasons: list[str] = []
    verdicts: list[Verdict] = []
    if pair.failed:
        verdicts.append(Verdict.ERROR)
        reasons.append(f"{pair.failed} of {pair.prompts} prompts failed on a side: nothing to compare for them")
    factor = policy.noise_factor
    noise = noise or _NO_NOISE
    checks = (
        _Check(
            "prompts diverged beyond the tie tolerance",
            pair.diverged_share,
            policy.diverged_share,
            noise.diverged_share,
            True,
        ),
        _Check(
            "prompts diverged at a near tie", pair.near_tie_share, policy.near_tie_share, noise.near_tie_share, True
        ),
        _Check(
            "largest logprob drift of agreed tokens (nats)",
            pair.max_drift,
            policy.logprob_drift_nats,
            noise.max_drift,
            False,
        ),
    )
    for what, value, band, noise_value, share in checks:
        limits = _raised(band, factor * noise_value)
        found = judge_loss(value, limits) or Verdict.PASS
        verdicts.append(found)
        if found is not Verdict.PASS:
            limit = limits.error if found is Verdict.ERROR else limits.warning
            shown = f"{value:.0%}" if share else f"{value:.3g}"
            origin = (
                f"{factor:g} x the noise {noise_value:.3g}"
                if limit != (band.error if found is Verdict.ERROR else band.warning)
                else "the policy"
            )
            reasons.append(f"{what}: {shown} > {limit:.3g} ({origin})")
    verdict = Verdict.worst(verdicts)
    if verdict is Verdict.PASS:
        reasons.append(
            f"{pair.identical} identical, {pair.near_ties} near ties within {pair.tie_tolerance:.3g} nats, drift "
            f"{pair.max_drift:.3g} nats: within the policy and the noise"
        )
    return TwinVerdict(verdict, tuple(reasons))


def prompt_table(rows: Sequence[PromptDivergence], ids: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per prompt: outcome, where, both tokens and their logprobs on both sides, gap, drift."""
    table = pd.DataFrame([r.row() for r in rows])
    for column in ("position", "token_a", "token_b"):  # integers with gaps: shown as 3, not 3.0
        if column in table:
            table[column] = table[column].astype("Int64")
    if ids is not None and len(table):
        table.insert(1, "id", [ids[p] for p in table["prompt"]])
    return table


def summary_table(pairs: Sequence[tuple[PairSummary, TwinVerdict | None]]) -> pd.DataFrame:
    """One row per pair of runs: counts, positions, drift and the verdict (the noise pair has none)."""
    rows = []
    for pair, verdict in pairs:
        row = {k: v for k, v in pair.to_dict().items()}
        row["verdict"] = verdict.verdict.value if verdict else ""
        rows.append(row)
    return pd.DataFrame(rows)


__all__ = [
    "PairSummary",
    "TwinVerdict",
    "compare_runs",
    "effective_tie_tolerance",
    "judge",
    "prompt_table",
    "summarize",
    "summary_table",
]
