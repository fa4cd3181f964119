"""Per-token negative log-likelihood of a reference continuation given the prompt, from prompt logprobs.

NLL is the cheapest accuracy signal that needs no generation and no judge: a change of precision that
hurts the model shows up as a higher NLL of text it used to predict well (HumanEval's canonical
solutions; the text set's reference continuations).

The token boundary is exact by construction. The prompt is tokenised alone, exactly as the server
tokenises it for generation (special tokens added; chat prompts rendered with the server's template),
and the reference on its own without special tokens; the request sends `prompt_ids + reference_ids`.
So the scored tokens spell exactly the reference text and condition on exactly the tokens the greedy
completion of the same problem starts from. (Tokenising prompt + reference in one piece instead can merge
the prompt's last token with the reference's first, e.g. '\\n' + '    return' -> '\\n   ' + ' return',
which scores part of the prompt and conditions on a prompt the model never sees at generation time.)

Worked example: prompt_ids = [1, 50, 51] and reference_ids = [60, 61], so the request sends
[1, 50, 51, 60, 61] and vLLM answers five entries, the first null. Entry i holds log p(token i | tokens
< i); the reference tokens are positions 3 and 4, so with logprobs -0.25 and -1.5 the NLL sum is 1.75
nats and the mean 0.875 nats/token.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from workbench.evaluate.datasets import Problem

CLAMPED_LOGPROB = -9999.0  # vLLM's stand-in for -inf in JSON (clamp_prompt_logprobs)


@dataclass(frozen=True)
class TokenizedProblem:
    prompt_ids: tuple[int, ...]
    reference_ids: tuple[int, ...]  # empty when the problem has no reference

    @property
    def request_ids(self) -> tuple[int, ...]:
        return self.prompt_ids + self.reference_ids


def tokenize_problem(problem: Problem, tokenizer: Any) -> TokenizedProblem:
    """Prompt and reference tokenised apart (see the module docstring for why)."""
    if problem.is_chat:
        prompt_ids = tokenizer.encode_chat(problem)
    else:
        prompt_ids = tokenizer.encode(problem.prompt, add_special_tokens=True)
    reference = tokenizer.encode(problem.reference, add_special_tokens=False) if problem.reference else ()
    return TokenizedProblem(tuple(prompt_ids), tuple(reference))


@dataclass(frozen=True)
class NllResult:
    """The reference tokens' logprobs (natural log) and their negated float64 sum."""

    logprobs: tuple[float, ...]
    nll_sum: float
    clamped: int  # tokens the server reported as -inf (sent as -9999.0)

    @property
    def n_tokens(self) -> int:
        return len(self.logprobs)

    @property
    def mean(self) -> float:
        return self.nll_sum / self.n_tokens if self.logprobs else math.nan


def _logprob_of(entry: Any, token_id: int, position: int) -> float:
    """The logprob of `token_id` in one prompt_logprobs entry ({"<id>": {"logprob": x, ...}})."""
    if not isinstance(entry, dict):
        raise ValueError(f"prompt_logprobs[{position}] is {entry!r}, expected a mapping of token id to logprob")
    value = entry.get(str(token_id), entry.get(token_id))
    if value is None:
        raise ValueError(f"prompt_logprobs[{position}] has no entry for the prompt's token {token_id}")
    return float(value["logprob"] if isinstance(value, dict) else value)


def reference_nll(entries: Sequence[Any], token_ids: Sequence[int], start: int) -> NllResult:
    """NLL of `token_ids[start:]` from the server's `prompt_logprobs` for the whole of `token_ids`."""
    if len(entries) != len(token_ids):
        raise ValueError(f"the server returned {len(entries)} prompt logprobs for {len(token_ids)} prompt tokens")
    if not 0 < start <= len(token_ids):
        raise ValueError(f"reference start {start} outside 1..{len(token_ids)}")
    logprobs = tuple(_logprob_of(entries[i], token_ids[i], i) for i in range(start, len(token_ids)))
    clamped = sum(1 for lp in logprobs if lp <= CLAMPED_LOGPROB)
    return NllResult(logprobs, -math.fsum(logprobs), clamped)


@dataclass(frozen=True)
class NllTotal:
    """NLL over many problems: token-weighted (micro) mean, and the mean of per-problem means (macro)."""

    problems: int
    tokens: int
    nll_sum: float
    macro_mean: float

    @property
    def mean(self) -> float:
        return self.nll_sum / self.tokens if self.tokens else math.nan

    @property
    def perplexity(self) -> float:
        return math.exp(self.mean) if self.tokens else math.nan


def total_nll(results: Sequence[NllResult]) -> NllTotal:
    scored = [r for r in results if r.n_tokens]
    macro = math.fsum(r.mean for r in scored) / len(scored) if scored else math.nan
    return NllTotal(len(scored), sum(r.n_tokens for r in scored), math.fsum(r.nll_sum for r in scored), macro)
