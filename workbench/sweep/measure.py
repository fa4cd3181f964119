"""Measure one server configuration's points: start vLLM once, warm up, load, package each point.

Per point (docs/METHOD.md §10: measure before tuning, at fixed lengths):

1. the server for the point's configuration is running (started once and reused by every workload
   and repeat with the same server arguments; a configuration that cannot start is recorded for each
   of its points with the crash class and fix from `workbench.serving.crash`);
2. warm-up: a few requests of the same shape (first-call allocations, caches, compilation);
3. the load generator runs the workload while a `MetricsSampler` polls the server's /metrics (and its
   hang watchdog: a server that stops making progress ends the point as failed with the evidence, and
   the configuration's server is stopped rather than measured further);
4. the point is packaged as a `PointResult` with the environment fingerprint and its placement (which
   device group, which host, the wall-clock window it occupied, so the report can tell which points
   ran side by side).

`ConfigMeasurer.results(points, group)` is a generator: it yields each point as it finishes, and its
`finally` stops the server however the consumer ends (exhausted, closed early, an exception). The
same generator runs in the sweep's own thread (serial), in a worker thread per device group
(`--parallel`), and inside a Ray task on another node (`--ray`): the caller decides where the
results go, and only the driver ever writes the store.
Timings per point separate the server start, the load itself and the sweep's own overhead (warm-up,
scraping, writing); the first point of a server also carries `prompts_s`, what getting the
configuration's prompts still took once the server was up. Prompts come from the model's tokenizer:
loaded here (its import, ~10 s of CPU, starts in the background with the server start), or built once
for every configuration by another process and handed in (`prompts=`: the Ray path, so that no task
imports transformers just to build them).
"""

from __future__ import annotations

import enum
import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from workbench.profiling import sweep_point as point_profiles
from workbench.serving.client import model_dir, server_version
from workbench.serving.crash import CrashKind, CrashReport, ServerFailure
from workbench.serving.device_groups import DeviceGroup
from workbench.serving.hang import ServerHung
from workbench.serving.load.metrics import LoadResult
from workbench.serving.load.runner import HangWatch, run_coroutine, run_load_async
from workbench.serving.load.workload import (
    Prompt,
    build_prompts,
    import_tokenizer_library_in_background,
    load_tokenizer,
)
from workbench.serving.server import AFTER_FAILED_REQUESTS_S, Server, launch, plan_launch, start
from workbench.stack.provenance import provenance
from workbench.sweep.analysis import format_value
from workbench.sweep.server_metrics import MetricsSampler
from workbench.sweep.spec import SweepPoint, SweepSpec
from workbench.sweep.store import PointResult, PointStatus

StatusFn = Callable[[str], None]


class Mode(str, enum.Enum):
    """How a point was run; stored with it so the report can say what could have disturbed it."""

    SERIAL = "serial"  # one server at a time, all of the machine's devices
    PARALLEL = "parallel"  # one server per device group of this machine, several at once
    RAY = "ray"  # a Ray task on some node of a cluster, one server per device group there
    CONFIRM = "confirm"  # re-measured alone by --confirm-best


@dataclass(frozen=True)
class _ServerStart:
    server: Server
    start_s: float
    started_at: float  # epoch seconds when the start began
    version: str | None
    prompts_s: float = 0.0  # after the server was up: what getting the prompts still took


@dataclass(frozen=True)
class PointPrompts:
    """What one point sends: its warm-up prompts and its load prompts, at exact token lengths."""

    warmup: tuple[Prompt, ...]
    load: tuple[Prompt, ...]


PromptBook = Mapping[str, PointPrompts]  # point id -> its prompts


def point_prompts(spec: SweepSpec, point: SweepPoint, tokenizer: Any) -> PointPrompts:
    """The point's prompts: the same for a given tokenizer, wherever they are built (seeded per repeat)."""
    workload = point.workload
    warmup: tuple[Prompt, ...] = ()
    if spec.workload.warmup_requests:
        warm = workload.warmup(spec.workload.warmup_requests)
        warmup = tuple(build_prompts(tokenizer, warm.num_prompts, warm.input_len, seed=warm.seed))
    load = build_prompts(
        tokenizer,
        workload.num_prompts,
        workload.input_len,
        prefix_ratio=workload.prefix_ratio,
        seed=workload.seed + point.repeat,
    )
    return PointPrompts(warmup, tuple(load))


def prompt_book(spec: SweepSpec, points: Sequence[SweepPoint], tokenizer: Any) -> dict[str, PointPrompts]:
    return {point.point_id: point_prompts(spec, point, tokenizer) for point in points}


@dataclass(frozen=True)
class ConfigMeasurer:
    """Everything a worker needs to measure points (plain data: it travels to Ray tasks by pickle).

    `placement` is merged into each point's placement record (Ray adds the node and attempt).
    """

    spec: SweepSpec
    out_dir: Path
    extra_env: Mapping[str, str] = field(default_factory=dict)
    mode: Mode = Mode.SERIAL
    placement: Mapping[str, Any] = field(default_factory=dict)

    def results(
        self,
        points: Sequence[SweepPoint],
        group: DeviceGroup | None = None,
        status: StatusFn | None = None,
        prompts: Callable[[], PromptBook | None] | None = None,
    ) -> Iterator[PointResult]:
        """Start the configuration's server (in `group`), yield each point measured on it, always stop it.

        A server that dies mid-group ends the generator: the rest of the group stays missing and is
        measured by the next run. `prompts`, called once the server is up, returns the points' prompts
        built elsewhere (or None: then, as without it, they are built here from the served model's tokenizer).
        """
        say = status or (lambda _text: None)
        say(f"starting server {params_text(points[0])}")
        needs_tokenizer = prompts is None or self.spec.profile  # profiled points need it too
        if needs_tokenizer:  # once the server is up; its import overlaps the start
            import_tokenizer_library_in_background()
        started, started_at = time.monotonic(), time.time()
        try:
            launched = self._start(points[0], group)
        except ServerFailure as failure:
            start_s = time.monotonic() - started
            for i, point in enumerate(points):
                yield self._failed(point, failure.report, start_s if i == 0 else 0.0, group, started_at)
            return
        try:
            began = time.monotonic()
            book, tokenizer = self._prompts(points, launched.server, prompts, needs_tokenizer)
            launched = replace(launched, prompts_s=time.monotonic() - began)
            for index, point in enumerate(points):
                result = self._measure(
                    point, launched, book[point.point_id], tokenizer, group, first=index == 0, status=say
                )
                yield result
                if _hung(result) or launched.server.diagnose() is not None:
                    return  # the server hung or died; the rest of the group stays missing and reruns next time
        finally:
            say("stopping server")
            launched.server.stop()

    def _prompts(
        self,
        points: Sequence[SweepPoint],
        server: Server,
        supplied: Callable[[], PromptBook | None] | None,
        needs_tokenizer: bool,
    ) -> tuple[PromptBook, Any]:
        """The points' prompts, and the tokenizer when this process needs one (no book handed in, or profiling)."""
        book = supplied() if supplied is not None else None
        if book is not None and not needs_tokenizer:
            return book, None
        tokenizer = load_tokenizer(model_dir(server.url, server.model))
        return book or prompt_book(self.spec, points, tokenizer), tokenizer

    def _start(self, point: SweepPoint, group: DeviceGroup | None) -> _ServerStart:
        started, started_at = time.monotonic(), time.time()
        env, args = dict(self.extra_env), ()
        if self.spec.profile:  # the profiler is configured; it records only inside each point's own window
            env, args = {**point_profiles.SERVER_ENV, **env}, point_profiles.server_args(self.out_dir, point.server_key)
        if point.recipe.cluster is not None:  # a cluster recipe starts its own nodes (workbench.serving.cluster)
            logs = self.out_dir / "server-logs"
            server = launch(point.recipe, extra_env=env, extra_args=args, log_dir=logs, progress=False, pooled=False)
        else:
            plan = plan_launch(
                point.recipe, extra_env=env, extra_args=args, log_dir=self.out_dir / "server-logs", group=group
            )
            server = start(plan, progress=False)
        return _ServerStart(server, time.monotonic() - started, started_at, server_version(server.url))

    def _measure(
        self,
        point: SweepPoint,
        launched: _ServerStart,
        prompts: PointPrompts,
        tokenizer: Any,
        group: DeviceGroup | None,
        *,
        first: bool,
        status: StatusFn,
    ) -> PointResult:
        """Warm up, run the load under the metrics sampler, and package the point (`tokenizer`: profiling only)."""
        began, began_at = time.monotonic(), time.time()
        server, workload = launched.server, point.workload
        status(f"{params_text(point)} | {workload.label} | repeat {point.repeat}")
        warmup_s, watch = 0.0, HangWatch.of(server)
        try:
            if prompts.warmup:
                warm = workload.warmup(self.spec.workload.warmup_requests)
                t = time.monotonic()
                run_coroutine(
                    run_load_async(server.url, server.model, list(prompts.warmup), warm, progress=False, hang=watch)
                )
                warmup_s = time.monotonic() - t
            load = workload.to_loadgen(self.spec.slo.per_request())
            load_at = time.time()
            with MetricsSampler(server.url) as sampler:
                result = run_coroutine(
                    run_load_async(server.url, server.model, list(prompts.load), load, progress=False, hang=watch)
                )
        except ServerHung as hung:
            return self._hung(point, launched, hung, group, first=first, began=(began, began_at))
        load_end = time.time()
        start_s = launched.start_s if first else 0.0
        prompts_s = launched.prompts_s if first else 0.0
        wall_s = time.monotonic() - began + start_s + prompts_s
        timings = {
            "server_start_s": start_s,
            "server_reused": not first,
            "prompts_s": prompts_s,
            "warmup_s": warmup_s,
            "load_s": result.summary.duration_s,
            "wall_s": wall_s,
            "overhead_s": wall_s - start_s - result.summary.duration_s,
        }
        crash = server.diagnose(wait_s=AFTER_FAILED_REQUESTS_S if result.summary.failed else 0.0)
        profiled = self.spec.profile and crash is None
        profile = point_profiles.profile_point(server, point, self.out_dir, tokenizer) if profiled else {}
        window = (launched.started_at if first else began_at, time.time())
        return PointResult(
            **_identity(self.spec, point),
            status=_status_of(result, crash),
            summary=result.summary.flat(),
            server_metrics=sampler.summary(),
            timings=timings,
            latencies=_latencies(result),
            crash=_crash_dict(result, crash),
            profile=profile,
            provenance=provenance(
                recipe=point.recipe, url=server.url, model=server.model, server_version=launched.version
            ),
            server_pids=tuple(server.processes()) or ((server.pid,) if server.pid else ()),
            finished_at=_now(),
            placement=self._placement(group, window, (load_at, load_end)),
        )

    def _failed(
        self, point: SweepPoint, report: CrashReport, start_s: float, group: DeviceGroup | None, started_at: float
    ) -> PointResult:
        return PointResult(
            **_identity(self.spec, point),
            status=PointStatus.START_FAILED,
            timings={"server_start_s": start_s, "server_reused": False, "wall_s": start_s, "overhead_s": 0.0},
            crash=report.as_row(),
            provenance=provenance(recipe=point.recipe),
            finished_at=_now(),
            placement=self._placement(group, (started_at, time.time()), None),
        )

    def _hung(
        self,
        point: SweepPoint,
        launched: _ServerStart,
        hung: ServerHung,
        group: DeviceGroup | None,
        *,
        first: bool,
        began: tuple[float, float],
    ) -> PointResult:
        """A point whose server hung during its warm-up or load: failed, with the watchdog's evidence."""
        start_s = launched.start_s if first else 0.0
        wall_s = time.monotonic() - began[0] + start_s
        window = (launched.started_at if first else began[1], time.time())
        return PointResult(
            **_identity(self.spec, point),
            status=PointStatus.LOAD_FAILED,
            timings={"server_start_s": start_s, "server_reused": not first, "wall_s": wall_s, "overhead_s": 0.0},
            crash=hung.report.as_row() | {"completed_before": hung.completed},
            provenance=provenance(recipe=point.recipe, url=launched.server.url, model=launched.server.model),
            server_pids=tuple(launched.server.processes()),
            finished_at=_now(),
            placement=self._placement(group, window, None),
        )

    def _placement(
        self, group: DeviceGroup | None, window: tuple[float, float], load: tuple[float, float] | None
    ) -> dict[str, Any]:
        """Where and when the point ran: mode, group, host, its window (server start included) and load."""
        where = group.describe() if group is not None else {"group": "all", "host": socket.gethostname()}
        return {
            "mode": self.mode.value,
            **where,
            **self.placement,
            "worker_pid": os.getpid(),
            "niceness": os.nice(0),  # servers inherit it; Ray workers start at 15 unless told otherwise
            "window": [round(window[0], 3), round(window[1], 3)],
            "load_window": [round(load[0], 3), round(load[1], 3)] if load else None,
        }


def lost_result(spec: SweepSpec, point: SweepPoint, reason: str, placement: Mapping[str, Any]) -> PointResult:
    """A point whose worker or node died under it, after the retries ran out: recorded with the reason."""
    return PointResult(
        **_identity(spec, point),
        status=PointStatus.LOST,
        crash={
            "kind": "worker_lost",
            "summary": reason.strip().splitlines()[0][:300] if reason.strip() else "lost",
            "fix": "the Ray worker or node running this point died; check that node, then delete this line from "
            "results.jsonl and rerun the sweep to measure the point again",
            "evidence": reason[-2000:],
        },
        provenance=provenance(recipe=point.recipe),
        finished_at=_now(),
        placement=dict(placement),
    )


# -- packaging helpers ---------------------------------------------------------------------------


def _identity(spec: SweepSpec, point: SweepPoint) -> dict[str, Any]:
    """The fields that say which point a result is, whatever became of it."""
    return {
        "point_id": point.point_id,
        "sweep": spec.name,
        "server_key": point.server_key,
        "params": point.params_dict,
        "workload": asdict(point.workload),
        "repeat": point.repeat,
    }


def params_text(point: SweepPoint) -> str:
    return " ".join(f"{k}={format_value(v)}" for k, v in point.params) or "base recipe"


def _hung(result: PointResult) -> bool:
    return bool(result.crash) and result.crash.get("kind") == CrashKind.HUNG.value


def _status_of(result: LoadResult, crash: CrashReport | None) -> PointStatus:
    return PointStatus.OK if crash is None and result.summary.failed == 0 else PointStatus.LOAD_FAILED


def _crash_dict(result: LoadResult, crash: CrashReport | None) -> dict[str, Any] | None:
    if crash is not None:
        return crash.as_row()
    errors = sorted({r.error for r in result.records if r.error})
    if not errors:
        return None
    return {
        "kind": "requests_failed",
        "summary": f"{result.summary.failed} of {result.summary.sent} requests failed",
        "fix": "read the first error and the server log; lower the load or the lengths",
        "evidence": errors[0],
    }


def _latencies(result: LoadResult) -> dict[str, list[float]]:
    ok = [r for r in result.records if r.success]
    return {
        "ttft_ms": [round(r.ttft_s * 1000.0, 3) for r in ok],
        "tpot_ms": [round(r.tpot_s * 1000.0, 3) for r in ok if r.output_tokens > 1],
        "e2el_ms": [round(r.e2el_s * 1000.0, 3) for r in ok],
    }


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
