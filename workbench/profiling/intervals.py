"""Time-interval arithmetic behind the time shares: merge, clip, and split a window four ways.

The definitions are msprof-analyze's (Ascend/msprof-analyze @8399c1cd,
`msprof_analyze/cluster_analyse/common_func/time_range_calculator.py` and
`cluster_analyse/analysis/msprof_step_trace_time_adapter.py`, `MsprofStepTraceTimeDBAdapter`):

    Computing                      = |C|            the union of compute tasks
    Communication                  = |M|            the union of communication tasks
    Communication(Not Overlapped)  = |M \\ C|        communication no compute hides
    Overlapped                     = |M| - |M \\ C|  = |M ∩ C|
    Free                           = window - |C ∪ M|

msprof-analyze counts as Free only the gaps between the first and the last task; we count the whole
step window (engine step start to the next step's start on CPU, the step range on Ascend), so the time
before the first kernel of a step — the host preparing it — is Free too, as in torch_npu's
`step_trace_time.csv`, whose Free and Preparing together cover it.

Intervals are numpy arrays of shape [n, 2] (start, end) in microseconds; everything is vectorised so
a million kernels cost milliseconds, not a Python loop each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Intervals = np.ndarray  # [n, 2] float64 (start_us, end_us), start <= end


def as_intervals(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """Stack start and end arrays into [n, 2]; zero- and negative-length intervals are dropped."""
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.float64)
    keep = ends > starts
    return np.stack([starts[keep], ends[keep]], axis=1) if keep.any() else np.empty((0, 2))


def merge(intervals: Intervals) -> Intervals:
    """The union as disjoint, sorted intervals (touching intervals join).

    Example: [(0, 2), (1, 3), (5, 6)] -> [(0, 3), (5, 6)].
    """
    if len(intervals) == 0:
        return np.empty((0, 2))
    order = np.argsort(intervals[:, 0], kind="stable")
    starts, ends = intervals[order, 0], intervals[order, 1]
    reach = np.maximum.accumulate(ends)  # the furthest end seen so far
    opens = np.empty(len(starts), dtype=bool)
    opens[0] = True
    opens[1:] = starts[1:] > reach[:-1]  # a gap before this interval starts a new run
    first = np.flatnonzero(opens)
    return np.stack([starts[first], np.maximum.reduceat(ends, first)], axis=1)


def length(merged: Intervals) -> float:
    """Total length of disjoint intervals."""
    return float(np.sum(merged[:, 1] - merged[:, 0])) if len(merged) else 0.0


def clip(merged: Intervals, start: float, end: float) -> Intervals:
    """The part of sorted disjoint intervals inside [start, end)."""
    if len(merged) == 0 or end <= start:
        return np.empty((0, 2))
    lo = int(np.searchsorted(merged[:, 1], start, side="right"))  # first interval ending after start
    hi = int(np.searchsorted(merged[:, 0], end, side="left"))  # intervals starting before end
    part = merged[lo:hi].copy()
    if len(part):
        part[0, 0] = max(part[0, 0], start)
        part[-1, 1] = min(part[-1, 1], end)
    return part[part[:, 1] > part[:, 0]]


def intersection_length(a: Intervals, b: Intervals) -> float:
    """|A ∩ B| for two sets of sorted disjoint intervals (a sweep over all their boundaries)."""
    if len(a) == 0 or len(b) == 0:
        return 0.0
    points = np.concatenate([a[:, 0], a[:, 1], b[:, 0], b[:, 1]])
    steps = np.concatenate([np.ones(len(a)), -np.ones(len(a)), np.full(len(b), 2.0), np.full(len(b), -2.0)])
    order = np.argsort(points, kind="stable")
    points, steps = points[order], steps[order]
    level = np.cumsum(steps)  # 1: only A, 2: only B, 3: both (disjoint sets never exceed 1 each)
    widths = np.diff(points)
    return float(np.sum(widths[level[:-1] == 3]))


@dataclass(frozen=True)
class Split:
    """One window split msprof-analyze's way (microseconds); see the module docstring."""

    window_us: float
    computing_us: float
    communication_us: float
    communication_not_overlapped_us: float
    overlapped_us: float
    free_us: float


def split_window(compute: Intervals, communication: Intervals, start: float, end: float) -> Split:
    """Split [start, end) into computing / communication not overlapped / free, with the overlap.

    `compute` and `communication` must already be merged (sorted, disjoint).
    """
    c = clip(compute, start, end)
    m = clip(communication, start, end)
    computing, communication_total = length(c), length(m)
    overlapped = intersection_length(c, m)
    not_overlapped = communication_total - overlapped
    window = max(end - start, 0.0)
    free = max(window - computing - not_overlapped, 0.0)
    return Split(window, computing, communication_total, not_overlapped, overlapped, free)
