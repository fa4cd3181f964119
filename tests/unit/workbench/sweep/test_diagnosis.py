"""The reading rules of docs/METHOD.md §10–§12, each fired by a hand-made row and silent on its near miss."""

from __future__ import annotations

import pandas as pd
import pytest

from workbench.sweep.diagnosis import Bottleneck, Thresholds, WorkloadContext, block_waste, diagnose, diagnose_point

CTX = WorkloadContext(best_throughput=1000.0, largest_running=16.0, best_p99_ttft_ms=100.0, best_p99_e2el_ms=1000.0)


def row(**changes) -> dict:
    """A healthy point: best throughput, full batch, no queue, latencies at the workload's best."""
    base = {
        "point_id": "p",
        "status": "ok",
        "output_throughput": 1000.0,
        "running_mean": 16.0,
        "waiting_mean": 0.0,
        "p99_ttft_ms": 100.0,
        "p99_e2el_ms": 1000.0,
        "p99_tpot_ms": 10.0,
        "preemptions": 0.0,
        "kv_usage_max": 0.6,
        "block_size": 128,
        "input_len": 100,
        "output_len": 28,
    }
    return {**base, **changes}


def kinds(r: dict, limits: dict | None = None) -> list[Bottleneck]:
    return [f.bottleneck for f in diagnose_point(r, CTX, limits or {})]


def test_healthy_point():
    assert kinds(row()) == [Bottleneck.HEALTHY]


def test_low_throughput_with_small_batch():
    r = row(output_throughput=500.0, running_mean=4.0)
    [finding] = diagnose_point(r, CTX, {})
    assert finding.bottleneck is Bottleneck.BATCH_TOO_SMALL
    assert "offer more load" in finding.fix  # nothing waits: the client is the limit
    queued = diagnose_point(row(output_throughput=500.0, running_mean=4.0, waiting_mean=3.0), CTX, {})
    assert queued[0].bottleneck is Bottleneck.BATCH_TOO_SMALL and "raise max_num_seqs" in queued[0].fix
    # near misses: throughput at 70% of best, or the batch at half the largest
    assert kinds(row(output_throughput=700.0, running_mean=4.0)) == [Bottleneck.HEALTHY]
    assert kinds(row(output_throughput=500.0, running_mean=8.0)) == [Bottleneck.HEALTHY]


def test_high_ttft_with_queue_vs_without():
    assert kinds(row(p99_ttft_ms=201.0, waiting_mean=0.5)) == [Bottleneck.QUEUEING]
    assert kinds(row(p99_ttft_ms=201.0, waiting_mean=0.4)) == [Bottleneck.PREFILL_BOUND]
    assert kinds(row(p99_ttft_ms=200.0, waiting_mean=5.0)) == [Bottleneck.HEALTHY]  # exactly 2x is not "high"


def test_slo_limit_replaces_the_relative_yardstick():
    assert kinds(row(p99_ttft_ms=150.0, waiting_mean=2.0), {"p99_ttft_ms": 120.0}) == [Bottleneck.QUEUEING]
    assert kinds(row(p99_ttft_ms=300.0, waiting_mean=2.0), {"p99_ttft_ms": 500.0}) == [Bottleneck.HEALTHY]


def test_high_e2e_with_low_ttft_is_decode_bound():
    [finding] = diagnose_point(row(p99_e2el_ms=2500.0), CTX, {})
    assert finding.bottleneck is Bottleneck.DECODE_BOUND and "p99 TPOT 10.0 ms" in finding.evidence
    # high E2E that comes with a high TTFT is a TTFT problem, not a decode one
    assert kinds(row(p99_e2el_ms=2500.0, p99_ttft_ms=900.0, waiting_mean=3.0)) == [Bottleneck.QUEUEING]


def test_preemptions_mean_kv_pressure_and_big_blocks_fragment():
    # 100 + 28 = 128 tokens fill one 128-block exactly: no fragmentation finding
    assert kinds(row(preemptions=3.0)) == [Bottleneck.KV_PRESSURE]
    # 100 + 30 = 130 tokens: two 128-blocks, 126 of 256 slots empty (49%) -> below 0.5
    assert kinds(row(preemptions=3.0, output_len=30)) == [Bottleneck.KV_PRESSURE]
    # 60 + 20 = 80 tokens in one 256-block: 69% empty, under pressure -> fragmentation
    assert kinds(row(preemptions=1.0, block_size=256, input_len=60, output_len=20)) == [
        Bottleneck.KV_PRESSURE,
        Bottleneck.BLOCK_FRAGMENTATION,
    ]
    # the same waste with plenty of memory is not a problem
    assert kinds(row(block_size=256, input_len=60, output_len=20, kv_usage_max=0.3)) == [Bottleneck.HEALTHY]


def test_small_blocks_with_spare_memory_cost_overhead():
    assert kinds(row(block_size=32, kv_usage_max=0.2, output_throughput=600.0)) == [Bottleneck.BLOCK_OVERHEAD]
    assert kinds(row(block_size=32, kv_usage_max=0.2)) == [Bottleneck.HEALTHY]  # throughput is fine
    assert kinds(row(block_size=32, kv_usage_max=0.6, output_throughput=600.0)) == [Bottleneck.HEALTHY]
    assert kinds(row(block_size=64, kv_usage_max=0.2, output_throughput=600.0)) == [Bottleneck.HEALTHY]
    # a small batch already explains the low throughput
    assert kinds(row(block_size=32, kv_usage_max=0.2, output_throughput=600.0, running_mean=2.0)) == [
        Bottleneck.BATCH_TOO_SMALL
    ]


def test_failed_points_carry_the_crash_fix():
    r = {
        "point_id": "x",
        "status": "start_failed",
        "crash_kind": "block_size",
        "crash_summary": "the attention backend cannot use the configured KV block size",
        "crash_fix": "use 32",
    }
    [finding] = diagnose_point(r, None, {})
    assert finding.bottleneck is Bottleneck.START_FAILURE
    assert finding.evidence.startswith("[block_size]") and finding.fix == "use 32"


@pytest.mark.parametrize(
    ("tokens", "block", "waste"), [(80, 128, 0.375), (128, 128, 0.0), (129, 32, 1 - 129 / 160), (1, 256, 255 / 256)]
)
def test_block_waste(tokens, block, waste):
    assert block_waste(tokens, block) == pytest.approx(waste)


def test_diagnose_table_uses_each_workloads_own_yardstick():
    frame = pd.DataFrame(
        [
            # workload c=1: a is the best; b has a queue and 3x its TTFT
            {
                "point_id": "a",
                "status": "ok",
                "concurrency": 1,
                "output_throughput": 100.0,
                "running_mean": 1.0,
                "waiting_mean": 0.0,
                "p99_ttft_ms": 50.0,
                "p99_e2el_ms": 500.0,
                "preemptions": 0.0,
            },
            {
                "point_id": "b",
                "status": "ok",
                "concurrency": 1,
                "output_throughput": 95.0,
                "running_mean": 1.0,
                "waiting_mean": 1.0,
                "p99_ttft_ms": 150.0,
                "p99_e2el_ms": 600.0,
                "preemptions": 0.0,
            },
            # workload c=8: c's numbers would be "low" against c=1's but are the best at c=8
            {
                "point_id": "c",
                "status": "ok",
                "concurrency": 8,
                "output_throughput": 400.0,
                "running_mean": 8.0,
                "waiting_mean": 0.0,
                "p99_ttft_ms": 500.0,
                "p99_e2el_ms": 3000.0,
                "preemptions": 0.0,
            },
            {
                "point_id": "d",
                "status": "start_failed",
                "concurrency": 8,
                "crash_kind": "kv_memory",
                "crash_summary": "no memory",
                "crash_fix": "more KV",
            },
        ]
    )
    out = diagnose(frame)
    assert out[["point_id", "bottleneck"]].values.tolist() == [
        ["a", "healthy"],
        ["b", "queueing"],
        ["c", "healthy"],
        ["d", "start_failure"],
    ]


def test_thresholds_are_parameters():
    strict = Thresholds(high_latency_factor=1.2)
    assert [f.bottleneck for f in diagnose_point(row(p99_ttft_ms=130.0), CTX, {}, strict)] == [Bottleneck.PREFILL_BOUND]
