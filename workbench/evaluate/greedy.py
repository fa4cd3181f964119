"""Greedy completions compared token by token with a reference run's (the float model, or the same model).

Temperature 0 makes a completion a deterministic function of the model's numbers, so two servers that
agree produce the same tokens. Once two completions differ at one token, everything after it is
conditioned on different text and no longer comparable, so agreement is measured as the common prefix:

    agreement = common_prefix / max(len(test), len(reference))     (1.0 when both are empty)

Worked example: reference [5, 6, 7, 8], test [5, 6, 9] -> common prefix 2, agreement 2 / 4 = 0.5, not an
exact match; the first divergence is at token 2. Over a data set we report the mean agreement (each
problem weighs the same), the token-weighted agreement (sum of prefixes / sum of lengths) and the exact
match rate (share of problems whose token sequences are identical).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Where a HumanEval completion ends: a new top-level statement, after the stops of the Codex paper's
# harness. The OpenAI API (and vLLM 0.32, which validates it) takes at most 4 stop strings: a top-level
# `class` is the rarest, so it is left out.
CODE_STOP = ("\ndef ", "\n#", "\nif __name__", "\nprint(")


@dataclass(frozen=True)
class Agreement:
    common_prefix: int
    test_tokens: int
    reference_tokens: int

    @property
    def longest(self) -> int:
        return max(self.test_tokens, self.reference_tokens)

    @property
    def fraction(self) -> float:
        return self.common_prefix / self.longest if self.longest else 1.0

    @property
    def exact(self) -> bool:
        return self.common_prefix == self.test_tokens == self.reference_tokens


def agreement(test: Sequence[int], reference: Sequence[int]) -> Agreement:
    prefix = 0
    for a, b in zip(test, reference):
        if a != b:
            break
        prefix += 1
    return Agreement(prefix, len(test), len(reference))


@dataclass(frozen=True)
class AgreementTotal:
    problems: int
    mean: float  # mean of per-problem fractions
    token_weighted: float  # sum of common prefixes / sum of the longer lengths
    exact_match_rate: float


def total_agreement(pairs: Sequence[Agreement]) -> AgreementTotal:
    if not pairs:
        return AgreementTotal(0, math.nan, math.nan, math.nan)
    longest = sum(p.longest for p in pairs)
    weighted = sum(p.common_prefix for p in pairs) / longest if longest else 1.0
    return AgreementTotal(
        len(pairs),
        math.fsum(p.fraction for p in pairs) / len(pairs),
        weighted,
        sum(p.exact for p in pairs) / len(pairs),
    )
