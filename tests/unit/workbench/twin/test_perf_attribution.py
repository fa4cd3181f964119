"""ΔTTFT and ΔTPOT split into buckets that add up (`twin.perf.attribution`), on windows whose numbers are set by hand."""

from __future__ import annotations

import pytest

from workbench.profiling.buckets import Bucket, StepBuckets
from workbench.twin.perf.attribution import attribute, class_means, export_cost, profiler_cost
from workbench.twin.perf.policy import load_perf_thresholds
from workbench.twin.perf.windows import RequestTiming, WindowRecord

POLICY = load_perf_thresholds()
CLASSES = ("in64", "in256")


def window(side, index, *, tpot_ms, ttft_ms, kernel_us, idle_us, queue_ms=1.0, prefill_ms=4.0, traced=None):
    """One window: two requests per class; step buckets whose total is `kernel_us + idle_us + 500 + 0`."""
    requests = tuple(
        RequestTiming(klass, (ttft_ms + (0 if klass == "in64" else 5)) / 1000, tpot_ms / 1000, True)
        for klass in CLASSES
        for _ in range(2)
    )
    buckets = StepBuckets(40, "decode requests", kernel_us, 0.0, idle_us, 500.0)
    profiled = tuple(RequestTiming(r.klass, r.ttft_s, (traced or tpot_ms) / 1000, True) for r in requests)
    engine = {"queue": queue_ms / 1000, "prefill": prefill_ms / 1000}
    return WindowRecord(side, index, requests, profiled, engine, "p.json", buckets.to_dict(), 1.0)


def test_the_buckets_add_up_to_the_clients_difference_and_the_planted_one_is_named():
    # B's host idles 3 ms more per step; the client sees 3.2 ms more per token (0.2 ms outside the engine)
    a = [
        window("A", i, tpot_ms=10.0 + d, ttft_ms=20.0, kernel_us=4000, idle_us=5000 + 1000 * d)
        for i, d in enumerate((0.0, 0.1, -0.1))
    ]
    b = [
        window("B", i, tpot_ms=13.2 + d, ttft_ms=20.0, kernel_us=4000, idle_us=8000 + 1000 * d)
        for i, d in enumerate((0.0, 0.1, -0.1))
    ]
    found = attribute(a, b, CLASSES, POLICY)
    tpot = found.tpot
    assert tpot.total.delta == pytest.approx(3.2)
    assert sum(bucket.difference.delta for bucket in tpot.buckets) == pytest.approx(tpot.total.delta)
    shares = {bucket.bucket: bucket.share for bucket in tpot.buckets}
    assert shares[Bucket.HOST_IDLE] == pytest.approx(3.0 / 3.2) and shares[Bucket.KERNEL] == pytest.approx(0.0)
    assert shares[Bucket.OUTSIDE] == pytest.approx(0.2 / 3.2) and tpot.cause is Bucket.HOST_IDLE
    assert found.differs and {(c.klass, c.metric) for c in found.classes if c.differs} == {
        ("in64", "TPOT"),
        ("in256", "TPOT"),
    }
    assert found.ttft.cause is None  # TTFT did not move


def test_an_aa_twin_finds_no_difference_and_names_no_cause():
    a = [
        window("A", i, tpot_ms=10.0 + d, ttft_ms=20.0 + d, kernel_us=4000, idle_us=5000)
        for i, d in enumerate((0.0, 0.3, -0.2))
    ]
    b = [
        window("B", i, tpot_ms=10.1 + d, ttft_ms=20.2 + d, kernel_us=4000, idle_us=5000)
        for i, d in enumerate((-0.3, 0.2, 0.0))
    ]
    found = attribute(a, b, CLASSES, POLICY)
    assert not found.differs and found.tpot.cause is None and found.ttft.cause is None


def test_a_real_but_tiny_difference_stays_below_min_effect():
    a = [
        window("A", i, tpot_ms=10.0 + d, ttft_ms=20.0, kernel_us=4000, idle_us=5000)
        for i, d in enumerate((0.0, 0.01, -0.01))
    ]
    b = [
        window("B", i, tpot_ms=10.2 + d, ttft_ms=20.0, kernel_us=4000, idle_us=5000)
        for i, d in enumerate((0.0, 0.01, -0.01))
    ]
    found = attribute(a, b, CLASSES, POLICY)
    tpot = [c for c in found.classes if c.metric == "TPOT"]
    assert all(c.difference.excludes_zero for c in tpot) and not found.differs  # +2% < min_effect 5%


def test_the_ttft_split_uses_the_engines_queue_and_prefill():
    a = [
        window("A", i, tpot_ms=10.0, ttft_ms=20.0 + d, kernel_us=4000, idle_us=5000, queue_ms=1.0 + d)
        for i, d in enumerate((0.0, 0.2, -0.2))
    ]
    b = [
        window("B", i, tpot_ms=10.0, ttft_ms=28.0 + d, kernel_us=4000, idle_us=5000, queue_ms=9.0 + d)
        for i, d in enumerate((0.0, 0.2, -0.2))
    ]
    ttft = attribute(a, b, CLASSES, POLICY).ttft
    shares = {bucket.bucket: bucket.share for bucket in ttft.buckets}
    assert ttft.cause is Bucket.QUEUEING and shares[Bucket.QUEUEING] == pytest.approx(1.0)
    assert class_means(a[0], "in256", "TTFT") == pytest.approx(25.0) and class_means(a[0], "*", "TTFT") == 22.5


def stepped(step_s: float, slow_from: int = 99, slow_s: float = 0.0) -> tuple[RequestTiming, ...]:
    """Four requests decoded together for 20 steps of `step_s` (steps from `slow_from` on take `slow_s`)."""
    gaps = tuple(slow_s if i >= slow_from else step_s for i in range(1, 20))
    return tuple(RequestTiming("in64", 0.05, sum(gaps) / 19, True, 0.0001 * i, gaps) for i in range(4))


def test_the_profilers_cost_inside_its_window_leaves_out_the_export_after_it():
    plain = stepped(0.010)
    traced = stepped(0.011, slow_from=12, slow_s=0.5)  # 10% slower steps, then a half-second export stall
    record = WindowRecord("A", 0, plain, traced, {}, None, None, 1.0)
    assert profiler_cost([record], 2, 8) == pytest.approx(0.1)  # steps 2..10 of the load: inside the window
    assert export_cost([record]) > 2  # the whole profiled load paid the stall too
    assert profiler_cost([window("A", 0, tpot_ms=10, ttft_ms=1, kernel_us=1, idle_us=1)], 2, 8) is None
