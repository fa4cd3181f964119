"""How faithfully a run kept a trace's timing: inter-arrival error and achieved request rate.

For requests sent at planned offsets p_i and actually sent at s_i (both seconds from the run's start, in
send order), the inter-arrival error of request i is |(s_i - s_{i-1}) - (p_i - p_{i-1})|: how far each
gap between two arrivals drifted from the trace's, whatever the constant start-up offset. The achieved rate
is (n - 1) / (s_last - s_first) against the planned (n - 1) / (p_last - p_first). `bench_replay.py` computes
the same numbers for `vllm bench serve` replaying the same trace. Pure arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class TimingFidelity:
    requests: int
    inter_arrival_error_p50_ms: float
    inter_arrival_error_p99_ms: float
    lateness_p50_ms: float  # sent - planned
    lateness_p99_ms: float
    planned_rate: float  # requests per second
    achieved_rate: float

    def to_dict(self) -> dict:
        return asdict(self)


def timing_fidelity(planned: Sequence[float], sent: Sequence[float]) -> TimingFidelity | None:
    """None with fewer than two requests (no gap to compare)."""
    if len(planned) != len(sent):
        raise ValueError(f"{len(planned)} planned offsets but {len(sent)} send times")
    if len(planned) < 2:
        return None
    order = np.argsort(np.asarray(sent), kind="stable")
    p, s = np.asarray(planned, dtype=float)[order], np.asarray(sent, dtype=float)[order]
    errors = np.abs(np.diff(s) - np.diff(p)) * 1000.0
    late = (s - p) * 1000.0
    span_p, span_s = p[-1] - p[0], s[-1] - s[0]
    return TimingFidelity(
        requests=len(p),
        inter_arrival_error_p50_ms=float(np.percentile(errors, 50)),
        inter_arrival_error_p99_ms=float(np.percentile(errors, 99)),
        lateness_p50_ms=float(np.percentile(late, 50)),
        lateness_p99_ms=float(np.percentile(late, 99)),
        planned_rate=(len(p) - 1) / span_p if span_p > 0 else float("inf"),
        achieved_rate=(len(s) - 1) / span_s if span_s > 0 else float("inf"),
    )


__all__ = ["TimingFidelity", "timing_fidelity"]
