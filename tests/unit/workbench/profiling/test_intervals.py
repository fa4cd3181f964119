"""Interval arithmetic against a brute-force timeline: every microsecond tick classified on its own."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.profiling import intervals

SPAN = 200  # ticks of 1 µs


def _ticks(spans: list[tuple[int, int]]) -> np.ndarray:
    """[SPAN] bool: tick t is covered when some [a, b) holds t (the independent reference)."""
    covered = np.zeros(SPAN, dtype=bool)
    for a, b in spans:
        covered[a:b] = True
    return covered


spans = st.lists(
    st.tuples(st.integers(0, SPAN - 1), st.integers(1, 40)).map(lambda p: (p[0], min(SPAN, p[0] + p[1]))), max_size=12
)


def _merged(raw: list[tuple[int, int]]) -> intervals.Intervals:
    array = np.array(raw, dtype=float).reshape(-1, 2)
    return intervals.merge(intervals.as_intervals(array[:, 0], array[:, 1]))


def test_merge_example_from_the_docstring():
    merged = intervals.merge(np.array([[0.0, 2.0], [1.0, 3.0], [5.0, 6.0]]))
    assert merged.tolist() == [[0.0, 3.0], [5.0, 6.0]]


def test_touching_intervals_join_and_empty_ones_vanish():
    assert intervals.merge(np.array([[0.0, 1.0], [1.0, 2.0]])).tolist() == [[0.0, 2.0]]
    assert len(intervals.as_intervals(np.array([3.0]), np.array([3.0]))) == 0


@settings(max_examples=120, deadline=None)
@given(spans, spans, st.integers(0, SPAN // 2), st.integers(SPAN // 2, SPAN))
def test_split_window_matches_a_tick_by_tick_count(compute, communication, start, end):
    c, m = _ticks(compute)[start:end], _ticks(communication)[start:end]
    split = intervals.split_window(_merged(compute), _merged(communication), float(start), float(end))
    assert split.computing_us == c.sum()
    assert split.communication_us == m.sum()
    assert split.overlapped_us == (c & m).sum()
    assert split.communication_not_overlapped_us == (m & ~c).sum()
    assert split.free_us == (~c & ~m).sum()
    assert split.computing_us + split.communication_not_overlapped_us + split.free_us == end - start


@settings(max_examples=100, deadline=None)
@given(spans)
def test_merge_is_sorted_disjoint_and_keeps_the_covered_length(raw):
    merged = _merged(raw)
    assert np.all(merged[1:, 0] > merged[:-1, 1])  # disjoint, not even touching
    assert intervals.length(merged) == _ticks(raw).sum()


def test_clip_keeps_only_the_window():
    merged = np.array([[0.0, 10.0], [20.0, 30.0], [40.0, 50.0]])
    assert intervals.clip(merged, 5.0, 45.0).tolist() == [[5.0, 10.0], [20.0, 30.0], [40.0, 45.0]]
    assert intervals.clip(merged, 10.0, 20.0).tolist() == []
