"""ΔTTFT and ΔTPOT per request class, with intervals from the repeats, split into buckets that add up (pure).

Per window and side, the unprofiled load gives each request class's mean TTFT and TPOT, the engine's
histograms give the mean queue and prefill time of the same requests, and the profiled load's steps give
the decode-weighted step buckets (`workbench.profiling.buckets`). Every difference is mean(B windows) -
mean(A windows) with an interval from the windows' own spread (`stats.difference`).

    ΔTPOT = Δkernel + Δcommunication + Δhost idle + Δscheduling + Δoutside     (a typical step)
    ΔTTFT = Δqueueing + Δprefill + Δoutside

The TPOT split compares typical steps: on the client's clock (`windows.typical_step_s`) and in the profile
(`buckets.step_buckets`), a step longer than `outlier_step` times the window's median is left out on both
sides — on a shared host, a step where the process lost the CPU, which would otherwise swamp a planted cost
of a few milliseconds. The per-class ΔTPOT keeps every token, as vLLM defines TPOT.

Each side's "outside" is, window by window, the client's number minus the engine's buckets, so the buckets
add up to the client's difference by construction and the part no engine number explains is shown, not
hidden: HTTP and streaming, tokenizing, and on the TPOT line the profiler's own cost and the steps the
bounded window did not record. A bucket holding at least `cause_share` of a real difference is named its
cause. A class's difference is real when its interval (family-wise over classes x TTFT, TPOT) excludes zero
and it is at least `min_effect` of side A's value; an A/A twin must find none.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workbench.profiling.buckets import STEP_BUCKETS, Bucket
from workbench.twin.perf.policy import PerfThresholds
from workbench.twin.perf.stats import Difference, difference
from workbench.twin.perf.windows import WindowRecord, by_class, typical_step_s, window_step_s

METRICS = ("TTFT", "TPOT")
TTFT_BUCKETS = (Bucket.QUEUEING, Bucket.PREFILL)


@dataclass(frozen=True)
class ClassDelta:
    """One request class and metric: B against A, in milliseconds."""

    klass: str
    metric: str
    difference: Difference
    differs: bool

    def row(self) -> dict[str, object]:
        d = self.difference
        return {
            "class": self.klass,
            "metric": self.metric,
            "a_ms": d.a_mean,
            "b_ms": d.b_mean,
            "delta_ms": d.delta,
            "low_ms": d.low,
            "high_ms": d.high,
            "relative": d.relative,
            "noise_ms": d.noise,
            "differs": self.differs,
        }


@dataclass(frozen=True)
class BucketDelta:
    bucket: Bucket
    difference: Difference  # milliseconds (per output token for TPOT, per request for TTFT)
    share: float  # of the metric's whole difference


@dataclass(frozen=True)
class Split:
    """One metric's difference over every request, and its buckets (which add up to it)."""

    metric: str
    total: Difference
    buckets: tuple[BucketDelta, ...]
    cause: Bucket | None

    def total_row(self) -> dict[str, object]:
        """What the buckets add up to: the client's figure on each side (ms) and B's difference with its interval."""
        t = self.total
        return {"a_ms": t.a_mean, "b_ms": t.b_mean, "delta_ms": t.delta, "low_ms": t.low, "high_ms": t.high}

    def rows(self) -> list[dict[str, object]]:
        return [
            {
                "metric": self.metric,
                "bucket": b.bucket.value,
                "delta_ms": b.difference.delta,
                "low_ms": b.difference.low,
                "high_ms": b.difference.high,
                "share": b.share,
                "meaning": b.bucket.meaning,
            }
            for b in self.buckets
        ]


@dataclass(frozen=True)
class Attribution:
    classes: tuple[ClassDelta, ...]
    tpot: Split
    ttft: Split

    @property
    def differs(self) -> bool:
        return any(c.differs for c in self.classes)


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def class_means(record: WindowRecord, klass: str, metric: str) -> float:
    """A window's mean TTFT or TPOT (ms) of one class (or of every request, klass '*')."""
    groups = by_class(record.requests)
    timings = [t for k, ts in groups.items() if klass in ("*", k) for t in ts]
    pick = (lambda t: t.ttft_s) if metric == "TTFT" else (lambda t: t.tpot_s)
    return 1000.0 * _mean([pick(t) for t in timings])


def _series(records: Sequence[WindowRecord], value: Callable[[WindowRecord], float | None]) -> list[float]:
    found = [value(r) for r in records]
    return [v for v in found if v is not None and v == v]


def _step(record: WindowRecord, bucket: Bucket) -> float | None:
    buckets = record.step_buckets()
    return buckets.of(bucket) / 1000.0 if buckets is not None else None


def _engine(record: WindowRecord, bucket: Bucket) -> float | None:
    key = "queue" if bucket is Bucket.QUEUEING else "prefill"
    return 1000.0 * record.engine[key] if key in record.engine else None


def _client(record: WindowRecord, metric: str, policy: PerfThresholds) -> float:
    """The client's number the split explains: the typical step (TPOT; every token's mean when the window holds
    too few steps to tell) or the mean TTFT, in ms."""
    if metric == "TPOT":
        typical = typical_step_s(record.requests, policy.outlier_step)
        if typical is not None:
            return 1000.0 * typical
    return class_means(record, "*", metric)


def _outside(record: WindowRecord, metric: str, policy: PerfThresholds) -> float | None:
    """The client's number minus the engine's buckets for this window (None when a bucket is missing)."""
    client = _client(record, metric, policy)
    parts = [_step(record, b) for b in STEP_BUCKETS] if metric == "TPOT" else [_engine(record, b) for b in TTFT_BUCKETS]
    return None if any(p is None for p in parts) else client - sum(parts)  # type: ignore[arg-type]


def split(metric: str, a: Sequence[WindowRecord], b: Sequence[WindowRecord], policy: PerfThresholds) -> Split:
    """The metric's difference over every request and its buckets (the engine's, then the outside).

    The total is the client's number the buckets explain (`_client`: for TPOT the typical step), so the buckets
    add up to it; a mean over every token would also count the steps left out as outliers on one side only."""
    total = difference(
        _series(a, lambda r: _client(r, metric, policy)),
        _series(b, lambda r: _client(r, metric, policy)),
        policy.confidence,
    )
    read = _step if metric == "TPOT" else _engine
    buckets = []
    for bucket in STEP_BUCKETS if metric == "TPOT" else TTFT_BUCKETS:
        xs, ys = _series(a, lambda r, k=bucket: read(r, k)), _series(b, lambda r, k=bucket: read(r, k))
        if xs and ys:
            buckets.append(_bucket(bucket, difference(xs, ys, policy.confidence), total))
    xs, ys = _series(a, lambda r: _outside(r, metric, policy)), _series(b, lambda r: _outside(r, metric, policy))
    if xs and ys:
        buckets.append(_bucket(Bucket.OUTSIDE, difference(xs, ys, policy.confidence), total))
    else:  # no engine numbers on a side: the whole difference is outside what the engine explains
        buckets = [BucketDelta(Bucket.OUTSIDE, total, 1.0)]
    cause = _cause(total, buckets, policy)
    return Split(metric, total, tuple(buckets), cause)


def _bucket(bucket: Bucket, found: Difference, total: Difference) -> BucketDelta:
    return BucketDelta(bucket, found, found.delta / total.delta if total.delta else 0.0)


def _cause(total: Difference, buckets: Sequence[BucketDelta], policy: PerfThresholds) -> Bucket | None:
    if not total.excludes_zero:
        return None
    best = max(buckets, key=lambda b: b.share)
    return best.bucket if best.share >= policy.cause_share else None


def attribute(
    a: Sequence[WindowRecord], b: Sequence[WindowRecord], classes: Sequence[str], policy: PerfThresholds
) -> Attribution:
    """Every class's ΔTTFT and ΔTPOT (family-wise intervals), and the two splits."""
    tests = len(classes) * len(METRICS)
    deltas = []
    for klass in classes:
        for metric in METRICS:
            xs = _series(a, lambda r, k=klass, m=metric: class_means(r, k, m))
            ys = _series(b, lambda r, k=klass, m=metric: class_means(r, k, m))
            if not xs or not ys:
                continue
            found = difference(xs, ys, policy.confidence, tests)
            real = found.excludes_zero and abs(found.relative) >= policy.min_effect
            deltas.append(ClassDelta(klass, metric, found, real))
    return Attribution(tuple(deltas), split("TPOT", a, b, policy), split("TTFT", a, b, policy))


def profiler_cost(records: Sequence[WindowRecord], first: int, count: int) -> float | None:
    """The profiler's cost inside its bounded window: over the same steps (`first` .. `first + count` of the load,
    on the client's clock: `windows.step_clock`) the mean step time with the profiler on over the same load's
    without it, minus 1, averaged over windows (None without profiled loads). The trace export after the window
    is not in it; `export_cost` says what the whole profiled load paid."""
    ratios = []
    for record in records:
        plain = window_step_s(record.requests, first, count)
        traced = window_step_s(record.profiled_requests, first, count)
        if plain and traced:
            ratios.append(traced / plain - 1.0)
    return _mean(ratios) if ratios else None


def export_cost(records: Sequence[WindowRecord]) -> float | None:
    """Mean over windows of the profiled load's TPOT over the unprofiled load's, minus 1: everything profiling the
    load cost it, the trace export after `max_steps` included."""
    ratios = []
    for record in records:
        plain = _mean([t.tpot_s for t in record.requests if t.success])
        traced = _mean([t.tpot_s for t in record.profiled_requests if t.success])
        if record.profiled_requests and plain > 0:
            ratios.append(traced / plain - 1.0)
    return _mean(ratios) if ratios else None


__all__ = [
    "METRICS",
    "Attribution",
    "BucketDelta",
    "ClassDelta",
    "Split",
    "attribute",
    "class_means",
    "export_cost",
    "profiler_cost",
]
