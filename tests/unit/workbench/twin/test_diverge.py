"""The first diverging token of two generations, the gap and the near-tie rule, with exact numbers."""

from __future__ import annotations

import pytest

from workbench.twin.diverge import Outcome, compare_generations
from workbench.twin.generation import Generation


def gen(tokens, logprobs, tops=None, prompt=0, error=None) -> Generation:
    tops = tops or [{t: lp} for t, lp in zip(tokens, logprobs, strict=True)]
    return Generation(prompt, 0, tuple(tokens), tuple(logprobs), tuple(tops), "length", error)


def test_identical_generations_report_their_drift():
    a = gen([5, 6, 7], [-1.0, -2.0, -0.5])
    b = gen([5, 6, 7], [-1.0, -2.25, -0.5])
    d = compare_generations(a, b, tie_tolerance=0.02)
    assert (d.outcome, d.common, d.position, d.drift) == (Outcome.IDENTICAL, 3, None, 0.25)
    assert d.outcome.verdict.value == "pass"


def test_a_near_tie_is_named_with_its_gap():
    # A prefers 9 over 4 by 0.01; B prefers 4 over 9 by 0.005: the pair's log-odds moved 0.015 nats
    a = gen([1, 9], [-1.0, -1.20], [{1: -1.0}, {9: -1.20, 4: -1.21, 3: -5.0}])
    b = gen([1, 4], [-1.0, -1.195], [{1: -1.0}, {4: -1.195, 9: -1.20, 3: -5.0}])
    d = compare_generations(a, b, tie_tolerance=0.02)
    assert (d.outcome, d.position, d.token_a, d.token_b) == (Outcome.NEAR_TIE, 1, 9, 4)
    assert (d.a_logprob_a, d.a_logprob_b, d.b_logprob_b, d.b_logprob_a) == (-1.20, -1.21, -1.195, -1.20)
    assert d.gap == pytest.approx(0.015) and not d.gap_is_lower_bound
    assert compare_generations(a, b, tie_tolerance=0.01).outcome is Outcome.DIVERGED  # the tolerance decides


def test_a_token_outside_the_other_sides_top_k_gives_a_lower_bound_never_a_tie():
    a = gen([9], [-0.5], [{9: -0.5, 3: -0.51}])  # A never listed B's token 4
    b = gen([4], [-0.5], [{4: -0.5, 9: -0.505}])
    d = compare_generations(a, b, tie_tolerance=1.0)
    assert d.outcome is Outcome.DIVERGED and d.gap_is_lower_bound
    assert d.gap == pytest.approx(0.01 + 0.005)  # A's margin bounded by its smallest listed runner-up
    assert "outside the other side's top-k" in d.detail


def test_a_side_that_ends_early_and_a_failed_request():
    d = compare_generations(gen([1, 2, 3], [-1.0] * 3), gen([1, 2], [-1.0] * 2), tie_tolerance=0.02)
    assert (d.outcome, d.position, d.token_a, d.token_b) == (Outcome.DIVERGED, 2, 3, None)
    assert "B ended after 2 tokens" in d.detail
    failed = compare_generations(gen([1], [-1.0]), gen([], [], [], error="HTTP 500"), tie_tolerance=0.02)
    assert failed.outcome is Outcome.FAILED and "HTTP 500" in failed.detail and failed.outcome.verdict.value == "error"
