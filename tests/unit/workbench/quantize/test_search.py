"""The rollback search against a synthetic, monotone evaluator: exact answers, few evaluations."""

from __future__ import annotations

import math

import pytest

from ascend_backend.quantization.scheme import PlanScheme
from workbench.errors import WorkbenchError
from workbench.quantize.search import SearchOutcome, ladder_plan, rollback_search
from workbench.quantize.stats import Rise

F, D, S = PlanScheme.FLOAT, PlanScheme.W8A8_DYNAMIC, PlanScheme.W8A8
COST = {S: 1.0, D: 0.25, F: 0.0}


def evaluator(weights: dict[str, float], calls: list):
    """Rise = sum over units of weight x rung cost, as a point interval (a monotone model)."""

    def evaluate(plan):
        calls.append(dict(plan))
        value = sum(weights[u] * COST[s] for u, s in plan.items())
        return Rise(value, value, value, 10, 100), False

    return evaluate


def test_ladder_plan_worked_example():
    plan = ladder_plan(list("abcde"), (S, D, F), (1, 3))
    assert plan == {"a": F, "b": D, "c": D, "d": S, "e": S}
    with pytest.raises(ValueError, match="must rise"):
        ladder_plan(list("abc"), (S, D, F), (2, 1))


def test_two_rungs_find_the_smallest_float_prefix_in_log_evaluations():
    order = [f"u{i}" for i in range(64)]
    weights = {u: (10.0 if i < 5 else 0.01) for i, u in enumerate(order)}  # 5 sensitive units, then small
    calls: list = []
    result = rollback_search(order, (D, F), evaluator(weights, calls), budget=0.25 * 59 * 0.01 + 1e-9)
    assert result.outcome is SearchOutcome.FOUND and result.counts == (5,)
    assert [u for u, s in result.plan.items() if s is F] == order[:5]
    assert result.evaluations == len(calls) <= 1 + math.ceil(math.log2(64))
    assert result.rise.high <= 0.25 * 59 * 0.01 + 1e-9


def test_three_rungs_fix_float_first_then_the_cheapest_rung():
    order = list("abcdefgh")
    weights = dict(zip(order, [8.0, 4.0, 2.0, 1.0, 0.5, 0.25, 0.1, 0.1]))
    calls: list = []
    budget = 1.5
    result = rollback_search(order, (S, D, F), evaluator(weights, calls), budget)
    # float count, the rest dynamic: a FLOAT leaves 0.25 * 7.95 = 1.99 > 1.5; a b FLOAT 0.25 * 3.95 = 0.99 -> 2
    assert result.counts[0] == 2
    # then the dynamic count, the rest static: c d dynamic + e..h static = 0.75 + 0.95 = 1.7 > 1.5;
    # c d e dynamic = 0.875 + 0.45 = 1.325 <= 1.5 -> 5
    assert result.counts == (2, 5)
    assert result.rise.high == pytest.approx(1.325)
    assert result.plan == {"a": F, "b": F, "c": D, "d": D, "e": D, "f": S, "g": S, "h": S}


def test_an_infeasible_budget_says_so_with_the_best_plan_measured():
    order = list("abcd")
    weights = dict.fromkeys(order, 4.0)
    calls: list = []
    result = rollback_search(order, (D, F), evaluator(weights, calls), budget=0.5, max_float=2)
    assert result.outcome is SearchOutcome.INFEASIBLE
    assert result.counts == (2,) and result.rise.high == pytest.approx(2.0)  # the best within the cap
    assert sum(s is F for s in result.plan.values()) == 2  # never all float


def test_a_ladder_must_end_with_float():
    with pytest.raises(WorkbenchError, match="end with FLOAT"):
        rollback_search(["a"], (F, D), lambda plan: None, budget=1.0)
