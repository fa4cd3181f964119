"""Read torch_npu profiler output: `<host>_<pid>_<time>_ascend_pt/ASCEND_PROFILER_OUTPUT/`, one per rank.

What vllm-ascend's `/start_profile` ... `/stop_profile` leaves behind once `torch_npu.profiler.profiler.
analyse()` has run over it (vllm-ascend @182b75ea, docs/source/developer_guide/performance_and_debug/
service_profiling_guide.md, "Analyze Data"). Files used (any subset; what is missing is named in the
profile's notes, and a directory with none of them is an error naming them):

    step_trace_time.csv   the four-way split per step (see `ascend_steps`)
    trace_view.json       the timeline: vLLM's host scopes (VLLM_CUSTOM_SCOPES_FOR_PROFILING) as host phases,
                          and its 'Overlap Analysis' track when step_trace_time.csv is absent
    kernel_details.csv    every device task: Name, Type, Accelerator Core, Start Time(us), Duration(us),
                          Step Id — top ops, kinds of work, and the split when nothing better exists
    op_statistic.csv      per op type totals (OP Type, Core Type, Count, Total Time(us)) without kernel_details
    communication.json    per step and collective op: Communication Time Info (Elapse/Transit/Wait/
                          Synchronization/Idle Time(ms)) — communication op totals and the wait share

The rank is taken from `profiler_info_<rank>.json` beside ASCEND_PROFILER_OUTPUT (torch_npu writes it in
distributed runs), else the Device_id column, else the order of the directories.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.profiling import ascend_steps
from workbench.profiling.ascend_csv import read_columns
from workbench.profiling.chrome_trace import TraceTable, read_trace
from workbench.profiling.profile import NPU_MAPPING, HostPhase, OpStat, Profile, ProfileFormat, StepShare
from workbench.profiling.torch_trace import host_of

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
KNOWN_FILES = ("step_trace_time.csv", "trace_view.json", "kernel_details.csv", "op_statistic.csv", "communication.json")
KERNEL_COLUMNS = {
    "step": ("Step Id",),
    "name": ("Name",),
    "op": ("Type",),
    "core": ("Accelerator Core", "Task Type"),
    "start": ("Start Time(us)",),
    "duration": ("Duration(us)",),
}


def output_dirs(root: Path) -> list[Path]:
    """The ASCEND_PROFILER_OUTPUT directories at or under `root` (sorted)."""
    if root.name == OUTPUT_DIR:
        return [root]
    return sorted(p for p in root.rglob(OUTPUT_DIR) if p.is_dir())


def rank_of(output_dir: Path, position: int) -> str:
    """The rank from profiler_info_<rank>.json next to ASCEND_PROFILER_OUTPUT, else the position."""
    for info in sorted(output_dir.parent.glob("profiler_info_*.json")):
        match = re.fullmatch(r"profiler_info_(\d+)\.json", info.name)
        if match:
            return match.group(1)
    return str(position)


def _steps(output_dir: Path, rank: str, trace: TraceTable | None, notes: list[str]) -> tuple[list[StepShare], bool]:
    """(steps, whole_window) from the best source present (see `ascend_steps`)."""
    table = output_dir / "step_trace_time.csv"
    if table.is_file():
        return ascend_steps.steps_from_table(table, rank)
    if trace is not None:
        steps, whole = ascend_steps.steps_from_overlap_track(trace, rank)
        if steps:
            notes.append(f"rank {rank}: shares from trace_view.json's Overlap Analysis track (no step_trace_time.csv)")
            return steps, whole
    kernels = output_dir / "kernel_details.csv"
    if kernels.is_file():
        notes.append(f"rank {rank}: shares from kernel_details.csv task intervals (no step_trace_time.csv)")
        return ascend_steps.steps_from_tasks(_kernel_tasks(kernels), rank)
    return [], True


def _kernel_tasks(path: Path):
    frame = read_columns(path, KERNEL_COLUMNS, required=("name", "start", "duration"), numeric=("start", "duration"))
    return ascend_steps.task_frame(frame)


def _ops(output_dir: Path, rank: str, notes: list[str]) -> list[OpStat]:
    kernels = output_dir / "kernel_details.csv"
    if kernels.is_file():
        return ascend_steps.ops_from_tasks(_kernel_tasks(kernels), rank)
    statistic = output_dir / "op_statistic.csv"
    if statistic.is_file():
        return [
            OpStat(rank, o.name, o.kind, o.calls, o.self_us, o.communication)
            for o in ascend_steps.ops_from_statistic(statistic, rank)
        ]
    notes.append(f"rank {rank}: no kernel_details.csv or op_statistic.csv, so no op table")
    return []


def communication_ops(path: Path, rank: str) -> list[OpStat]:
    """Collective and point-to-point ops of communication.json, summed over steps (Elapse Time, µs).

    Layout (torch_npu `_communication_parser.py`): {"step<N>": {"collective": {"<op>@<group>":
    {"Communication Time Info": {"Elapse Time(ms)": ...}, ...}, "Total Op Info": ...}, "p2p": {...}}}.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise WorkbenchError(f"{path}: not readable JSON ({exc}); re-run the torch_npu analysis") from None
    totals: dict[str, list[float]] = {}
    for step in data.values() if isinstance(data, dict) else []:
        for group in ("collective", "p2p"):
            for op, info in ((step or {}).get(group) or {}).items():
                if op == "Total Op Info" or not isinstance(info, dict):
                    continue
                elapse = float((info.get("Communication Time Info") or {}).get("Elapse Time(ms)") or 0.0)
                entry = totals.setdefault(op.split("@")[0], [0, 0.0])
                entry[0] += 1
                entry[1] += elapse * 1000.0
    return [OpStat(rank, name, "HCCL", int(calls), us, True) for name, (calls, us) in totals.items()]


def read_torch_npu(root: Path, dirs: list[Path] | None = None) -> Profile:
    """Every rank's ASCEND_PROFILER_OUTPUT under `root` (or just `dirs`) as one Profile."""
    dirs = dirs if dirs is not None else output_dirs(root)
    if not dirs:
        raise WorkbenchError(
            f"{root}: no {OUTPUT_DIR} directory; run torch_npu.profiler.profiler.analyse() on "
            "the *_ascend_pt directory first (vllm-ascend's service profiling guide, step 4)"
        )
    steps: list[StepShare] = []
    ops: list[OpStat] = []
    host: list[HostPhase] = []
    notes: list[str] = []
    whole_window = False
    for position, output_dir in enumerate(dirs):
        present = [name for name in KNOWN_FILES if (output_dir / name).is_file()]
        if not present:
            raise WorkbenchError(
                f"{output_dir}: none of {', '.join(KNOWN_FILES)}; the analysis did not finish "
                "(run torch_npu.profiler.profiler.analyse on its *_ascend_pt directory)"
            )
        rank = rank_of(output_dir, position)
        trace = read_trace(output_dir / "trace_view.json") if (output_dir / "trace_view.json").is_file() else None
        host += host_of(trace, rank, "npu") if trace is not None else []
        rank_steps, whole = _steps(output_dir, rank, trace, notes)
        steps += rank_steps
        whole_window |= whole and bool(rank_steps)
        rank_ops = _ops(output_dir, rank, notes)
        if not any(o.communication for o in rank_ops) and (output_dir / "communication.json").is_file():
            rank_ops += communication_ops(output_dir / "communication.json", rank)
        ops += rank_ops
    if not steps:
        notes.append(
            "no step_trace_time.csv, trace_view.json Overlap Analysis track or kernel_details.csv: no time shares"
        )
    return Profile(
        str(root),
        ProfileFormat.TORCH_NPU,
        "npu",
        NPU_MAPPING,
        tuple(steps),
        tuple(ops),
        tuple(host),
        tuple(notes),
        whole_window,
    )
