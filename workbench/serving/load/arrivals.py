"""When to send, in an open-loop run: arrival offsets at `request_rate` per second.

Exponential gaps (Poisson arrivals) when burstiness is 1, gamma(shape=burstiness) otherwise (< 1
burstier, > 1 more regular), scaled so the mean rate stays `request_rate` — `vllm bench serve`'s rule.
"""

from __future__ import annotations

import math

import numpy as np


def arrival_offsets(count: int, request_rate: float, burstiness: float, rng: np.random.Generator) -> np.ndarray:
    """Send times (s from start) for `count` requests: gamma gaps with mean 1/rate, as vllm bench serve.

    Like vLLM, the cumulative times are rescaled so the last arrival is exactly at count / rate, which
    keeps the offered load identical across seeds. rate = inf sends everything at t = 0.
    """
    if math.isinf(request_rate):
        return np.zeros(count)
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (request_rate * burstiness), size=count)
    offsets = np.cumsum(gaps)
    return offsets * ((count / request_rate) / offsets[-1])
