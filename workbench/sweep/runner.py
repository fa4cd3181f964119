"""Run a sweep: for each server configuration start vLLM once, measure each of its points, stop it.

Per point (docs/METHOD.md §10: measure before tuning, at fixed lengths):

1. the server for the point's configuration is running (started once and reused by every workload
   and repeat with the same server arguments; a configuration that cannot start is recorded for each
   of its points with the crash class and fix from `workbench.serving.crash`, and the sweep goes on);
2. warm-up: a few requests of the same shape (first-call allocations, caches, compilation);
3. the load generator runs the workload while a `MetricsSampler` polls the server's /metrics;
4. the point is appended to the results store (one atomic line) with the environment fingerprint.

Points already in the store are skipped, so an interrupted sweep reruns only what is missing; an
server's orphan guard (`workbench.serving.reaper`) stops it even if this process is SIGKILLed (during its
start too).
Timings per point separate the server start, the load itself and the sweep's own overhead (prompts,
warm-up, scraping, writing).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from workbench.profiling import sweep_point as point_profiles
from workbench.provenance import provenance
from workbench.serving.client import model_dir, server_version
from workbench.serving.crash import CrashReport, ServerFailure
from workbench.serving.loadgen import (
    LoadResult,
    build_prompts,
    load_tokenizer,
    run_coroutine,
    run_load_async,
)
from workbench.serving.server import Server, plan_launch, start
from workbench.sweep.analysis import format_value
from workbench.sweep.server_metrics import MetricsSampler
from workbench.sweep.spec import SweepPoint, SweepSpec, expand, load_base_recipe
from workbench.sweep.store import PointResult, PointStatus, ResultStore

RESULTS_FILE = "results.jsonl"


@dataclass(frozen=True)
class SweepOutcome:
    """What one `run_sweep` call did. `results` holds every point of the sweep, old and new."""

    spec_name: str
    store_path: Path
    measured: tuple[str, ...]  # point ids measured (or recorded as failed) by this call
    skipped: tuple[str, ...]  # point ids already in the store
    missing: tuple[str, ...]  # point ids still not in the store (their server died mid-group)
    results: tuple[PointResult, ...]
    wall_s: float


@dataclass(frozen=True)
class _ServerStart:
    server: Server
    start_s: float
    version: str | None


class SweepRunner:
    """Measures points into one store; holds the progress bar and the environment fingerprint.

    Mutable by nature (a live progress bar, a store being appended to); one instance per sweep run.
    `on_point` is called with each stored result (the notebook's live table, tests' kill switch).
    """

    def __init__(
        self,
        spec: SweepSpec,
        out_dir: Path,
        *,
        progress: bool = True,
        extra_env: Mapping[str, str] | None = None,
        on_point: Callable[[PointResult], None] | None = None,
    ):
        self.spec = spec
        self.out_dir = Path(out_dir)
        self.store = ResultStore(self.out_dir / RESULTS_FILE)
        self.progress = progress
        self.extra_env = dict(extra_env or {})
        self.on_point = on_point
        self.bar: Any = None  # set while run_points measures

    # -- the public entry ----------------------------------------------------------------------

    def run_points(self, points: Sequence[SweepPoint]) -> list[PointResult]:
        """Measure the points not yet in the store (grouped by server); return all of them, in order."""
        stored = {r.point_id: r for r in self.store.read()}
        todo = [p for p in points if p.point_id not in stored]
        if not todo:
            return [stored[p.point_id] for p in points]
        self.bar = tqdm(total=len(points), initial=len(points) - len(todo), desc=f"sweep {self.spec.name}",
                        unit="point", disable=not self.progress)
        try:
            for _, group in itertools.groupby(todo, key=lambda p: p.server_key):
                for result in self._run_server_group(list(group)):
                    stored[result.point_id] = result
        finally:
            self.bar.close()
            self.bar = None
        return [stored[p.point_id] for p in points if p.point_id in stored]

    # -- one server ----------------------------------------------------------------------------

    def _run_server_group(self, points: list[SweepPoint]) -> list[PointResult]:
        """Start the group's server, measure each point on it, always stop it."""
        self._status(f"starting server {_params_text(points[0])}")
        started = time.monotonic()
        try:
            launched = self._start(points[0])
        except ServerFailure as failure:
            start_s = time.monotonic() - started
            return [self._store(self._failed(p, failure.report, start_s if i == 0 else 0.0))
                    for i, p in enumerate(points)]
        results: list[PointResult] = []
        try:
            tokenizer = load_tokenizer(model_dir(launched.server.url, launched.server.model))
            for index, point in enumerate(points):
                result = self._measure(point, launched, tokenizer, first=index == 0)
                results.append(self._store(result))
                if launched.server.diagnose() is not None:
                    break  # the server died; the rest of the group stays missing and reruns next time
        finally:
            self._status("stopping server")
            launched.server.stop()
        return results

    def _start(self, point: SweepPoint) -> _ServerStart:
        started = time.monotonic()
        env, args = self.extra_env, ()
        if self.spec.profile:  # the profiler is configured; it records only inside each point's own window
            env, args = {**point_profiles.SERVER_ENV, **env}, point_profiles.server_args(self.out_dir, point.server_key)
        plan = plan_launch(point.recipe, extra_env=env, extra_args=args, log_dir=self.out_dir / "server-logs")
        server = start(plan, progress=False)
        return _ServerStart(server, time.monotonic() - started, server_version(server.url))

    def _measure(self, point: SweepPoint, launched: _ServerStart, tokenizer: Any, *, first: bool) -> PointResult:
        """Warm up, run the load under the metrics sampler, and package the point."""
        began = time.monotonic()
        server, workload = launched.server, point.workload
        self._status(f"{_params_text(point)} | {workload.label} | repeat {point.repeat}")
        warmup_s = 0.0
        if self.spec.workload.warmup_requests:
            warm = workload.warmup(self.spec.workload.warmup_requests)
            warm_prompts = build_prompts(tokenizer, warm.num_prompts, warm.input_len, seed=warm.seed)
            t = time.monotonic()
            run_coroutine(run_load_async(server.url, server.model, warm_prompts, warm, progress=False))
            warmup_s = time.monotonic() - t
        load = workload.to_loadgen(self.spec.slo.per_request())
        prompts = build_prompts(tokenizer, workload.num_prompts, workload.input_len,
                                prefix_ratio=workload.prefix_ratio, seed=workload.seed + point.repeat)
        with MetricsSampler(server.url) as sampler:
            result = run_coroutine(run_load_async(server.url, server.model, prompts, load, progress=False))
        start_s = launched.start_s if first else 0.0
        wall_s = time.monotonic() - began + start_s
        timings = {
            "server_start_s": start_s,
            "server_reused": not first,
            "warmup_s": warmup_s,
            "load_s": result.summary.duration_s,
            "wall_s": wall_s,
            "overhead_s": wall_s - start_s - result.summary.duration_s,
        }
        crash = server.diagnose()
        profiled = self.spec.profile and crash is None
        profile = point_profiles.profile_point(server, point, self.out_dir, tokenizer) if profiled else {}
        return PointResult(
            point_id=point.point_id,
            sweep=self.spec.name,
            server_key=point.server_key,
            params=point.params_dict,
            workload=asdict(workload),
            repeat=point.repeat,
            status=_status_of(result, crash),
            summary=result.summary.flat(),
            server_metrics=sampler.summary(),
            timings=timings,
            latencies=_latencies(result),
            crash=_crash_dict(result, crash),
            profile=profile,
            fingerprint=provenance(recipe=point.recipe, url=server.url, model=server.model, server_version=launched.version),
            server_pids=tuple(server.group_pids()) or (server.process.pid,),
            finished_at=_now(),
        )

    def _failed(self, point: SweepPoint, report: CrashReport, start_s: float) -> PointResult:
        return PointResult(
            point_id=point.point_id,
            sweep=self.spec.name,
            server_key=point.server_key,
            params=point.params_dict,
            workload=asdict(point.workload),
            repeat=point.repeat,
            status=PointStatus.START_FAILED,
            timings={"server_start_s": start_s, "server_reused": False, "wall_s": start_s, "overhead_s": 0.0},
            crash=report.as_row(),
            fingerprint=provenance(recipe=point.recipe),
            finished_at=_now(),
        )

    def _store(self, result: PointResult) -> PointResult:
        self.store.append(result)
        if self.bar is not None:
            self.bar.update(1)
        if self.on_point is not None:
            self.on_point(result)
        return result

    def _status(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(text[:90], refresh=True)


def run_sweep(
    spec: SweepSpec,
    out_dir: Path,
    *,
    progress: bool = True,
    extra_env: Mapping[str, str] | None = None,
    on_point: Callable[[PointResult], None] | None = None,
) -> SweepOutcome:
    """Run every point of `spec` that `out_dir/results.jsonl` does not hold yet."""
    began = time.monotonic()
    points = expand(spec, load_base_recipe(spec))
    runner = SweepRunner(spec, out_dir, progress=progress, extra_env=extra_env, on_point=on_point)
    before = runner.store.done_ids()
    results = runner.run_points(points)
    present = {r.point_id for r in results}
    return SweepOutcome(
        spec_name=spec.name,
        store_path=runner.store.path,
        measured=tuple(p.point_id for p in points if p.point_id in present and p.point_id not in before),
        skipped=tuple(p.point_id for p in points if p.point_id in before),
        missing=tuple(p.point_id for p in points if p.point_id not in present),
        results=tuple(results),
        wall_s=time.monotonic() - began,
    )


# -- packaging helpers ---------------------------------------------------------------------------


def _params_text(point: SweepPoint) -> str:
    return " ".join(f"{k}={format_value(v)}" for k, v in point.params) or "base recipe"


def _status_of(result: LoadResult, crash: CrashReport | None) -> PointStatus:
    return PointStatus.OK if crash is None and result.summary.failed == 0 else PointStatus.LOAD_FAILED


def _crash_dict(result: LoadResult, crash: CrashReport | None) -> dict[str, Any] | None:
    if crash is not None:
        return crash.as_row()
    errors = sorted({r.error for r in result.records if r.error})
    if not errors:
        return None
    return {"kind": "requests_failed", "summary": f"{result.summary.failed} of {result.summary.sent} requests failed",
            "fix": "read the first error and the server log; lower the load or the lengths", "evidence": errors[0]}


def _latencies(result: LoadResult) -> dict[str, list[float]]:
    ok = [r for r in result.records if r.success]
    return {
        "ttft_ms": [round(r.ttft_s * 1000.0, 3) for r in ok],
        "tpot_ms": [round(r.tpot_s * 1000.0, 3) for r in ok if r.output_tokens > 1],
        "e2el_ms": [round(r.e2el_s * 1000.0, 3) for r in ok],
    }


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
