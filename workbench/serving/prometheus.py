"""Reading a vLLM server's Prometheus `/metrics` text into a `MetricsSnapshot`: the one reader the sweeps'
sampler (workbench.sweep.server_metrics) and the hang watchdog (workbench.serving.hang) share.

vLLM v1 registers its metrics in vllm/v1/metrics/loggers.py (PrometheusStatLogger); counters are
exposed with a `_total` suffix, histograms as `_sum` / `_count` / `_bucket`, and a data-parallel server
repeats each sample once per engine (an `engine` label), which `sample_sum` adds up. Besides the gauges
and counters workbench.sweep.server_metrics lists, a snapshot keeps `vllm:prompt_tokens_total` and
`vllm:generation_tokens_total`: with the engine-step count they say whether the engine did any work.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import httpx

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

Samples = dict[str, list[tuple[dict[str, str], float]]]


def parse_prometheus(text: str) -> Samples:
    """Prometheus text exposition -> {sample name: [(labels, value), ...]}; comments skipped."""
    samples: Samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if not match:
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        labels = dict(_LABEL.findall(match.group(2) or ""))
        samples.setdefault(match.group(1), []).append((labels, value))
    return samples


def sample_sum(samples: Samples, name: str) -> float | None:
    """Sum over label sets (all engines of a data-parallel server); None when the server lacks it."""
    entries = samples.get(name)
    return sum(value for _, value in entries) if entries else None


def fetch_metrics(client: httpx.Client, url: str, timeout_s: float = 5.0) -> Samples | None:
    """One /metrics read, parsed; None when the endpoint does not answer in time or is not there."""
    try:
        response = client.get(f"{url.rstrip('/')}/metrics", timeout=timeout_s)
    except httpx.HTTPError:
        return None
    return parse_prometheus(response.text) if response.status_code == 200 else None


@dataclass(frozen=True)
class MetricsSnapshot:
    """One scrape. None = the server does not expose that metric (another vLLM version or engine)."""

    at_s: float  # time.monotonic() of the scrape
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None  # 0..1
    preemptions: float | None = None
    prefix_queries: float | None = None
    prefix_hits: float | None = None
    queue_time_sum_s: float | None = None
    queue_time_count: float | None = None
    iteration_tokens_sum: float | None = None
    iteration_tokens_count: float | None = None  # engine steps so far
    num_kv_blocks: int | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None

    @classmethod
    def from_text(cls, text: str, at_s: float) -> MetricsSnapshot:
        return cls.from_samples(parse_prometheus(text), at_s)

    @classmethod
    def from_samples(cls, s: Samples, at_s: float) -> MetricsSnapshot:
        info = s.get("vllm:cache_config_info") or []
        blocks = info[0][0].get("num_gpu_blocks") if info else None
        return cls(
            at_s=at_s,
            running=sample_sum(s, "vllm:num_requests_running"),
            waiting=sample_sum(s, "vllm:num_requests_waiting"),
            kv_usage=sample_sum(s, "vllm:kv_cache_usage_perc"),
            preemptions=sample_sum(s, "vllm:num_preemptions_total"),
            prefix_queries=sample_sum(s, "vllm:prefix_cache_queries_total"),
            prefix_hits=sample_sum(s, "vllm:prefix_cache_hits_total"),
            queue_time_sum_s=sample_sum(s, "vllm:request_queue_time_seconds_sum"),
            queue_time_count=sample_sum(s, "vllm:request_queue_time_seconds_count"),
            iteration_tokens_sum=sample_sum(s, "vllm:iteration_tokens_total_sum"),
            iteration_tokens_count=sample_sum(s, "vllm:iteration_tokens_total_count"),
            num_kv_blocks=int(blocks) if blocks and blocks.isdigit() else None,
            prompt_tokens=sample_sum(s, "vllm:prompt_tokens_total"),
            generation_tokens=sample_sum(s, "vllm:generation_tokens_total"),
        )


def scrape(client: httpx.Client, url: str, timeout_s: float = 5.0) -> MetricsSnapshot | None:
    """One /metrics read, or None when the endpoint does not answer (an attached non-vLLM server)."""
    samples = fetch_metrics(client, url, timeout_s)
    return MetricsSnapshot.from_samples(samples, time.monotonic()) if samples is not None else None
