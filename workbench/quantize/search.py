"""The rollback search: the fewest units kept in float (and in the costlier rungs) that hold the budget.

Units are ordered by a sensitivity proxy, most sensitive first. With a ladder of rungs, cheapest first
and FLOAT last (e.g. W8A8 -> W8A8_DYNAMIC -> FLOAT), a plan is a count per rung boundary: the first
`k_float` units stay FLOAT, the next ones down to `k_1` take the rung before FLOAT, and so on; the rest
take the cheapest rung. The search fixes the boundaries from the top:

1. the float count: the smallest k in [0, max_float] whose plan (top k FLOAT, every other unit on the
   best quantized rung) holds the budget, by binary search over k (FLOAT for all is the float model
   itself: it holds by definition when max_float = all units, so it is not evaluated);
2. each lower boundary in turn: with the boundaries above fixed, the smallest count that still holds
   when the units below it drop to the next cheaper rung.

"Holds" means the upper end of the plan's 95% bootstrap interval of NLL rise on the dev split is at or
under the budget (`stats.nll_rise`). A monotone model (more float never hurts) makes this exact in
1 + ceil(log2(range)) evaluations per boundary; the result records every step. When no plan within
max_float holds, the search says "infeasible" and returns the best plan it measured -- never an
all-float plan in silence.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ascend_backend.quantization.scheme import PlanScheme
from workbench.errors import WorkbenchError
from workbench.quantize.stats import Rise

UnitPlan = dict[str, PlanScheme]  # unit name -> scheme


class SearchOutcome(str, enum.Enum):
    FOUND = "found"  # a plan within max_float holds the budget on dev
    INFEASIBLE = "infeasible"  # none does; the best plan measured is reported


@dataclass(frozen=True)
class Step:
    """One evaluation of the search."""

    index: int
    stage: str  # "float count", "boundary W8A8_DYNAMIC", ...
    counts: tuple[int, ...]  # units at or above each rung boundary, top rung (FLOAT) first
    rise: Rise
    holds: bool
    seconds: float
    cached: bool

    def to_dict(self) -> dict:
        return {
            "index": self.index,
            "stage": self.stage,
            "counts": list(self.counts),
            "rise": self.rise.to_dict(),
            "holds": self.holds,
            "seconds": round(self.seconds, 3),
            "cached": self.cached,
        }


@dataclass(frozen=True)
class SearchResult:
    outcome: SearchOutcome
    plan: UnitPlan
    counts: tuple[int, ...]
    rise: Rise | None  # the returned plan's dev rise (None: the all-float plan, never evaluated)
    steps: tuple[Step, ...] = field(default_factory=tuple)

    @property
    def evaluations(self) -> int:
        return len(self.steps)


def ladder_plan(order: Sequence[str], ladder: Sequence[PlanScheme], counts: Sequence[int]) -> UnitPlan:
    """Units in sensitivity `order` get rungs by `counts` (top rung first, non-increasing).

    Example: ladder (W8A8, W8A8_DYNAMIC, FLOAT), counts (1, 3), order a b c d e -> a FLOAT, b c
    W8A8_DYNAMIC, d e W8A8.
    """
    top = list(reversed(ladder))  # FLOAT first
    if len(counts) != len(ladder) - 1:
        raise ValueError(f"{len(ladder)} rungs take {len(ladder) - 1} counts, got {len(counts)}")
    if any(a > b for a, b in zip(counts, counts[1:])) or any(not 0 <= c <= len(order) for c in counts):
        raise ValueError(f"counts {tuple(counts)} must rise (top rung first) within 0..{len(order)}")
    plan: UnitPlan = {}
    bounds = [0, *counts, len(order)]
    for rung, (start, stop) in enumerate(zip(bounds, bounds[1:])):
        for name in order[start:stop]:
            plan[name] = top[rung]
    return plan


def check_ladder(ladder: Sequence[PlanScheme]) -> None:
    if len(ladder) < 2 or ladder[-1] is not PlanScheme.FLOAT or PlanScheme.FLOAT in ladder[:-1]:
        raise WorkbenchError(
            f"--ladder {','.join(s.value for s in ladder)}: give the quantized rungs cheapest first and end with "
            "FLOAT, e.g. W8A8,W8A8_DYNAMIC,FLOAT"
        )
    if len(set(ladder)) != len(ladder):
        raise WorkbenchError("--ladder names a rung twice")


class _Searcher:
    def __init__(self, order, ladder, evaluate, budget, progress) -> None:
        self.order, self.ladder, self.evaluate, self.budget = list(order), list(ladder), evaluate, budget
        self.progress = progress
        self.steps: list[Step] = []
        self.seen: dict[tuple[int, ...], Step] = {}

    def holds(self, counts: tuple[int, ...], stage: str) -> Step:
        if counts in self.seen:
            return self.seen[counts]
        started = time.perf_counter()
        rise, cached = self.evaluate(ladder_plan(self.order, self.ladder, counts))
        step = Step(
            len(self.steps), stage, counts, rise, rise.high <= self.budget, time.perf_counter() - started, cached
        )
        self.steps.append(step)
        self.seen[counts] = step
        if self.progress is not None:
            self.progress(step)
        return step

    def smallest(self, lo: int, hi: int, counts_at: Callable[[int], tuple[int, ...]], stage: str, hi_holds: bool):
        """The smallest k in [lo, hi] whose plan holds; None when even hi does not (hi evaluated unless known)."""
        if lo >= hi and hi_holds:
            return hi
        if self.holds(counts_at(lo), stage).holds:
            return lo
        if not hi_holds and not self.holds(counts_at(hi), stage).holds:
            return None
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.holds(counts_at(mid), stage).holds:
                hi = mid
            else:
                lo = mid
        return hi


def rollback_search(
    order: Sequence[str],
    ladder: Sequence[PlanScheme],
    evaluate: Callable[[UnitPlan], tuple[Rise, bool]],
    budget: float,
    *,
    max_float: int | None = None,
    progress: Callable[[Step], None] | None = None,
) -> SearchResult:
    """Search as the module docstring says; `evaluate(plan) -> (dev rise, from cache?)`."""
    check_ladder(ladder)
    n = len(order)
    cap = n if max_float is None else max(0, min(max_float, n))
    searcher = _Searcher(order, ladder, evaluate, budget, progress)
    boundaries = len(ladder) - 1  # counts per boundary, FLOAT's first

    def counts_for_float(k: int) -> tuple[int, ...]:
        return (k,) + (n,) * (boundaries - 1)  # everything else on the best quantized rung

    k_float = searcher.smallest(0, cap, counts_for_float, "float count", hi_holds=cap == n)
    if k_float is None:
        best = min(searcher.steps, key=lambda s: (s.rise.high, s.counts))
        plan = ladder_plan(order, ladder, best.counts)
        return SearchResult(SearchOutcome.INFEASIBLE, plan, best.counts, best.rise, tuple(searcher.steps))
    counts = list(counts_for_float(k_float))
    for boundary in range(1, boundaries):
        rung = list(reversed(ladder))[boundary]

        def at(k: int, _b: int = boundary) -> tuple[int, ...]:
            return tuple(counts[:_b]) + (k,) + tuple(counts[_b + 1 :])

        counts[boundary] = searcher.smallest(counts[boundary - 1], n, at, f"boundary {rung.value}", hi_holds=True)
    final = tuple(counts)
    step = searcher.seen.get(final)
    return SearchResult(
        SearchOutcome.FOUND,
        ladder_plan(order, ladder, final),
        final,
        step.rise if step else None,
        tuple(searcher.steps),
    )
