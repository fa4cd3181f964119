"""What the vLLM server itself says during a load: its Prometheus `/metrics`, sampled and summarised.

The client sees latencies; only the server knows *why*: how many requests it was running and how many
waited, how full the KV cache was, whether it preempted, how often the prefix cache hit. One scrape is
a `workbench.serving.prometheus.MetricsSnapshot`; the metric names are those vLLM v1 registers
(vllm/v1/metrics/loggers.py, PrometheusStatLogger):

    vllm:num_requests_running     gauge    requests in the running batch
    vllm:num_requests_waiting     gauge    requests queued for admission
    vllm:kv_cache_usage_perc      gauge    KV-cache usage, 0..1 (despite the name)
    vllm:num_preemptions          counter  (exposed as ..._total)
    vllm:prefix_cache_queries     counter  tokens looked up in the prefix cache (..._total)
    vllm:prefix_cache_hits        counter  tokens found there (..._total)
    vllm:request_queue_time_seconds   histogram (_sum, _count): time spent waiting
    vllm:iteration_tokens_total       histogram (_sum, _count): tokens per engine step
    vllm:cache_config_info        info     labels num_gpu_blocks, block_size

Gauges are instantaneous, so a `MetricsSampler` thread polls /metrics while the load runs; counters
and histograms are read before and after and differenced.
"""

from __future__ import annotations

import threading

import httpx

from workbench.serving.prometheus import MetricsSnapshot, scrape

SAMPLE_INTERVAL_S = 0.5


def _delta(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


def _get(snapshot: MetricsSnapshot | None, attr: str) -> float | int | None:
    return getattr(snapshot, attr) if snapshot is not None else None


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return None if numerator is None or not denominator else numerator / denominator


def summarize_samples(
    before: MetricsSnapshot | None, during: list[MetricsSnapshot], after: MetricsSnapshot | None
) -> dict[str, float | int | None]:
    """Flat columns for the results table (None where the server did not say).

    running_mean/max, waiting_mean/max and kv_usage_mean/max over the samples taken during the load;
    preemptions, prefix_hit_rate (hits / queries), queue_time_mean_ms and tokens_per_step_mean over
    the whole load (counter differences).
    """

    def stats(attr: str) -> tuple[float | None, float | None]:
        values = [getattr(s, attr) for s in during if getattr(s, attr) is not None]
        return (sum(values) / len(values), max(values)) if values else (None, None)

    running_mean, running_max = stats("running")
    waiting_mean, waiting_max = stats("waiting")
    kv_mean, kv_max = stats("kv_usage")
    b, a = before, after
    queue_sum = _delta(_get(b, "queue_time_sum_s"), _get(a, "queue_time_sum_s"))
    queue_mean_s = _ratio(queue_sum, _delta(_get(b, "queue_time_count"), _get(a, "queue_time_count")))
    return {
        "samples": len(during),
        "running_mean": running_mean,
        "running_max": running_max,
        "waiting_mean": waiting_mean,
        "waiting_max": waiting_max,
        "kv_usage_mean": kv_mean,
        "kv_usage_max": kv_max,
        "preemptions": _delta(_get(b, "preemptions"), _get(a, "preemptions")),
        "prefix_hit_rate": _ratio(
            _delta(_get(b, "prefix_hits"), _get(a, "prefix_hits")),
            _delta(_get(b, "prefix_queries"), _get(a, "prefix_queries")),
        ),
        "queue_time_mean_ms": None if queue_mean_s is None else queue_mean_s * 1000.0,
        "tokens_per_step_mean": _ratio(
            _delta(_get(b, "iteration_tokens_sum"), _get(a, "iteration_tokens_sum")),
            _delta(_get(b, "iteration_tokens_count"), _get(a, "iteration_tokens_count")),
        ),
        "num_kv_blocks": _get(a, "num_kv_blocks"),
    }


class MetricsSampler:
    """Scrape /metrics every `interval_s` in a background thread for the duration of a `with` block.

    with MetricsSampler(server.url) as sampler:
        run the load
    sampler.summary()  # -> dict of flat columns
    """

    def __init__(self, url: str, interval_s: float = SAMPLE_INTERVAL_S):
        self.url = url.rstrip("/")
        self.interval_s = interval_s
        self.before: MetricsSnapshot | None = None
        self.after: MetricsSnapshot | None = None
        self.during: list[MetricsSnapshot] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sweep-metrics", daemon=True)

    def __enter__(self) -> MetricsSampler:
        with httpx.Client() as client:
            self.before = scrape(client, self.url)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        with httpx.Client() as client:
            self.after = scrape(client, self.url)

    def _loop(self) -> None:
        # Scrape first, then wait: a load shorter than one interval (a fast machine, a tiny workload)
        # still gets a sample of the gauges.
        with httpx.Client() as client:
            while True:
                snapshot = scrape(client, self.url)
                if snapshot is not None:
                    self.during.append(snapshot)
                if self._stop.wait(self.interval_s):
                    break

    def summary(self) -> dict[str, float | int | None]:
        return summarize_samples(self.before, self.during, self.after)
