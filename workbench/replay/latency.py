"""Latency of the replayed requests against the recorded ones, per request class.

For each class (chat, followup, tools, json, completion, and all together) and each of TTFT, TPOT and E2E
(vLLM's definitions, `workbench.serving.load.metrics`; TTFT and TPOT exist for streamed requests only):
the recorded and replayed quantiles, their ratio (replayed / recorded), and a bootstrap interval of that
ratio — requests resampled with replacement, the same requests on both sides (paired), `bootstrap_resamples`
times. A ratio is judged on its interval's low end, so run-to-run noise alone never makes a port "slower".
SLO attainment is the share of requests meeting every objective the policy sets, on each side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from workbench.evaluate.thresholds import judge_loss
from workbench.replay.policy import LatencyPolicy
from workbench.results.verdict import Verdict
from workbench.serving.load.trace import Answer, TraceRecord

METRICS = ("ttft", "tpot", "e2el")
ALL = "all"


def _value(answer: Answer, metric: str) -> float | None:
    return {"ttft": answer.ttft_s, "tpot": answer.tpot_s, "e2el": answer.e2e_s}[metric]


@dataclass(frozen=True)
class LatencyRow:
    request_class: str
    metric: str
    quantile: float
    requests: int
    recorded_ms: float
    replayed_ms: float
    ratio: float
    low: float  # bootstrap interval of the ratio
    high: float
    verdict: Verdict

    def row(self) -> dict:
        return asdict(self) | {"verdict": self.verdict.value}


@dataclass(frozen=True)
class Attainment:
    request_class: str
    requests: int
    recorded: float
    replayed: float
    verdict: Verdict

    def row(self) -> dict:
        return asdict(self) | {"verdict": self.verdict.value}


def paired(
    records: Sequence[TraceRecord], answers: Mapping[str, Answer], metric: str
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per class (and 'all'): recorded and replayed values (s) of the requests measured on both sides."""
    pairs: dict[str, list[tuple[float, float]]] = {}
    for record in records:
        new = answers.get(record.id)
        if record.answer is None or new is None or not record.answer.ok or not new.ok:
            continue
        old_value, new_value = _value(record.answer, metric), _value(new, metric)
        if old_value is None or new_value is None or old_value <= 0:
            continue
        for name in (record.request_class, ALL):
            pairs.setdefault(name, []).append((old_value, new_value))
    return {name: (np.array([a for a, _ in v]), np.array([b for _, b in v])) for name, v in pairs.items()}


def ratio_interval(old: np.ndarray, new: np.ndarray, q: float, policy: LatencyPolicy) -> tuple[float, float, float]:
    """(ratio of the q-th percentiles, interval low, high) by a paired bootstrap."""
    ratio = float(np.percentile(new, q) / np.percentile(old, q))
    if len(old) < 2:
        return ratio, ratio, ratio
    rng = np.random.default_rng(policy.seed)
    picks = rng.integers(0, len(old), size=(policy.bootstrap_resamples, len(old)))
    ratios = np.percentile(new[picks], q, axis=1) / np.percentile(old[picks], q, axis=1)
    tail = (1.0 - policy.confidence) / 2 * 100
    return ratio, float(np.percentile(ratios, tail)), float(np.percentile(ratios, 100 - tail))


def latency_rows(
    records: Sequence[TraceRecord], answers: Mapping[str, Answer], policy: LatencyPolicy
) -> list[LatencyRow]:
    rows = []
    for metric in METRICS:
        for name, (old, new) in sorted(paired(records, answers, metric).items()):
            for q in policy.quantiles:
                ratio, low, high = ratio_interval(old, new, q, policy)
                judged = len(old) >= policy.min_requests
                verdict = (judge_loss(low, policy.slower_ratio) or Verdict.PASS) if judged else Verdict.PASS
                rows.append(
                    LatencyRow(
                        name,
                        metric,
                        q,
                        len(old),
                        float(np.percentile(old, q)) * 1000.0,
                        float(np.percentile(new, q)) * 1000.0,
                        ratio,
                        low,
                        high,
                        verdict,
                    )
                )
    return rows


def _meets(answer: Answer, policy: LatencyPolicy) -> bool:
    limits = (("ttft", policy.ttft_ms), ("tpot", policy.tpot_ms), ("e2el", policy.e2el_ms))
    for metric, limit in limits:
        value = _value(answer, metric)
        if limit is not None and value is not None and value * 1000.0 > limit:
            return False
    return True


def attainment(
    records: Sequence[TraceRecord], answers: Mapping[str, Answer], policy: LatencyPolicy
) -> list[Attainment]:
    """Per class and overall: the share of requests meeting every objective, recorded and replayed."""
    groups: dict[str, list[tuple[bool, bool]]] = {}
    for record in records:
        new = answers.get(record.id)
        if record.answer is None or new is None or not record.answer.ok:
            continue
        met = (_meets(record.answer, policy), new.ok and _meets(new, policy))
        for name in (record.request_class, ALL):
            groups.setdefault(name, []).append(met)
    rows = []
    for name, met in sorted(groups.items()):
        old, new = sum(a for a, _ in met) / len(met), sum(b for _, b in met) / len(met)
        judged = len(met) >= policy.min_requests
        verdict = (judge_loss(old - new, policy.attainment_drop) or Verdict.PASS) if judged else Verdict.PASS
        rows.append(Attainment(name, len(met), old, new, verdict))
    return rows


__all__ = ["ALL", "METRICS", "Attainment", "LatencyRow", "attainment", "latency_rows", "paired", "ratio_interval"]
