"""Load metrics: hand-computed float64 expectations, vLLM's own calculate_metrics, arrival statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.errors import WorkbenchError
from workbench.serving.load.arrivals import arrival_offsets
from workbench.serving.load.client import RequestRecord
from workbench.serving.load.metrics import summarize
from workbench.serving.load.workload import SLO, Workload


def record(index, ttft, itl, out, *, ok=True, prompt=10):
    return RequestRecord(
        index, 0.0, prompt, out if ok else 0, ttft, ttft + sum(itl), tuple(itl), ok, "" if ok else "boom"
    )


def test_summary_by_hand():
    records = [
        record(0, 0.1, [0.02, 0.03], 3),
        record(1, 0.3, [0.05], 2),
        record(2, 0.0, [], 0, ok=False),
    ]
    s = summarize(records, duration_s=2.0, slo=SLO(ttft_ms=200.0))
    assert (s.sent, s.completed, s.failed) == (3, 2, 1)
    assert s.total_output_tokens == 5 and s.total_input_tokens == 20
    assert s.output_throughput == pytest.approx(2.5) and s.request_throughput == pytest.approx(1.0)
    assert s.total_token_throughput == pytest.approx(12.5)
    assert s.ttft_ms["mean"] == pytest.approx(200.0) and s.ttft_ms["median"] == pytest.approx(200.0)
    # TPOT: (e2e - ttft) / (out - 1) -> 0.05/2 and 0.05/1
    assert s.tpot_ms["mean"] == pytest.approx((25.0 + 50.0) / 2)
    assert s.itl_ms["mean"] == pytest.approx((20 + 30 + 50) / 3)
    assert s.itl_ms["p99"] == pytest.approx(np.percentile([20.0, 30.0, 50.0], 99))
    assert s.e2el_ms["mean"] == pytest.approx((150.0 + 350.0) / 2)
    assert s.request_goodput == pytest.approx(0.5)  # only request 0 has TTFT <= 200 ms
    flat = s.flat()
    assert flat["mean_ttft_ms"] == pytest.approx(200.0) and flat["p90_itl_ms"] == pytest.approx(s.itl_ms["p90"])


def test_empty_run_reports_zeros_like_vllm():
    s = summarize([record(0, 0, [], 0, ok=False)], duration_s=1.0)
    assert s.completed == 0 and s.ttft_ms["mean"] == 0.0 and s.request_goodput is None


def test_matches_vllm_bench_serve_calculate_metrics():
    serve = pytest.importorskip("vllm.benchmarks.serve")
    from vllm.benchmarks.lib.endpoint_request_func import RequestFuncOutput

    rng = np.random.default_rng(3)
    ours, theirs = [], []
    for i in range(40):
        ok = rng.random() > 0.1
        out = int(rng.integers(1, 20))
        ttft = float(rng.uniform(0.01, 0.5))
        itl = [float(x) for x in rng.uniform(0.001, 0.05, size=out - 1)]
        prompt = int(rng.integers(5, 50))
        ours.append(record(i, ttft, itl, out, ok=ok, prompt=prompt))
        theirs.append(
            RequestFuncOutput(
                success=ok,
                latency=ttft + sum(itl),
                output_tokens=out,
                ttft=ttft,
                itl=itl if ok else [],
                prompt_len=prompt,
                start_time=0.0,
            )
        )
    goodput = {"ttft": 300.0, "tpot": 25.0, "e2el": 600.0}
    metrics, _ = serve.calculate_metrics(
        input_requests=[None] * 40,
        outputs=theirs,
        dur_s=7.5,
        tokenizer=None,
        selected_percentiles=[50.0, 90.0, 99.0],
        goodput_config_dict=goodput,
    )
    s = summarize(ours, 7.5, SLO(ttft_ms=300.0, tpot_ms=25.0, e2el_ms=600.0))
    assert (s.completed, s.failed, s.total_input_tokens, s.total_output_tokens) == (
        metrics.completed,
        metrics.failed,
        metrics.total_input,
        metrics.total_output,
    )
    for ours_value, theirs_value in [
        (s.request_throughput, metrics.request_throughput),
        (s.output_throughput, metrics.output_throughput),
        (s.total_token_throughput, metrics.total_token_throughput),
        (s.request_goodput, metrics.request_goodput),
    ]:
        assert ours_value == pytest.approx(theirs_value, rel=1e-12)
    for name in ("ttft", "tpot", "itl", "e2el"):
        stats = getattr(s, f"{name}_ms")
        assert stats["mean"] == pytest.approx(getattr(metrics, f"mean_{name}_ms"), rel=1e-9)
        assert stats["median"] == pytest.approx(getattr(metrics, f"median_{name}_ms"), rel=1e-9)
        assert stats["std"] == pytest.approx(getattr(metrics, f"std_{name}_ms"), rel=1e-9)
        for p, value in getattr(metrics, f"percentiles_{name}_ms"):
            assert stats[f"p{p:g}"] == pytest.approx(value, rel=1e-9)


def test_arrivals_poisson_and_gamma():
    rng = np.random.default_rng(0)
    offsets = arrival_offsets(4000, 10.0, 1.0, rng)
    gaps = np.diff(np.concatenate([[0.0], offsets]))
    assert offsets[-1] == pytest.approx(400.0)  # rescaled to count / rate, as vLLM does
    assert np.all(gaps >= 0) and gaps.mean() == pytest.approx(0.1, rel=1e-9)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.06)  # exponential: CV 1
    bursty = np.diff(arrival_offsets(4000, 10.0, 0.25, np.random.default_rng(0)))
    assert bursty.std() / bursty.mean() == pytest.approx(2.0, abs=0.25)  # gamma(k): CV 1/sqrt(k)
    assert np.all(arrival_offsets(5, math.inf, 1.0, rng) == 0.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_prompts": 4},  # neither concurrency nor rate
        {"num_prompts": 4, "duration_s": 1.0, "concurrency": 1},
        {"concurrency": 2},
        {"num_prompts": 4, "concurrency": 0},
        {"num_prompts": 4, "concurrency": 1, "prefix_ratio": 1.0},
    ],
)
def test_bad_workloads_say_which_flag(kwargs):
    with pytest.raises(WorkbenchError, match="load workload"):
        Workload(input_len=8, output_len=8, **kwargs)
