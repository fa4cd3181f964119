"""A whole performance twin: both sides up, windows alternating A, B, A, B, ..., each saved as it ends, then judged.

    result = run_perf_twin(PerfTwinRequest(side_a, side_b, repeats=2))

1. `plan.json`: the sides, the load, the window and the repeats; a rerun with the same `out` resumes and
   refuses a different plan;
2. both sides' servers, profiler-configured (leased from the engine pool when one is open, so a notebook
   or test session that already runs the configuration starts nothing; one server when both sides are
   the same configuration: an A/A twin), each warmed up once with the load's shape;
3. the windows (`windows.measure_window`), alternating sides so a machine's drift reaches both, each
   appended to `windows.jsonl` as it ends: a killed run resumes at the first missing window;
4. the attribution, the kernel and module tables, each side's idle causes, written to `perf-twin.json`.

A side given as a URL is measured (latencies, `/metrics`), not profiled; with its own profiler trace
(`Side.trace`, the GPU service's `.pt.trace.json[.gz]`) that trace stands for every window of the side.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.profiling.buckets import Bucket, step_buckets
from workbench.profiling.capture import launch_profiled, server_tokenizer
from workbench.profiling.detect import is_trace_file
from workbench.profiling.idle_causes import CauseTotal, classify_gaps, cuda_links, profile_causes, totals
from workbench.profiling.profile import Profile
from workbench.profiling.read import read_profile
from workbench.profiling.verdicts import ProfileFindingKind, judge
from workbench.recipes import DeviceKind
from workbench.results.files import write_json
from workbench.results.jsonl import JsonlLog
from workbench.serving.load.workload import load_tokenizer
from workbench.serving.server import connect
from workbench.settings import run_dir
from workbench.twin.perf.attribution import attribute, export_cost, profiler_cost
from workbench.twin.perf.kernels import compare_kernels, compare_modules, notable
from workbench.twin.perf.policy import load_perf_thresholds
from workbench.twin.perf.request import PerfTwinRequest
from workbench.twin.perf.result import PerfTwinResult
from workbench.twin.perf.windows import (
    Target,
    WindowRecord,
    measure_window,
    prompts_for,
    read_profile_of,
    run_load,
)
from workbench.twin.sides import Side, same_server

PLAN_FILE = "plan.json"
WINDOWS_FILE = "windows.jsonl"
SLOW_RANK_CAUSES = {"Computing": "device", "Free": "host", "Communication(Not Overlapped)": "others wait for it"}


def _identity(request: PerfTwinRequest) -> dict[str, Any]:
    return {
        "sides": [s.identity() for s in (request.side_a, request.side_b)],
        "traces": [str(s.trace) if s.trace else None for s in (request.side_a, request.side_b)],
        "workload": request.workload.to_dict(),
        "window": vars(request.window),
    }


def _check_plan(directory: Path, request: PerfTwinRequest) -> None:
    """Write the plan, or check a resumed run's plan is this one (the repeats may grow)."""
    wanted = _identity(request)
    path = directory / PLAN_FILE
    if path.is_file():
        found = json.loads(path.read_text(encoding="utf-8")).get("identity")
        if found != wanted:
            changed = sorted(k for k in wanted if (found or {}).get(k) != wanted[k])
            raise WorkbenchError(
                f"{directory} holds a performance twin of another plan (changed: {', '.join(changed)}); choose a "
                "new --out, or rerun with the settings it was started with to resume it"
            )
    elif directory.is_dir() and any(directory.iterdir()):
        raise WorkbenchError(f"{directory} holds files but no {PLAN_FILE}: not a performance twin; choose a new --out")
    directory.mkdir(parents=True, exist_ok=True)
    write_json(path, {"identity": wanted, "repeats": request.repeats})


@contextlib.contextmanager
def _target(side: Side, request: PerfTwinRequest, directory: Path, progress: bool) -> Iterator[Target]:
    """The side's server as the windows use it: launched with the profiler on, or attached."""
    env, args = dict(request.extra_env), request.extra_args
    if side.recipe is not None:
        recipe = side.recipe
        launched = launch_profiled(
            recipe, extra_env=env, extra_args=args, log_dir=directory / "server-logs", progress=progress
        )
        with launched as (server, shared):
            e = recipe.engine
            ranks = e.tensor_parallel_size * e.pipeline_parallel_size * e.data_parallel_size
            yield Target(side.label, server, shared, recipe.device, ranks, server_tokenizer(server))
        return
    with connect(url=side.url, progress=progress) as server:
        tokenizer = load_tokenizer(request.tokenizer) if request.tokenizer else server_tokenizer(server)
        yield Target(side.label, server, None, DeviceKind.CPU, 1, tokenizer)


def _warm_up(target: Target, request: PerfTwinRequest) -> None:
    """The load's shape once before the first window: allocation and, in a compiled engine, every batch size."""
    workload = request.workload
    if workload.warmup_requests:
        prompts = prompts_for(target.tokenizer, workload)
        warm = [prompts[i % len(prompts)] for i in range(workload.warmup_requests)]
        run_load(target, warm, workload, progress=False)


def _order(request: PerfTwinRequest) -> list[tuple[str, int]]:
    return [(label, i) for i in range(request.windows_per_side) for label in ("A", "B")]


def _least_contended(
    target: Target, index: int, request: PerfTwinRequest, directory: Path, progress: bool
) -> WindowRecord:
    """One window, measured again while other work took more than `max_others_cpu` of the machine (up to
    `window_attempts` times): the least contended attempt (`contention`)."""
    policy = load_perf_thresholds(request.thresholds)
    best: WindowRecord | None = None
    made = 0
    for made in range(1, policy.window_attempts + 1):
        record = measure_window(target, index, request, directory, progress, made)
        if best is None or (record.others_cpu or 0.0) < (best.others_cpu or 0.0):
            best = record
        if record.others_cpu is None or record.others_cpu <= policy.max_others_cpu:
            break
    assert best is not None
    return replace(best, attempts=made)


def _collect(request: PerfTwinRequest, directory: Path, progress: bool) -> list[WindowRecord]:
    log = JsonlLog(directory / WINDOWS_FILE)
    done = {(r.side, r.index): r for r in log.read(WindowRecord.from_dict).records}
    pending = [key for key in _order(request) if key not in done]
    if pending:
        sides = {"A": request.side_a, "B": request.side_b}
        one = same_server(request.side_a, request.side_b) and request.side_b.trace is None
        with contextlib.ExitStack() as stack:
            targets: dict[str, Target] = {}
            for label in ("A", "B"):
                if one and label == "B":
                    targets["B"] = replace(targets["A"], label="B")
                    continue
                targets[label] = stack.enter_context(_target(sides[label], request, directory, progress))
                _warm_up(targets[label], request)
            for label, index in pending:
                record = _least_contended(targets[label], index, request, directory, progress)
                log.append(record.to_dict())
                done[(label, index)] = record
    return [done[key] for key in _order(request)]


def _external(side: Side) -> Profile | None:
    """An attached side's own profiler trace, read once."""
    return read_profile(side.trace) if side.trace is not None else None


def _typical_buckets(
    records: Sequence[WindowRecord], external: Profile | None, directory: Path, outlier_factor: float
) -> list[WindowRecord]:
    """Each window with the buckets of its typical steps (outliers left out): from its own profile, or from an
    attached side's trace (the same for every window of the side)."""
    updated = []
    for record in records:
        profile = external if external is not None else read_profile_of(record, directory)
        found = step_buckets(profile, outlier_factor) if profile is not None else None
        updated.append(replace(record, buckets=found.to_dict() if found else None))
    return updated


def _profiles(records: Sequence[WindowRecord], external: Profile | None, directory: Path) -> list[Profile]:
    """A side's profiles: its own trace's (an attached side), else each window's."""
    if external is not None:
        return [external]
    return [p for p in (read_profile_of(r, directory) for r in records) if p is not None]


def _idle(profile: Profile | None, side: Side) -> tuple[CauseTotal, ...]:
    if profile is None:
        return ()
    if side.trace is not None and is_trace_file(Path(side.trace)) and profile.device == "cuda":
        return tuple(totals(classify_gaps(cuda_links(Path(side.trace)), "0")))
    return tuple(profile_causes(profile))


def _slow_rank(profile: Profile | None) -> str | None:
    """msprof-analyze's slow-rank rule on the side's profile (`verdicts`), named with its cause."""
    if profile is None or len(profile.ranks) < 2:
        return None
    for finding in judge(profile):
        if finding.kind is ProfileFindingKind.SLOW_RANK:
            label = finding.evidence.split(" per step", 1)[0]
            return f"rank {finding.rank}: {SLOW_RANK_CAUSES.get(label, label)} ({finding.evidence})"
    return None


def _analyse(request: PerfTwinRequest, directory: Path, records: list[WindowRecord], began: float) -> PerfTwinResult:
    policy = load_perf_thresholds(request.thresholds)
    sides = {"A": request.side_a, "B": request.side_b}
    window = (request.window.delay_steps, request.window.max_steps)
    external = {label: _external(side) for label, side in sides.items()}
    by_side = {
        label: _typical_buckets(
            [r for r in records if r.side == label], external[label], directory, policy.outlier_step
        )
        for label in sides
    }
    profiles = {label: _profiles(by_side[label], external[label], directory) for label in sides}
    attribution = attribute(by_side["A"], by_side["B"], request.workload.classes(), policy)
    kernels = compare_kernels(profiles["A"], profiles["B"], policy) if all(profiles.values()) else ()
    kernel_bucket = next((b.difference.delta for b in attribution.tpot.buckets if b.bucket is Bucket.KERNEL), 0.0)
    last = {label: (found[-1] if found else None) for label, found in profiles.items()}
    notes = [] if all(profiles.values()) else ["a side has no profile (a URL without --trace): no kernel table"]
    notes += sorted({p.mapping for p in last.values() if p is not None})
    return PerfTwinResult(
        directory=directory,
        request=request,
        windows=tuple(by_side["A"] + by_side["B"]),
        attribution=attribution,
        kernels=kernels,
        notable_kernels=tuple(notable(kernels, kernel_bucket * 1000, policy)),
        modules=compare_modules(kernels, profiles["A"], profiles["B"]) if kernels else (),
        idle={label: _idle(last[label], sides[label]) for label in sides},
        slow_ranks={label: text for label in sides if (text := _slow_rank(last[label])) is not None},
        profiler_cost={label: profiler_cost(by_side[label], *window) for label in sides},
        export_cost={label: export_cost(by_side[label]) for label in sides},
        notes=tuple(notes),
        wall_s=round(time.monotonic() - began, 1),
    )


def run_perf_twin(request: PerfTwinRequest, *, progress: bool = True) -> PerfTwinResult:
    """Run (or resume) the performance twin `request` asks for; the result is written as perf-twin.json."""
    began = time.monotonic()
    load_perf_thresholds(request.thresholds)  # a bad thresholds file fails before any server starts
    directory = Path(request.out) if request.out is not None else run_dir("perf-twin", fresh=True)
    _check_plan(directory, request)
    records = _collect(request, directory, progress)
    result = _analyse(request, directory, records, began)
    result.write()
    return result


__all__ = ["PLAN_FILE", "WINDOWS_FILE", "run_perf_twin"]
