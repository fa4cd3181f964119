"""One window of a performance twin on one side's server: the load unprofiled, then profiled in a bounded window.

    record = measure_window(target, "A", 0, request, run_dir)     # saved by the caller as it returns

1. the load, unprofiled, with `/metrics` read before and after: every request's TTFT and TPOT (the numbers
   the twin judges) and the engine's own histograms over exactly those requests (queue and prefill time);
2. the same load again with the profiler on (`/start_profile` with this window's prefix and the request's
   bounds; `/stop_profile` after the load): its trace, moved from the server's trace folder into
   `windows/<side><n>/traces/`, is read into a `Profile` (`windows/<side><n>/profile.json`), its steps into
   buckets; its latencies against the unprofiled run's are the profiler's own cost.

A side given as a URL with its own trace file is not profiled here (`target.trace_dir` is None): its windows
measure latencies and `/metrics`, and the run reads the side's trace once.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from workbench.profiling.buckets import StepBuckets, step_buckets
from workbench.profiling.capture import move_outputs, post, profile_prefix, read_window, wait_for_traces
from workbench.profiling.profile import Profile
from workbench.recipes import DeviceKind
from workbench.results.envelope import DocumentKind
from workbench.serving.load.runner import run_coroutine, run_load_async
from workbench.serving.load.workload import Prompt, Workload, build_prompts
from workbench.serving.prometheus import Samples, fetch_metrics, sample_sum
from workbench.serving.server import Server
from workbench.twin.perf import contention
from workbench.twin.perf.request import PerfTwinRequest, PerfWorkload

WINDOW_KIND = DocumentKind("perf-twin-window")
WINDOWS_DIR = "windows"
# The engine's histograms read around a load (vllm/v1/metrics/loggers.py at 0.32): name -> key here.
HISTOGRAMS = {
    "vllm:request_queue_time_seconds": "queue",
    "vllm:request_prefill_time_seconds": "prefill",
    "vllm:request_decode_time_seconds": "decode",
    "vllm:time_to_first_token_seconds": "ttft",
    "vllm:inter_token_latency_seconds": "itl",
}


@dataclass(frozen=True)
class Target:
    """A side's server as the windows use it."""

    label: str
    server: Server
    trace_dir: Path | None  # where its profiler writes; None: not profiled here
    device: DeviceKind
    ranks: int
    tokenizer: Any


@dataclass(frozen=True)
class RequestTiming:
    """One request of a window: its class, TTFT and TPOT (seconds); failed requests carry no times. `sent_s`
    (since the load began) and the gaps between its tokens (`itl_s`) place each token on the load's clock."""

    klass: str
    ttft_s: float
    tpot_s: float
    success: bool
    sent_s: float = 0.0
    itl_s: tuple[float, ...] = ()

    def arrivals(self) -> list[float]:
        """When each token arrived, seconds since the load began."""
        first = self.sent_s + self.ttft_s
        return [first, *(first + gap for gap in itertools.accumulate(self.itl_s))]


@dataclass(frozen=True)
class WindowRecord:
    """What one window measured (a line of `windows.jsonl`)."""

    side: str
    index: int
    requests: tuple[RequestTiming, ...]  # the unprofiled load
    profiled_requests: tuple[RequestTiming, ...]  # the load while the profiler ran
    engine: dict[str, float]  # mean seconds per request of each HISTOGRAMS key over the unprofiled load
    profile: str | None  # windows/<side><n>/profile.json, relative to the run directory
    buckets: dict[str, float] | None  # StepBuckets.to_dict() of the profiled steps
    seconds: float
    others_cpu: float | None = None  # the share of the machine other work took meanwhile (`contention`)
    attempts: int = 1  # how many times the window was measured (the least contended measurement is this record)

    @property
    def name(self) -> str:
        return f"{self.side}{self.index}"

    def step_buckets(self) -> StepBuckets | None:
        if self.buckets is None:
            return None
        fields = {k: v for k, v in self.buckets.items() if k != "total_us"}
        return StepBuckets(**fields)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        return WINDOW_KIND.stamp() | asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> WindowRecord:
        timings = lambda rows: tuple(RequestTiming(**r | {"itl_s": tuple(r.get("itl_s", ()))}) for r in rows)  # noqa: E731
        return cls(
            side=str(raw["side"]),
            index=int(raw["index"]),
            requests=timings(raw["requests"]),
            profiled_requests=timings(raw["profiled_requests"]),
            engine={str(k): float(v) for k, v in raw["engine"].items()},
            profile=raw.get("profile"),
            buckets=raw.get("buckets"),
            seconds=float(raw.get("seconds", 0.0)),
            others_cpu=raw.get("others_cpu"),
            attempts=int(raw.get("attempts", 1)),
        )


def prompts_for(tokenizer: Any, workload: PerfWorkload) -> list[Prompt]:
    """The load's prompts in the order a window sends them: a trace's requests, or each class's prompts of
    exactly its length, classes interleaved."""
    if workload.trace is not None:
        return workload.trace.prompts(tokenizer, workload.seed)
    per_class = {
        n: build_prompts(tokenizer, workload.lengths().count(n), n, seed=workload.seed + i)
        for i, n in enumerate(workload.input_lens)
    }
    used = {n: 0 for n in workload.input_lens}
    ordered = []
    for n in workload.lengths():
        ordered.append(per_class[n][used[n]])
        used[n] += 1
    return ordered


def run_load(
    target: Target, prompts: list[Prompt], workload: PerfWorkload, progress: bool
) -> tuple[RequestTiming, ...]:
    """`prompts` at the workload's concurrency; prompt i is request i of `prompts_for`'s order (or, in a warm-up,
    of that order cycled), so its class is the workload's class of request i."""
    shape = Workload(
        input_len=max(1, *(p.num_tokens for p in prompts)),
        output_len=max(workload.output_lens()),
        num_prompts=len(prompts),
        concurrency=workload.concurrency,
        seed=workload.seed,
    )
    result = run_coroutine(run_load_async(target.server.url, target.server.model, prompts, shape, progress=progress))
    # the runner sends prompt `index % len(prompts)` as request `index`
    per_request = workload.request_classes()
    classes = [per_request[(r.index % len(prompts)) % len(per_request)] for r in result.records]
    return tuple(
        RequestTiming(k, r.ttft_s, r.tpot_s, r.success, r.sent_s, tuple(r.itl_s))
        for k, r in zip(classes, result.records, strict=True)
    )


def _histograms(samples: Samples | None) -> dict[str, tuple[float, float]]:
    if samples is None:
        return {}
    found = {}
    for name, key in HISTOGRAMS.items():
        total, count = sample_sum(samples, f"{name}_sum"), sample_sum(samples, f"{name}_count")
        if total is not None and count is not None:
            found[key] = (total, count)
    return found


def engine_means(before: Samples | None, after: Samples | None) -> dict[str, float]:
    """Mean seconds per observation of each histogram between two scrapes (those both scrapes hold)."""
    first, last = _histograms(before), _histograms(after)
    means = {}
    for key, (total, count) in last.items():
        if key in first and count > first[key][1]:
            means[key] = (total - first[key][0]) / (count - first[key][1])
    return means


def _metrics(url: str) -> Samples | None:
    with httpx.Client() as client:
        return fetch_metrics(client, url)


def _profiled(target: Target, request: PerfTwinRequest, prompts: list[Prompt], where: Path, progress: bool):
    """The profiled load: (its timings, the Profile read from the window's moved trace)."""
    # the attempt's second in the prefix: a window measured again after a crash never reads the files an earlier
    # attempt left in the server's folder
    prefix = profile_prefix("perf", where.parent.parent.name, where.name, str(int(time.time())))
    started = time.time()
    post(target.server.url, "/start_profile", request.window.body(prefix))
    try:
        timings = run_load(target, prompts, request.workload, progress)
    finally:
        post(target.server.url, "/stop_profile")
    assert target.trace_dir is not None
    outputs = wait_for_traces(
        target.trace_dir, target.ranks, prefix, device=target.device, server=target.server, since=started
    )
    own = where / "traces"
    return timings, read_window(own, move_outputs(outputs, own), target.device)


def measure_window(
    target: Target, index: int, request: PerfTwinRequest, directory: Path, progress: bool = True, attempt: int = 1
) -> WindowRecord:
    """One window on `target` (see the module docstring); the profile is written under `directory`
    (`windows/<side><n>/`, or `windows/<side><n>.<attempt>/` for a window measured again)."""
    began = time.monotonic()
    prompts = prompts_for(target.tokenizer, request.workload)
    machine = contention.sample(target.server.pid)
    before = _metrics(target.server.url)
    timings = run_load(target, prompts, request.workload, progress)
    engine = engine_means(before, _metrics(target.server.url))
    profiled: tuple[RequestTiming, ...] = ()
    profile_file, buckets = None, None
    if target.trace_dir is not None:
        where = directory / WINDOWS_DIR / (f"{target.label}{index}" + (f".{attempt}" if attempt > 1 else ""))
        profiled, profile = _profiled(target, request, prompts, where, progress)
        profile.write(where / "profile.json")
        profile_file = str((where / "profile.json").relative_to(directory))
        found = step_buckets(profile)
        buckets = found.to_dict() if found is not None else None
    seconds = round(time.monotonic() - began, 2)
    others = contention.others_share(machine, contention.sample(target.server.pid))
    return WindowRecord(target.label, index, timings, profiled, engine, profile_file, buckets, seconds, others)


def read_profile_of(record: WindowRecord, directory: Path) -> Profile | None:
    import json

    if record.profile is None:
        return None
    return Profile.from_dict(json.loads((directory / record.profile).read_text(encoding="utf-8")))


def step_clock(timings: Sequence[RequestTiming]) -> list[float]:
    """The engine's steps on the client's clock: every request's token arrivals, merged where they came together.

    One engine step hands a token to every request it decodes, so their arrivals cluster within milliseconds
    while steps lie a step apart — and a request's own gaps between tokens are steps: arrivals closer than half
    the median of those gaps belong to one step. Worked example: two requests, tokens 20 ms apart, arrivals
    0.100, 0.1004 | 0.120, 0.1203 | 0.140 -> steps 0.100, 0.120, 0.140.
    """
    times = sorted(t for timing in timings if timing.success for t in timing.arrivals())
    step_gaps = sorted(gap for timing in timings if timing.success for gap in timing.itl_s)
    if len(times) < 2 or not step_gaps:
        return times
    tolerance = 0.5 * step_gaps[len(step_gaps) // 2]
    steps = [times[0]]
    for earlier, later in itertools.pairwise(times):
        if later - earlier > tolerance:
            steps.append(later)
    return steps


def window_step_s(timings: Sequence[RequestTiming], first: int, count: int) -> float | None:
    """The mean time between the client's steps `first` .. `first + count` (None when the load had fewer)."""
    steps = step_clock(timings)
    last = min(first + count, len(steps) - 1)
    if last - first < 2:
        return None
    return (steps[last] - steps[first]) / (last - first)


def typical_step_s(timings: Sequence[RequestTiming], outlier_factor: float) -> float | None:
    """The mean gap between a request's tokens — a decode step, as the client saw it — leaving out gaps longer
    than `outlier_factor` x the median gap (the client's side of `buckets.step_buckets(outlier_factor=...)`);
    None with fewer than two gaps."""
    gaps = sorted(gap for timing in timings if timing.success for gap in timing.itl_s)
    if len(gaps) < 2:
        return None
    limit = outlier_factor * gaps[len(gaps) // 2]
    usual = [gap for gap in gaps if gap <= limit]
    return sum(usual) / len(usual)


def by_class(timings: Sequence[RequestTiming]) -> dict[str, list[RequestTiming]]:
    grouped: dict[str, list[RequestTiming]] = {}
    for timing in timings:
        if timing.success:
            grouped.setdefault(timing.klass, []).append(timing)
    return grouped


__all__ = [
    "HISTOGRAMS",
    "WINDOWS_DIR",
    "WINDOW_KIND",
    "RequestTiming",
    "Target",
    "WindowRecord",
    "by_class",
    "step_clock",
    "typical_step_s",
    "window_step_s",
    "engine_means",
    "measure_window",
    "prompts_for",
    "run_load",
    "read_profile_of",
]
