"""The metrics of one load run, with `vllm bench serve`'s definitions (vllm/benchmarks/serve.py), so
numbers compare with published ones:

    TTFT   request sent -> first streamed chunk that carries a choice
    ITL    gaps between consecutive chunks with a choice (all requests' gaps pooled)
    TPOT   (E2E - TTFT) / (output_tokens - 1), per request with more than one output token
    E2E    request sent -> last chunk with a choice
    throughput = tokens (or requests) of successful requests / wall time of the whole run
    goodput    = successful requests meeting every SLO (ttft/tpot/e2el, ms) / wall time

`LoadResult` is one run's whole record (workload, every request, the summary, provenance) and the bench
JSON file `bench --json` writes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workbench.results.envelope import DocumentKind, envelope
from workbench.results.files import write_json
from workbench.serving.guard import GuardSummary
from workbench.serving.load.client import RequestRecord
from workbench.serving.load.workload import SLO, Workload

BENCH_KIND = DocumentKind("bench")

PERCENTILES = (50.0, 90.0, 99.0)


def _stats_ms(values: list[float]) -> dict[str, float]:
    data = np.array(values or [0.0]) * 1000.0  # vLLM reports 0 for an empty list
    row = {"mean": float(np.mean(data)), "median": float(np.median(data)), "std": float(np.std(data))}
    row.update({f"p{p:g}": float(np.percentile(data, p)) for p in PERCENTILES})
    return row


@dataclass(frozen=True)
class LoadSummary:
    """Aggregates over one run, with vLLM's definitions (latency statistics in milliseconds)."""

    sent: int
    completed: int
    failed: int
    duration_s: float
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float
    output_throughput: float
    total_token_throughput: float
    request_goodput: float | None
    ttft_ms: dict[str, float]
    tpot_ms: dict[str, float]
    itl_ms: dict[str, float]
    e2el_ms: dict[str, float]

    def flat(self) -> dict[str, float | int | None]:
        """One flat row: 'mean_ttft_ms', 'p99_itl_ms', ... (the names vllm bench serve's JSON uses)."""
        row: dict[str, float | int | None] = {k: v for k, v in asdict(self).items() if not isinstance(v, dict)}
        for metric in ("ttft", "tpot", "itl", "e2el"):
            for stat, value in getattr(self, f"{metric}_ms").items():
                row[f"{stat}_{metric}_ms"] = value
        return row


def summarize(records: list[RequestRecord], duration_s: float, slo: SLO | None = None) -> LoadSummary:
    slo = slo or SLO()
    ok = [r for r in records if r.success]
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.prompt_tokens for r in ok)
    tpots = [r.tpot_s for r in ok if r.output_tokens > 1]
    goodput = None
    if slo.active:
        limits = [(slo.ttft_ms, "ttft_s"), (slo.tpot_ms, "tpot_s"), (slo.e2el_ms, "e2el_s")]
        good = sum(all(limit is None or getattr(r, attr) * 1000.0 <= limit for limit, attr in limits) for r in ok)
        goodput = good / duration_s
    return LoadSummary(
        sent=len(records),
        completed=len(ok),
        failed=len(records) - len(ok),
        duration_s=duration_s,
        total_input_tokens=in_tokens,
        total_output_tokens=out_tokens,
        request_throughput=len(ok) / duration_s,
        output_throughput=out_tokens / duration_s,
        total_token_throughput=(in_tokens + out_tokens) / duration_s,
        request_goodput=goodput,
        ttft_ms=_stats_ms([r.ttft_s for r in ok]),
        tpot_ms=_stats_ms(tpots),
        itl_ms=_stats_ms([gap for r in ok for gap in r.itl_s]),
        e2el_ms=_stats_ms([r.e2el_s for r in ok]),
    )


@dataclass(frozen=True)
class LoadResult:
    """Everything one run produced: the workload, every request, the aggregates, and provenance."""

    workload: Workload
    records: tuple[RequestRecord, ...]
    summary: LoadSummary
    provenance: dict[str, Any]
    guard: GuardSummary | None = None  # the output guard over a sample of the answers (`outputs`)

    def to_frame(self) -> pd.DataFrame:
        """One row per request (ms), ordered by send time."""
        rows = [
            {
                "index": r.index,
                "sent_s": r.sent_s,
                "success": r.success,
                "prompt_tokens": r.prompt_tokens,
                "output_tokens": r.output_tokens,
                "ttft_ms": r.ttft_s * 1000.0,
                "tpot_ms": r.tpot_s * 1000.0,
                "mean_itl_ms": float(np.mean(r.itl_s)) * 1000.0 if r.itl_s else 0.0,
                "e2el_ms": r.e2el_s * 1000.0,
                "error": r.error,
            }
            for r in self.records
        ]
        return pd.DataFrame(rows).sort_values("sent_s", ignore_index=True)

    def summary_frame(self) -> pd.DataFrame:
        """Latency statistics as a table: rows ttft/tpot/itl/e2el, columns mean, median, std, p50..."""
        s = self.summary
        return pd.DataFrame({m: getattr(s, f"{m}_ms") for m in ("ttft", "tpot", "itl", "e2el")}).T.add_suffix("_ms")

    def to_dict(self) -> dict[str, Any]:
        payload = {
            "workload": asdict(self.workload),
            "summary": self.summary.flat(),
            "requests": [asdict(r) for r in self.records],
            "guard": self.guard.to_dict() if self.guard is not None else None,
        }
        return envelope(payload, self.provenance, BENCH_KIND)

    def write(self, path: Path) -> Path:
        """The bench JSON, atomically (`workbench.regress` reads it back; older files have "meta")."""
        return write_json(Path(path), self.to_dict())
