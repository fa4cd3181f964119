"""The first diverging token of two greedy generations of the same prompt, and whether it is a near tie.

Greedy decoding picks the most likely token, so where two configurations pick different tokens each
preferred its own: A preferred token a over b by margin_a = lpA(a) - lpA(b) >= 0, B preferred b over a by
margin_b = lpB(b) - lpB(a) >= 0. Their sum, the *gap*, is how far the log-odds of a against b moved
between the sides. Worked example: A gives a -1.20 and b -1.21 (margin 0.01), B gives b -1.19 and a -1.20
(margin 0.01): the gap is 0.02 nats, a near tie that any rounding difference flips. A gives a -0.1 and b
-3.0, B gives b -0.5 and a -2.0: the gap is 4.4 nats, a real disagreement.

A side returns only its top-k runners-up; when the other side's token is not among them its logprob is at
most the k-th value, so the margin, and the gap, is a lower bound (`gap_is_lower_bound`) and the
divergence is never called a tie. Drift is the largest |lpA - lpB| of the same token at the same position
over the prefix both sides agree on: a numeric difference that has not (yet) changed a token.
Pure: no server, no files.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass

from workbench.results.verdict import Verdict
from workbench.twin.generation import Generation


class Outcome(str, enum.Enum):
    IDENTICAL = "identical"  # the same tokens throughout
    NEAR_TIE = "near tie"  # diverged where the two tokens were within the tie tolerance: legitimate
    DIVERGED = "diverged"  # diverged beyond the tie tolerance
    FAILED = "failed"  # a side's request failed: nothing to compare

    @property
    def verdict(self) -> Verdict:
        return Verdict.ERROR if self in (Outcome.DIVERGED, Outcome.FAILED) else Verdict.PASS


@dataclass(frozen=True)
class PromptDivergence:
    """Where and how one prompt's two generations part (positions count generated tokens from 0)."""

    prompt: int
    outcome: Outcome
    common: int  # leading tokens both sides generated alike
    position: int | None = None  # the first diverging position (= common); None when identical or failed
    token_a: int | None = None  # A's token there (None: A had ended)
    token_b: int | None = None
    a_logprob_a: float | None = None  # A's logprob of its own token
    a_logprob_b: float | None = None  # A's logprob of B's token (None: outside A's top-k)
    b_logprob_b: float | None = None
    b_logprob_a: float | None = None
    gap: float | None = None  # nats the log-odds of token_a against token_b moved between the sides
    gap_is_lower_bound: bool = False
    drift: float = 0.0  # largest |lpA - lpB| over the common prefix
    detail: str = ""

    def row(self) -> dict:
        raw = asdict(self)
        raw["outcome"] = self.outcome.value
        return raw


def _margin(own: float | None, other: float | None, side: Generation, position: int) -> tuple[float | None, bool]:
    """(own - other, whether it is a lower bound); other unknown -> bounded by the side's smallest runner-up."""
    if own is None:
        return None, False
    if other is not None:
        return max(own - other, 0.0), False
    floor = min(side.top[position].values()) if position < len(side.top) and side.top[position] else None
    return (max(own - floor, 0.0), True) if floor is not None else (None, True)


def _drift(a: Generation, b: Generation, common: int) -> float:
    pairs = zip(a.logprobs[:common], b.logprobs[:common], strict=True)
    return max((abs(x - y) for x, y in pairs), default=0.0)


def compare_generations(a: Generation, b: Generation, tie_tolerance: float) -> PromptDivergence:
    """The first diverging token of `a` and `b` (the same prompt on sides A and B), judged at `tie_tolerance`."""
    if a.failed or b.failed:
        which = "; ".join(f"{side}: {g.error}" for side, g in (("A", a), ("B", b)) if g.failed)
        return PromptDivergence(a.prompt, Outcome.FAILED, 0, detail=f"request failed ({which})")
    shorter = min(len(a.token_ids), len(b.token_ids))
    common = next((i for i, (x, y) in enumerate(zip(a.token_ids, b.token_ids)) if x != y), shorter)
    drift = _drift(a, b, common)
    if common == len(a.token_ids) == len(b.token_ids):
        return PromptDivergence(a.prompt, Outcome.IDENTICAL, common, drift=drift, detail=f"identical ({common} tokens)")
    token_a = a.token_ids[common] if common < len(a.token_ids) else None
    token_b = b.token_ids[common] if common < len(b.token_ids) else None
    if token_a is None or token_b is None:
        ended = "A" if token_a is None else "B"
        detail = f"{ended} ended after {common} tokens, the other side went on"
        return PromptDivergence(
            a.prompt, Outcome.DIVERGED, common, common, token_a, token_b, drift=drift, detail=detail
        )
    a_a, a_b = a.logprob_of(common, token_a), a.logprob_of(common, token_b)
    b_b, b_a = b.logprob_of(common, token_b), b.logprob_of(common, token_a)
    margin_a, bound_a = _margin(a_a, a_b, a, common)
    margin_b, bound_b = _margin(b_b, b_a, b, common)
    gap = margin_a + margin_b if margin_a is not None and margin_b is not None else None
    bound = bound_a or bound_b
    tie = gap is not None and not bound and gap <= tie_tolerance
    if tie:
        detail = f"near tie at token {common}: the pair's log-odds moved {gap:.3g} nats (tolerance {tie_tolerance:g})"
    elif gap is None:
        detail = f"diverged at token {common}: the logprobs needed for the gap were not returned"
    else:
        detail = f"diverged at token {common}: the pair's log-odds moved {'>= ' if bound else ''}{gap:.3g} nats"
        if bound:
            detail += " (a side's token was outside the other side's top-k)"
    outcome = Outcome.NEAR_TIE if tie else Outcome.DIVERGED
    logprobs = {"a_logprob_a": a_a, "a_logprob_b": a_b, "b_logprob_b": b_b, "b_logprob_a": b_a}
    return PromptDivergence(
        a.prompt,
        outcome,
        common,
        common,
        token_a,
        token_b,
        **logprobs,
        gap=gap,
        gap_is_lower_bound=bound,
        drift=drift,
        detail=detail,
    )


__all__ = ["Outcome", "PromptDivergence", "compare_generations"]
