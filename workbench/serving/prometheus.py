"""Reading a vLLM server's Prometheus `/metrics` text: the one parser the sweeps' sampler and the hang
watchdog share.

vLLM v1 registers its metrics in vllm/v1/metrics/loggers.py (PrometheusStatLogger); counters are
exposed with a `_total` suffix, histograms as `_sum` / `_count` / `_bucket`, and a data-parallel server
repeats each sample once per engine (an `engine` label), which `sample_sum` adds up.
"""

from __future__ import annotations

import re

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
