"""The regression API: what `lock`, `baseline`, `regress` and notebook 09 call.

Lock files (`write_lock`, `read_lock`, `check_lock`), stored baselines (`save_baseline`, `load_baseline`,
`list_baselines`, `delete_baseline`), result files read as runs (`read_all`), the noise-aware comparison
(`regress` with `load_thresholds`) and the text it prints (`format_report`); and notebook 09's calls, one
per cell.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from workbench.recipes import load_serving_recipe
from workbench.regress.lockfile import check_lock, format_check, read_lock, write_lock
from workbench.regress.measure import measure_repeats
from workbench.regress.regress import RegressReport, regress
from workbench.regress.report import format_report
from workbench.regress.results import Run, read_all
from workbench.regress.store import (
    Baseline,
    baselines_root,
    delete_baseline,
    list_baselines,
    load_baseline,
    save_baseline,
)
from workbench.regress.tables import runs_frame, series_summary, stack_summary, verdict_summary
from workbench.regress.thresholds import load_thresholds
from workbench.serving.load.workload import Workload
from workbench.settings import run_dir

__all__ = [
    "Baseline",
    "Measured",
    "RegressReport",
    "Run",
    "baseline_for",
    "baselines_root",
    "check_lock",
    "compare",
    "delete_baseline",
    "format_check",
    "format_report",
    "list_baselines",
    "load_baseline",
    "load_thresholds",
    "machine_against_lock",
    "measure",
    "measure_repeats",
    "read_all",
    "read_lock",
    "regress",
    "runs_frame",
    "save_baseline",
    "series_summary",
    "stack_summary",
    "stored_runs",
    "verdict_summary",
    "write_lock",
]


NOTEBOOK_RUNS = "version-lock"


def machine_against_lock(lock_file: str | Path = "") -> pd.DataFrame:
    """This machine against `lock_file`: one row per difference (empty = it matches). Without a file, a
    lock is written first under runs/version-lock/ (so the table shows what a fresh lock looks like)."""
    path = Path(lock_file) if lock_file else run_dir(NOTEBOOK_RUNS) / "stack.lock.yaml"
    if not lock_file:
        write_lock(path)
    check = check_lock(read_lock(path))
    frame = pd.DataFrame(check.rows(), columns=["key", "before", "after", "what", "action", "counts"])
    return frame.rename(columns={"before": "locked", "after": "this machine"}).assign(lock_file=str(path))


@dataclass(frozen=True)
class Measured:
    """Bench JSON files of the two sides: the baseline configuration's repeats and the current ones."""

    baseline: tuple[Path, ...]
    current: tuple[Path, ...]
    out_dir: Path


def _env(pairs: str) -> dict[str, str]:
    """'A=1,B=2' -> {'A': '1', 'B': '2'}."""
    return dict(item.split("=", 1) for item in pairs.split(",") if "=" in item)


def measure(
    recipe: str,
    *,
    input_len: int,
    output_len: int,
    num_prompts: int,
    concurrency: int,
    repeats: int,
    current_env: str = "",
) -> Measured:
    """`repeats` bench runs of the recipe for the baseline, then `repeats` for the current side: on the same
    server when `current_env` is empty, else on a second server with those variables added to the recipe
    (e.g. ASCEND_BACKEND_FORCE_NATIVE=all), so the change shows in the stack difference."""
    base_recipe = load_serving_recipe(recipe)
    workload = Workload(input_len=input_len, output_len=output_len, num_prompts=num_prompts, concurrency=concurrency)
    out = run_dir(NOTEBOOK_RUNS, base_recipe.name, fresh=True)
    changed = _env(current_env)
    if not changed:
        paths = measure_repeats(base_recipe, workload, 2 * repeats, out, label="run", log_dir=out / "logs")
        return Measured(tuple(paths[:repeats]), tuple(paths[repeats:]), out)
    base = measure_repeats(base_recipe, workload, repeats, out, label="baseline", log_dir=out / "logs")
    current = measure_repeats(
        base_recipe.with_overrides(env=changed), workload, repeats, out, label="current", log_dir=out / "logs"
    )
    return Measured(tuple(base), tuple(current), out)


def baseline_for(name: str, measured: Measured, refresh: bool) -> Baseline:
    """The stored baseline `name`; with `refresh`, first replaced by this run's baseline repeats."""
    if refresh:
        return save_baseline(name, list(measured.baseline), replace=True).baseline
    return load_baseline(name)


def compare(baseline: Baseline, measured: Measured, thresholds: str = "") -> RegressReport:
    """`regress` of the current repeats against the baseline."""
    return regress(baseline.name, baseline.runs, read_all(list(measured.current)), load_thresholds(thresholds or None))


def stored_runs(
    series_of: Baseline, measured: Measured, metrics: tuple[str, ...] = ("output_throughput",)
) -> pd.DataFrame:
    """Every stored run of the same series as `series_of` (each baseline in the store) plus the current
    runs, one row each in time order, for the chart across stored runs."""
    series = {r.series for r in series_of.runs}
    groups: dict[str, list[Run]] = {}
    for item in list_baselines():
        if item.baseline is not None:
            matching = [r for r in item.baseline.runs if r.series in series]
            if matching:
                groups[item.name] = matching
    groups["current"] = read_all(list(measured.current))
    return runs_frame(groups, metrics)
