"""Prometheus text -> snapshots -> per-point server columns, with the names vLLM v1 exposes."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from workbench.serving.prometheus import MetricsSnapshot, parse_prometheus
from workbench.sweep.server_metrics import summarize_samples

TEXT = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 3.0
vllm:num_requests_waiting{engine="0",model_name="tiny"} 2.0
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.25
vllm:num_preemptions_total{engine="0",model_name="tiny"} 1.0
vllm:prefix_cache_queries_total{engine="0",model_name="tiny"} 400.0
vllm:prefix_cache_hits_total{engine="0",model_name="tiny"} 100.0
vllm:request_queue_time_seconds_sum{engine="0",model_name="tiny"} 2.0
vllm:request_queue_time_seconds_count{engine="0",model_name="tiny"} 4.0
vllm:iteration_tokens_total_sum{engine="0",model_name="tiny"} 640.0
vllm:iteration_tokens_total_count{engine="0",model_name="tiny"} 32.0
vllm:cache_config_info{block_size="32",engine="0",label_with_comma="a,b",num_gpu_blocks="8192"} 1.0
"""


def snap(text: str, at: float = 0.0) -> MetricsSnapshot:
    return MetricsSnapshot.from_text(text, at)


def test_parse_labels_and_values():
    samples = parse_prometheus(TEXT)
    labels, value = samples["vllm:cache_config_info"][0]
    assert labels["num_gpu_blocks"] == "8192" and labels["label_with_comma"] == "a,b" and value == 1.0
    assert samples["vllm:num_requests_running"] == [({"engine": "0", "model_name": "tiny"}, 3.0)]


def test_snapshot_fields():
    s = snap(TEXT)
    assert (s.running, s.waiting, s.kv_usage, s.preemptions) == (3.0, 2.0, 0.25, 1.0)
    assert s.num_kv_blocks == 8192
    assert snap("").running is None


def test_summary_differences_counters_and_averages_gauges():
    before = snap(TEXT)
    after_text = (
        TEXT.replace('_total{engine="0",model_name="tiny"} 1.0', '_total{engine="0",model_name="tiny"} 4.0')
        .replace(
            'queries_total{engine="0",model_name="tiny"} 400.0', 'queries_total{engine="0",model_name="tiny"} 600.0'
        )
        .replace('hits_total{engine="0",model_name="tiny"} 100.0', 'hits_total{engine="0",model_name="tiny"} 250.0')
        .replace('seconds_sum{engine="0",model_name="tiny"} 2.0', 'seconds_sum{engine="0",model_name="tiny"} 3.0')
        .replace('seconds_count{engine="0",model_name="tiny"} 4.0', 'seconds_count{engine="0",model_name="tiny"} 8.0')
        .replace('total_sum{engine="0",model_name="tiny"} 640.0', 'total_sum{engine="0",model_name="tiny"} 1000.0')
        .replace('total_count{engine="0",model_name="tiny"} 32.0', 'total_count{engine="0",model_name="tiny"} 50.0')
    )
    during = [
        snap(TEXT.replace('running{engine="0",model_name="tiny"} 3.0', f'running{{engine="0",model_name="tiny"}} {r}'))
        for r in (1.0, 4.0, 7.0)
    ]
    s = summarize_samples(before, during, snap(after_text))
    assert s["samples"] == 3
    assert (s["running_mean"], s["running_max"]) == (4.0, 7.0)
    assert (s["waiting_mean"], s["kv_usage_max"]) == (2.0, 0.25)
    assert s["preemptions"] == 3.0
    assert s["prefix_hit_rate"] == pytest.approx(150.0 / 200.0)
    assert s["queue_time_mean_ms"] == pytest.approx(1000.0 * 1.0 / 4.0)
    assert s["tokens_per_step_mean"] == pytest.approx(360.0 / 18.0)


def test_summary_without_a_metrics_endpoint():
    s = summarize_samples(None, [], None)
    assert s["running_mean"] is None and s["preemptions"] is None and s["prefix_hit_rate"] is None


def test_names_match_the_installed_vllm():
    """The scraped names exist in the vLLM this machine serves with (skipped where vLLM is absent)."""
    spec = importlib.util.find_spec("vllm")  # locate without importing (importing vLLM takes seconds)
    if spec is None or spec.origin is None:
        pytest.skip("vLLM not installed")
    source = (Path(spec.origin).parent / "v1" / "metrics" / "loggers.py").read_text()
    declared = set(re.findall(r'name="(vllm:[a-z_]+)"', source))
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions",
        "vllm:prefix_cache_queries",
        "vllm:prefix_cache_hits",
        "vllm:request_queue_time_seconds",
        "vllm:iteration_tokens_total",
    ):
        assert name in declared
