"""Step shares and op tables from Ascend profiler outputs, shared by the torch_npu and msprof readers.

Three sources of the four-way split, best first:

1. a ready-made table: torch_npu's `step_trace_time.csv` (Ascend/pytorch @9e73e708,
   `torch_npu/profiler/analysis/prof_view/_trace_step_time_parser.py`: Device_id, Step, Computing,
   Communication(Not Overlapped), Overlapped, Communication, Free, Stage, Bubble, ..., Preparing) or
   msprof-analyze's `cluster_step_trace_time.csv` (Step, Type, Index, then the same columns);
2. the 'Overlap Analysis' track of a timeline (trace_view.json, msprof_*.json), whose events are named
   Computing / Communication / Communication(Not Overlapped) / Free — what msprof-analyze's
   `MsprofStepTraceTimeAdapter` sums (msprof-analyze @8399c1cd,
   `cluster_analyse/analysis/msprof_step_trace_time_adapter.py`);
3. the task list itself (kernel_details.csv, op_summary_*.csv): compute tasks and HCCL tasks as intervals,
   split per step window with `workbench.profiling.intervals` (msprof-analyze's DB adapter does the same).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from workbench.profiling import intervals
from workbench.profiling.ascend_csv import MISSING, read_columns
from workbench.profiling.chrome_trace import TraceTable
from workbench.profiling.kinds import ascend_kind
from workbench.profiling.profile import OpStat, StepShare

STEP_TABLE_COLUMNS = {
    "device": ("Device_id",),
    "type": ("Type",),
    "index": ("Index",),
    "step": ("Step",),
    "computing": ("Computing",),
    "not_overlapped": ("Communication(Not Overlapped)",),
    "overlapped": ("Overlapped",),
    "communication": ("Communication",),
    "free": ("Free",),
}
NUMERIC = ("computing", "not_overlapped", "overlapped", "communication", "free")
OVERLAP_NAMES = ("Computing", "Communication", "Communication(Not Overlapped)", "Free")
PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def _step_number(value: object, fallback: int) -> int:
    text = str(value or "").strip().lower().removeprefix("step")
    return int(float(text)) if text.replace(".", "", 1).isdigit() else fallback


def steps_from_table(path: Path, default_rank: str) -> tuple[list[StepShare], bool]:
    """Rows of step_trace_time.csv or cluster_step_trace_time.csv as StepShares, and whether each row is
    a whole profiled window rather than one step (the Step column is empty: no step boundaries were seen).

    A cluster file's 'stage' rows (the maximum over a pipeline stage) are left out: ranks are what we
    compare. Overlapped falls back to Communication - Communication(Not Overlapped) when absent.
    """
    frame = read_columns(path, STEP_TABLE_COLUMNS, required=("computing", "not_overlapped", "free"), numeric=NUMERIC)
    if "type" in frame.columns:
        frame = frame[frame["type"].str.lower() == "rank"]
    steps = []
    for position, row in enumerate(frame.to_dict("records")):
        rank = str(row.get("index") or row.get("device") or default_rank).strip()
        overlapped = row.get("overlapped")
        if overlapped is None or pd.isna(overlapped):
            overlapped = (row.get("communication") or 0.0) - (row["not_overlapped"] or 0.0)
        steps.append(
            StepShare(
                rank=rank if rank not in ("", "-1") else default_rank,
                step=_step_number(row.get("step"), position if "type" not in frame.columns else 0),
                start_us=0.0,
                computing_us=float(row["computing"] or 0.0),
                communication_not_overlapped_us=float(row["not_overlapped"] or 0.0),
                overlapped_us=max(float(overlapped or 0.0), 0.0),
                free_us=float(row["free"] or 0.0),
            )
        )
    whole_window = "step" not in frame.columns or not frame["step"].astype(str).str.strip().any()
    return steps, whole_window


def step_windows(trace: TraceTable) -> list[tuple[int, float, float]]:
    """(step, start, end) from ProfilerStep#N events, each ending where the next begins; [] if none."""
    mask = trace.mask_names(PROFILER_STEP)
    if not mask.any():
        return []
    numbers = [int(PROFILER_STEP.match(trace.names[i]).group(1)) for i in trace.name_id[mask]]
    starts, ends = trace.ts[mask], trace.ts[mask] + trace.dur[mask]
    order = np.argsort(starts)
    return [(numbers[i], float(starts[i]), float(ends[i])) for i in order]


def steps_from_overlap_track(trace: TraceTable, rank: str) -> tuple[list[StepShare], bool]:
    """Sum the 'Overlap Analysis' events per step window (torch_npu's rule: a step owns the events
    that start inside it); ([], True) when the trace has no such track. The flag: no ProfilerStep
    marks, so the one row is the whole window."""
    track_pids = [trace.pid_of(p) for p, name in trace.process_names.items() if name == "Overlap Analysis"]
    track_pids = [p for p in track_pids if p is not None]
    if not track_pids:
        return [], True
    on_track = np.isin(trace.pid, track_pids)
    marked = step_windows(trace)
    windows = marked or [(0, float(trace.ts[on_track].min()), float(np.inf))]
    sums: dict[int, dict[str, float]] = {step: dict.fromkeys(OVERLAP_NAMES, 0.0) for step, _, _ in windows}
    names = np.array(trace.names, dtype=object)[trace.name_id[on_track]]
    starts, durs = trace.ts[on_track], trace.dur[on_track]
    window_starts = np.array([w[1] for w in windows])
    owner = np.searchsorted(window_starts, starts, side="right") - 1  # the last window starting at or before
    for name, index, dur, start in zip(names, owner, durs, starts):
        if name in OVERLAP_NAMES and index >= 0 and start < windows[index][2]:
            sums[windows[index][0]][name] += float(dur)
    steps = [
        StepShare(
            rank,
            step,
            start,
            s["Computing"],
            s["Communication(Not Overlapped)"],
            max(s["Communication"] - s["Communication(Not Overlapped)"], 0.0),
            s["Free"],
        )
        for (step, start, _), s in ((w, sums[w[0]]) for w in windows)
    ]
    return steps, not marked


def steps_from_tasks(
    tasks: pd.DataFrame, rank: str, windows: dict[int, tuple[float, float]] | None = None
) -> tuple[list[StepShare], bool]:
    """Split per step (`step` column, else one window: the flag) from task intervals: `start`,
    `duration` (µs), `communication` (bool). A step's window is `windows[step]` (msprof's iteration:
    Iteration End - Iteration Time .. Iteration End) when given, else its first task start to last task end."""
    stepped = "step" in tasks.columns and tasks["step"].notna().any()
    if tasks.empty:
        return [], not stepped
    groups: Iterable[tuple[object, pd.DataFrame]]
    groups = tasks.groupby("step", sort=True) if stepped else [(0, tasks)]
    steps = []
    for position, (step, group) in enumerate(groups):
        starts = group["start"].to_numpy(float)
        ends = starts + group["duration"].to_numpy(float)
        comm = group["communication"].to_numpy(bool)
        compute = intervals.merge(intervals.as_intervals(starts[~comm], ends[~comm]))
        communication = intervals.merge(intervals.as_intervals(starts[comm], ends[comm]))
        number = _step_number(step, position)
        begin, end = (windows or {}).get(number, (float(starts.min()), float(ends.max())))
        split = intervals.split_window(compute, communication, begin, end)
        steps.append(
            StepShare(
                rank,
                number,
                begin,
                split.computing_us,
                split.communication_not_overlapped_us,
                split.overlapped_us,
                split.free_us,
            )
        )
    return steps, not stepped


def ops_from_tasks(tasks: pd.DataFrame, rank: str) -> list[OpStat]:
    """Per op type: calls and total device time (`op`, `kind`, `duration` columns)."""
    if tasks.empty:
        return []
    grouped = tasks.groupby(["op", "kind"], as_index=False).agg(calls=("duration", "size"), self_us=("duration", "sum"))
    return [
        OpStat(rank, str(r["op"]), str(r["kind"]), int(r["calls"]), float(r["self_us"]), r["kind"] == "HCCL")
        for r in grouped.to_dict("records")
    ]


def ops_from_statistic(path: Path, default_rank: str) -> list[OpStat]:
    """op_statistic.csv / op_statistic_*.csv / communication_statistic_*.csv rows as OpStats."""
    frame = read_columns(
        path,
        {
            "device": ("Device_id",),
            "op": ("OP Type",),
            "core": ("Core Type",),
            "count": ("Count",),
            "total": ("Total Time(us)",),
        },
        required=("op", "count", "total"),
        numeric=("count", "total"),
    )
    communication_file = "communication_statistic" in path.name
    ops = []
    for row in frame.to_dict("records"):
        kind = "HCCL" if communication_file else ascend_kind(row.get("core"), str(row["op"]))
        ops.append(
            OpStat(
                str(row.get("device") or default_rank),
                str(row["op"]),
                kind,
                int(row["count"] or 0),
                float(row["total"] or 0.0),
                kind == "HCCL",
            )
        )
    return ops


def task_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Normalise a task table (kernel_details / op_summary, canonical columns op, name, core, start,
    duration, step) into op, kind, start, duration, communication[, step]; rows without times dropped."""
    frame = frame.dropna(subset=["start", "duration"])
    names = frame["name"]
    op = frame["op"] if "op" in frame.columns else names
    op = op.where(~op.isin(MISSING) & op.notna(), names)  # 'N/A' or empty op type: the task's own name
    kinds = [ascend_kind(core, str(name)) for core, name in zip(frame.get("core", [None] * len(frame)), frame["name"])]
    out = pd.DataFrame(
        {
            "op": op.fillna("?").to_numpy(),
            "kind": kinds,
            "start": frame["start"].to_numpy(float),
            "duration": frame["duration"].to_numpy(float),
        }
    )
    out["communication"] = out["kind"] == "HCCL"
    if "step" in frame.columns:
        out["step"] = frame["step"].to_numpy()
    return out
