"""Read msprof output: `PROF_*/mindstudio_profiler_output/` (what `msprof --export=on` writes).

Files (Ascend/msprof @9ba1ac7b, docs/en/user_guide/profile_data_file_references.md; column names from
its `analysis/msconfig/msprof_export_data_config.py` and the summary assemblers):

    msprof_*.json                  timeline; its 'Overlap Analysis' track (Computing, Communication,
                                   Communication(Not Overlapped), Free) is what msprof-analyze sums
    op_summary_*.csv               every task: Device_id, Op Name, OP Type, Task Type (AI_CORE,
                                   AI_VECTOR_CORE, AI_CPU, MIX_AIC, ..., COMMUNICATION for HCCL ops),
                                   Task Start Time(us), Task Duration(us)
    step_trace_*.csv               per iteration: Device_id, Iteration ID, Iteration End(us),
                                   Iteration Time(us) — the step windows for op_summary's tasks
    op_statistic_*.csv             per op type: OP Type, Core Type, Count, Total Time(us)
    communication_statistic_*.csv  per collective type: OP Type, Count, Total Time(us), ...

Ranks are the Device_id values (one PROF directory can hold several devices; several PROF directories
are several ranks).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from workbench.errors import WorkbenchError
from workbench.profiling import ascend_steps
from workbench.profiling.ascend_csv import read_columns
from workbench.profiling.chrome_trace import read_trace
from workbench.profiling.profile import NPU_MAPPING, OpStat, Profile, ProfileFormat, StepShare

OUTPUT_DIR = "mindstudio_profiler_output"
PATTERNS = (
    "msprof_*.json",
    "op_summary_*.csv",
    "step_trace_*.csv",
    "op_statistic_*.csv",
    "communication_statistic_*.csv",
)
OP_SUMMARY_COLUMNS = {
    "device": ("Device_id",),
    "name": ("Op Name",),
    "op": ("OP Type",),
    "core": ("Task Type",),
    "start": ("Task Start Time(us)",),
    "duration": ("Task Duration(us)",),
}
STEP_TRACE_COLUMNS = {
    "device": ("Device_id",),
    "iteration": ("Iteration ID",),
    "end": ("Iteration End(us)",),
    "time": ("Iteration Time(us)",),
}


def output_dirs(root: Path) -> list[Path]:
    if root.name == OUTPUT_DIR:
        return [root]
    return sorted(p for p in root.rglob(OUTPUT_DIR) if p.is_dir())


def _files(directory: Path, pattern: str) -> list[Path]:
    return sorted(directory.glob(pattern))


def _tasks(directory: Path, default_rank: str) -> pd.DataFrame:
    frames = []
    for path in _files(directory, "op_summary_*.csv"):
        frame = read_columns(
            path, OP_SUMMARY_COLUMNS, required=("name", "start", "duration"), numeric=("start", "duration")
        )
        device = frame["device"] if "device" in frame.columns else pd.Series(default_rank, index=frame.index)
        tasks = ascend_steps.task_frame(frame)
        tasks["rank"] = device.loc[frame.dropna(subset=["start", "duration"]).index].astype(str).to_numpy()
        frames.append(tasks)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _windows(directory: Path) -> pd.DataFrame:
    """Iteration windows (rank, iteration, start, end) from step_trace_*.csv."""
    frames = []
    for path in _files(directory, "step_trace_*.csv"):
        frame = read_columns(
            path, STEP_TRACE_COLUMNS, required=("iteration", "end", "time"), numeric=("iteration", "end", "time")
        )
        frame = frame.dropna(subset=["iteration", "end", "time"])
        frames.append(
            pd.DataFrame(
                {
                    "rank": frame["device"].astype(str) if "device" in frame.columns else "0",
                    "iteration": frame["iteration"].astype(int),
                    "start": frame["end"] - frame["time"],
                    "end": frame["end"],
                }
            )
        )
    return (
        pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["rank", "iteration", "start", "end"])
    )


def assign_iterations(tasks: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """Each task's iteration: the window of its rank that contains its start (NaN outside every window)."""
    steps = np.full(len(tasks), np.nan)
    for rank, own in windows.groupby("rank"):
        own = own.sort_values("start")
        mask = (tasks["rank"] == rank).to_numpy()
        starts = tasks.loc[mask, "start"].to_numpy(float)
        index = np.searchsorted(own["start"].to_numpy(float), starts, side="right") - 1
        inside = (index >= 0) & (starts < own["end"].to_numpy(float)[np.clip(index, 0, None)])
        steps[np.flatnonzero(mask)[inside]] = own["iteration"].to_numpy()[index[inside]]
    return tasks.assign(step=steps)


def _steps(directory: Path, tasks: pd.DataFrame, notes: list[str]) -> tuple[list[StepShare], bool]:
    """(steps, whole_window): the timelines' Overlap Analysis track, else op_summary tasks per iteration."""
    steps: list[StepShare] = []
    whole = True
    for timeline in _files(directory, "msprof_*.json"):
        trace = read_trace(timeline)
        found, unmarked = ascend_steps.steps_from_overlap_track(trace, str(trace.rank if trace.rank is not None else 0))
        steps += found
        whole = whole and unmarked
    if steps or tasks.empty:
        return steps, whole
    windows = _windows(directory)
    placed = assign_iterations(tasks, windows) if not windows.empty else tasks.assign(step=np.nan)
    if windows.empty or placed["step"].isna().all():
        notes.append(
            f"{directory}: op_summary tasks outside every step_trace iteration (or no step_trace_*.csv); "
            "one window per rank from its first to its last task"
        )
        placed = tasks.drop(columns=["step"], errors="ignore")
    else:
        placed = placed.dropna(subset=["step"])
    for rank, own in placed.groupby("rank", sort=True):
        mine = windows[windows["rank"] == rank]
        spans = {int(r["iteration"]): (float(r["start"]), float(r["end"])) for r in mine.to_dict("records")}
        found, whole = ascend_steps.steps_from_tasks(own, str(rank), spans if "step" in own.columns else None)
        steps += found
    return steps, whole


def _ops(directory: Path, tasks: pd.DataFrame, default_rank: str) -> list[OpStat]:
    if not tasks.empty:
        return [o for rank, own in tasks.groupby("rank") for o in ascend_steps.ops_from_tasks(own, str(rank))]
    ops = [
        o
        for path in _files(directory, "op_statistic_*.csv")
        for o in ascend_steps.ops_from_statistic(path, default_rank)
    ]
    if not any(o.communication for o in ops):
        ops += [
            o
            for path in _files(directory, "communication_statistic_*.csv")
            for o in ascend_steps.ops_from_statistic(path, default_rank)
        ]
    return ops


def read_msprof(root: Path) -> Profile:
    """Every mindstudio_profiler_output under `root` as one Profile."""
    dirs = output_dirs(root)
    if not dirs:
        raise WorkbenchError(
            f"{root}: no {OUTPUT_DIR} directory; export the PROF_* directory first "
            "(msprof --export=on --output=PROF_DIR)"
        )
    steps: list[StepShare] = []
    ops: list[OpStat] = []
    notes: list[str] = []
    whole_window = False
    for position, directory in enumerate(dirs):
        if not any(_files(directory, pattern) for pattern in PATTERNS):
            raise WorkbenchError(
                f"{directory}: none of {', '.join(PATTERNS)}; the export did not finish "
                "(rerun msprof --export=on on the PROF_* directory)"
            )
        tasks = _tasks(directory, str(position))
        found, whole = _steps(directory, tasks, notes)
        steps += found
        whole_window |= whole and bool(found)
        ops += _ops(directory, tasks, str(position))
    if not steps:
        notes.append("no msprof_*.json Overlap Analysis track and no op_summary_*.csv tasks: no time shares")
    return Profile(
        str(root), ProfileFormat.MSPROF, "npu", NPU_MAPPING, tuple(steps), tuple(ops), (), tuple(notes), whole_window
    )
