"""Latency against the recorded with paired bootstrap intervals, SLO attainment, and timing fidelity."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.replay.fidelity import timing_fidelity
from workbench.replay.latency import attainment, latency_rows, ratio_interval
from workbench.replay.policy import LatencyPolicy
from workbench.results.verdict import Verdict
from workbench.serving.load.trace import Answer, Choice, Endpoint, TraceRecord

POLICY = LatencyPolicy(e2el_ms=1000.0, quantiles=(50.0,), bootstrap_resamples=500, min_requests=5)


def trace(old_e2e, new_e2e):
    records, answers = [], {}
    for i, (old, new) in enumerate(zip(old_e2e, new_e2e, strict=True)):
        records.append(
            TraceRecord(f"r{i}", float(i), Endpoint.CHAT, {}, answer=Answer(200, (Choice(0, "x"),), e2e_s=old))
        )
        answers[f"r{i}"] = Answer(200, (Choice(0, "x"),), e2e_s=new)
    return records, answers


def test_a_uniform_slowdown_is_found_and_its_interval_holds_it():
    rng = np.random.default_rng(0)
    old = rng.uniform(0.2, 0.4, 40)
    records, answers = trace(old, old * 2.0)
    row = next(r for r in latency_rows(records, answers, POLICY) if r.request_class == "all" and r.metric == "e2el")
    assert row.ratio == pytest.approx(2.0) and row.low == pytest.approx(2.0) and row.verdict is Verdict.ERROR
    noisy = old * rng.uniform(0.9, 1.1, 40)
    ratio, low, high = ratio_interval(old, noisy, 50.0, POLICY)
    assert low < 1.0 < high or abs(ratio - 1) < 0.1  # noise alone: the interval holds 1


def test_attainment_and_too_few_requests():
    records, answers = trace([0.5] * 6, [0.5, 0.5, 0.5, 2.0, 2.0, 2.0])
    overall = next(a for a in attainment(records, answers, POLICY) if a.request_class == "all")
    assert (overall.recorded, overall.replayed, overall.verdict) == (1.0, 0.5, Verdict.ERROR)
    few_records, few_answers = trace([0.5] * 3, [2.0] * 3)
    assert all(r.verdict is Verdict.PASS for r in latency_rows(few_records, few_answers, POLICY))  # shown, not judged


def test_timing_fidelity_measures_gaps_not_the_constant_delay():
    planned = [0.0, 1.0, 2.0, 3.0]
    fidelity = timing_fidelity(planned, [0.05, 1.05, 2.06, 3.05])
    assert fidelity.inter_arrival_error_p50_ms == pytest.approx(
        10.0, abs=0.01
    ) and fidelity.lateness_p50_ms == pytest.approx(50.0)
    assert fidelity.planned_rate == pytest.approx(1.0) and fidelity.achieved_rate == pytest.approx(1.0)
    assert timing_fidelity([0.0], [0.0]) is None
