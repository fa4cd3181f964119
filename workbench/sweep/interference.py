"""Which points ran side by side, and the best points re-measured alone (`--confirm-best K`).

Points that share a machine can disturb each other: memory bandwidth, host CPU for tokenising and
scheduling, a neighbour's server start (which on a CPU engine takes every core it can get). Every
point stores its placement (`PointResult.placement`: device group, host, the wall-clock window it
occupied — its server start included when it started the server). Two points *ran side by side*
when they were on the same host, in different device groups, and their windows overlap.

`--confirm-best K` takes the K best (configuration, workload) rows under the SLO, re-measures the
ones that ran side by side alone (one server at a time, nothing else of this sweep running) into
`confirm.jsonl` beside the results, and the report shows both numbers with their ratio.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from workbench.sweep.analysis import THROUGHPUT, aggregate_repeats, slo_mask
from workbench.sweep.store import PointResult, PointStatus, results_frame

CONFIRM_FILE = "confirm.jsonl"
OVERLAP_COLUMNS = ["point_id", "mode", "group", "host", "beside", "overlap_s", "niceness"]


def _window(result: PointResult) -> tuple[float, float] | None:
    window = result.placement.get("window") if result.placement else None
    return (float(window[0]), float(window[1])) if window else None


def side_by_side(results: Sequence[PointResult]) -> pd.DataFrame:
    """One row per point with a placement: its group and host, the points beside it, seconds overlapped.

    `beside` lists the ids of points that overlapped it on the same host in another group;
    `overlap_s` is the sum of those overlaps (0.0 for a point that ran alone); `niceness` is the CPU
    priority its server ran at (None for points stored before it was recorded).
    """
    placed = [(r, _window(r)) for r in results if _window(r) is not None]
    rows = []
    for result, (start, end) in placed:
        beside, overlap = [], 0.0
        for other, (o_start, o_end) in placed:
            same_place = other.placement.get("host") == result.placement.get("host")
            if other is result or not same_place or other.placement.get("group") == result.placement.get("group"):
                continue
            shared = min(end, o_end) - max(start, o_start)
            if shared > 0:
                beside.append(other.point_id)
                overlap += shared
        rows.append(
            {
                "point_id": result.point_id,
                "mode": result.placement.get("mode"),
                "group": result.placement.get("group"),
                "host": result.placement.get("host"),
                "beside": tuple(beside),
                "overlap_s": round(overlap, 3),
                "niceness": result.placement.get("niceness"),
            }
        )
    return pd.DataFrame(rows, columns=OVERLAP_COLUMNS)


def best_rows(results: Sequence[PointResult], limits: Mapping[str, float], k: int) -> pd.DataFrame:
    """The K best (configuration, workload) rows meeting the SLO, repeats averaged, best first."""
    configs = aggregate_repeats(results_frame(results))
    if configs.empty or THROUGHPUT not in configs.columns:
        return configs
    meeting = configs[slo_mask(configs, limits)] if limits else configs
    return meeting.sort_values(THROUGHPUT, ascending=False, kind="stable").head(k)


def points_to_confirm(
    results: Sequence[PointResult], limits: Mapping[str, float], k: int
) -> tuple[list[str], list[str]]:
    """(ids to re-measure alone, ids of best points that already ran alone) for the K best rows.

    A row's points are all its repeats (same server and workload); aggregate_repeats names a row by
    its first point's id.
    """
    best = best_rows(results, limits, k)
    if best.empty:
        return [], []
    by_id = {r.point_id: r for r in results}
    wanted = {_row_key(by_id[p]) for p in best["point_id"]}
    chosen = [r.point_id for r in results if _row_key(r) in wanted]
    table = side_by_side(results)
    overlaps = dict(zip(table["point_id"], table["overlap_s"], strict=True))
    rerun = [p for p in chosen if overlaps.get(p, 0.0) > 0]
    return rerun, [p for p in chosen if p not in rerun]


def _row_key(result: PointResult) -> tuple[str, str]:
    return result.server_key, json.dumps(result.workload, sort_keys=True)


def confirm_table(results: Sequence[PointResult], confirmations: Sequence[PointResult]) -> pd.DataFrame:
    """Per confirmed point: throughput and p99 TTFT side by side vs alone, and alone / side-by-side."""
    if not confirmations:
        return pd.DataFrame()
    by_id = {r.point_id: r for r in results}
    overlaps = side_by_side(results).set_index("point_id")
    rows = []
    for alone in confirmations:
        shared = by_id.get(alone.point_id)
        if shared is None:
            continue
        row = {
            "point_id": alone.point_id,
            "group": shared.placement.get("group"),
            "beside": len(overlaps["beside"].get(alone.point_id, ())) if alone.point_id in overlaps.index else 0,
            "status_alone": alone.status.value,
        }
        for metric in (THROUGHPUT, "p99_ttft_ms", "p99_e2el_ms"):
            side, solo = shared.summary.get(metric), alone.summary.get(metric)
            row[f"{metric}_side_by_side"] = side
            row[f"{metric}_alone"] = solo
        side, solo = row[f"{THROUGHPUT}_side_by_side"], row[f"{THROUGHPUT}_alone"]
        ok = alone.status is PointStatus.OK and side and solo
        row["throughput_alone_over_side_by_side"] = solo / side if ok else None
        rows.append(row)
    return pd.DataFrame(rows)


def confirm_path(out_dir: Path) -> Path:
    return Path(out_dir) / CONFIRM_FILE
