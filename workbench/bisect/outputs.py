"""Greedy outputs of a server on fixed prompts, and whether they match the baseline's.

"Runs but answers wrong" is the failure a feature bisect most easily misses: the server starts, the
request returns 200, and the text is different. We ask for greedy tokens with their logprobs and the
top alternatives, then compare token by token:

- identical tokens whose logprobs moved by at most the tolerance: EXACT;
- a first differing token that the baseline itself ranked within the tolerance of its own pick (a
  near tie, which any change of summation order may flip): NEAR_TIE, accepted — later tokens are not
  compared, since the continuation legitimately differs;
- identical tokens with a logprob moved by more than the tolerance: DRIFT (wrong numbers);
- any other divergence: WRONG; NaN logprobs anywhere: NAN.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

import httpx


class Match(str, enum.Enum):
    EXACT = "exact"
    NEAR_TIE = "near_tie"
    DRIFT = "drift"
    WRONG = "wrong"
    NAN = "nan"

    @property
    def ok(self) -> bool:
        return self in (Match.EXACT, Match.NEAR_TIE)


@dataclass(frozen=True)
class GreedyOutput:
    prompt: str
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]  # of each chosen token
    top: tuple[tuple[tuple[int, float], ...], ...]  # per position: (token id, logprob), best first
    text: str

    def to_dict(self) -> dict:
        return {
            "prompt": self.prompt,
            "token_ids": list(self.token_ids),
            "logprobs": list(self.logprobs),
            "top": [[list(p) for p in pos] for pos in self.top],
            "text": self.text,
        }

    @classmethod
    def from_dict(cls, raw: dict) -> GreedyOutput:
        return cls(
            raw["prompt"],
            tuple(raw["token_ids"]),
            tuple(raw["logprobs"]),
            tuple(tuple((int(t), float(lp)) for t, lp in pos) for pos in raw["top"]),
            raw["text"],
        )


@dataclass(frozen=True)
class OutputComparison:
    match: Match
    max_drift: float  # largest |logprob change| over matching tokens (nats)
    detail: str


def _token_id(text: str) -> int:
    # With return_tokens_as_token_ids vLLM spells tokens "token_id:123".
    return int(text.rsplit(":", 1)[1])


def greedy_outputs(
    client: httpx.Client, url: str, model: str, prompts: Sequence[str], max_tokens: int, top_logprobs: int
) -> list[GreedyOutput]:
    """One /v1/completions request for all prompts: temperature 0, logprobs, tokens as ids."""
    response = client.post(
        f"{url}/v1/completions",
        json={
            "model": model,
            "prompt": list(prompts),
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "logprobs": top_logprobs,
            "return_tokens_as_token_ids": True,
            "ignore_eos": True,
            "seed": 0,
        },
    )
    response.raise_for_status()
    choices = sorted(response.json()["choices"], key=lambda c: c["index"])
    outputs = []
    for prompt, choice in zip(prompts, choices):
        lp = choice["logprobs"]
        top = tuple(
            tuple(sorted(((_token_id(t), float(v)) for t, v in (pos or {}).items()), key=lambda p: -p[1]))
            for pos in lp["top_logprobs"]
        )
        logprobs = tuple(float("nan") if v is None else float(v) for v in lp["token_logprobs"])
        outputs.append(GreedyOutput(prompt, tuple(_token_id(t) for t in lp["tokens"]), logprobs, top, choice["text"]))
    return outputs


def compare_outputs(
    baseline: Sequence[GreedyOutput], test: Sequence[GreedyOutput], tolerance: float
) -> OutputComparison:
    """The worst per-prompt match (see the module docstring for the rules)."""
    order = list(Match)
    worst, worst_detail, max_drift = Match.EXACT, "token-identical", 0.0
    for b, t in zip(baseline, test):
        match, drift, detail = _compare_one(b, t, tolerance)
        max_drift = max(max_drift, drift)
        if order.index(match) > order.index(worst):
            worst, worst_detail = match, f"prompt {b.prompt!r}: {detail}"
    if worst is Match.NEAR_TIE and worst_detail == "token-identical":
        worst_detail = "near-tie flips only"
    return OutputComparison(worst, max_drift, worst_detail)


def _compare_one(b: GreedyOutput, t: GreedyOutput, tolerance: float) -> tuple[Match, float, str]:
    if any(math.isnan(x) for x in t.logprobs):
        return Match.NAN, math.inf, "NaN logprobs"
    drift = 0.0
    for i, (tb, tt) in enumerate(zip(b.token_ids, t.token_ids)):
        if tb == tt:
            change = abs(b.logprobs[i] - t.logprobs[i])
            drift = max(drift, change)
            if change > tolerance:
                return Match.DRIFT, drift, f"token {i} logprob moved {change:.3g} nats (> {tolerance})"
            continue
        baseline_view = dict(b.top[i]) if i < len(b.top) else {}
        if tt in baseline_view and b.logprobs[i] - baseline_view[tt] <= tolerance:
            return Match.NEAR_TIE, drift, f"token {i}: near tie ({b.logprobs[i] - baseline_view[tt]:.3g} nats)"
        return Match.WRONG, drift, f"token {i}: {tt} instead of {tb}; text {t.text[:60]!r} vs {b.text[:60]!r}"
    if len(b.token_ids) != len(t.token_ids):
        return Match.WRONG, drift, f"{len(t.token_ids)} tokens instead of {len(b.token_ids)}"
    return Match.EXACT, drift, "token-identical"
