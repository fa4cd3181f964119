"""Greedy agreement: common prefix over the longer completion, and the data-set totals."""

from __future__ import annotations

import math

from workbench.evaluate.greedy import agreement, total_agreement


def test_worked_example_of_the_module_docstring() -> None:
    pair = agreement([5, 6, 9], [5, 6, 7, 8])
    assert (pair.common_prefix, pair.test_tokens, pair.reference_tokens) == (2, 3, 4)
    assert pair.fraction == 0.5 and not pair.exact


def test_identical_empty_and_prefix_cases() -> None:
    assert agreement([1, 2, 3], [1, 2, 3]).exact and agreement([1, 2, 3], [1, 2, 3]).fraction == 1.0
    assert agreement([], []).exact and agreement([], []).fraction == 1.0
    longer = agreement([1, 2, 3, 4], [1, 2])  # the test ran on past where the reference stopped
    assert longer.common_prefix == 2 and longer.fraction == 0.5 and not longer.exact
    assert agreement([9], [1, 2]).fraction == 0.0


def test_totals_weigh_problems_equally_and_tokens_separately() -> None:
    pairs = [agreement([1, 2, 3, 4], [1, 2, 3, 4]), agreement([1, 9], [1, 2])]  # 4/4 and 1/2
    total = total_agreement(pairs)
    assert total.problems == 2 and total.mean == 0.75 and total.token_weighted == 5 / 6
    assert total.exact_match_rate == 0.5
    assert math.isnan(total_agreement([]).mean)


def test_code_stops_fit_the_openai_limit_of_four() -> None:
    # vLLM 0.32 rejects a request with more than 4 stop strings (HTTP 400), as the OpenAI API does.
    from workbench.evaluate.greedy import CODE_STOP

    assert 1 <= len(CODE_STOP) <= 4 and all(stop.startswith("\n") for stop in CODE_STOP)
