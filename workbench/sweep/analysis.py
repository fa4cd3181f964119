"""Read a sweep's results table: Pareto fronts, the best point under the SLO, per-parameter sensitivity.

All functions are pure (table in, table or row out) and work on `ResultStore.frame()`-shaped tables:
one row per point with the swept engine arguments as columns (`max_num_seqs`, `block_size`, ...),
the workload columns (`input_len`, `concurrency`, ...) and the metrics (`output_throughput`,
`p99_ttft_ms`, `p99_e2el_ms`, ... from the load generator; `running_mean`, `waiting_mean`,
`preemptions`, ... from the server). Repeats are averaged with `aggregate_repeats` first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from workbench.errors import WorkbenchError
from workbench.sweep.spec import ServerPoint

WORKLOAD_COLUMNS = ("input_len", "output_len", "num_prompts", "concurrency", "request_rate", "prefix_ratio")
THROUGHPUT = "output_throughput"


def param_columns(frame: pd.DataFrame) -> list[str]:
    """The swept engine-argument columns present in `frame`, in the spec's key order."""
    return [c for c in ServerPoint.model_fields if c in frame.columns]


def workload_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in WORKLOAD_COLUMNS if c in frame.columns]


def varying(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """The columns among `columns` that take more than one value in `frame` (None counts as a value)."""
    return [c for c in columns if frame[c].astype(str).nunique() > 1]


def measured(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows whose status is ok (a failed start has no metrics to rank)."""
    return frame[frame["status"] == "ok"] if "status" in frame.columns else frame


def aggregate_repeats(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (server configuration, workload): numeric metrics averaged over repeats.

    Adds `repeats` (how many rows were averaged). Failed points are dropped.
    """
    ok = measured(frame)
    if ok.empty:
        return ok.assign(repeats=pd.Series(dtype=int))
    keys = ["server_key", *param_columns(ok), *workload_columns(ok)]
    numeric = [c for c in ok.select_dtypes("number").columns if c not in keys and c != "repeat"]
    grouped = ok.astype({k: "object" for k in keys}).groupby(keys, dropna=False, sort=False)
    out = grouped[numeric].mean()
    out["repeats"] = grouped.size()
    out["point_id"] = grouped["point_id"].first()
    return out.reset_index().assign(status="ok")


def pareto_front(frame: pd.DataFrame, x: str = "p99_ttft_ms", y: str = THROUGHPUT) -> pd.DataFrame:
    """`frame` with a boolean column `pareto`: no other row has x <= and y >= with one of them strict.

    x is a cost (latency: lower is better), y a benefit (throughput: higher is better). Rows with a
    missing x or y are never on the front. Sorted by x.
    """
    _require(frame, (x, y))
    xs = frame[x].to_numpy(dtype=float)
    ys = frame[y].to_numpy(dtype=float)
    valid = ~(np.isnan(xs) | np.isnan(ys))
    on_front = []
    for i in range(len(frame)):
        if not valid[i]:
            on_front.append(False)
            continue
        no_worse = valid & (xs <= xs[i]) & (ys >= ys[i])
        better = (xs < xs[i]) | (ys > ys[i])
        on_front.append(not bool(np.any(no_worse & better)))
    return frame.assign(pareto=on_front).sort_values(x, kind="stable")


def slo_mask(frame: pd.DataFrame, limits: Mapping[str, float]) -> pd.Series:
    """True where a measured row meets every limit (column <= limit); False for failed rows."""
    _require(frame, tuple(limits))
    ok = frame["status"].eq("ok") if "status" in frame.columns else pd.Series(True, index=frame.index)
    for column, limit in limits.items():
        ok &= frame[column].astype(float) <= float(limit)
    return ok


def best_under_slo(frame: pd.DataFrame, limits: Mapping[str, float], metric: str = THROUGHPUT) -> pd.Series | None:
    """The row with the highest `metric` among rows meeting the SLO; None when no row meets it.

    Ties go to the lower p99 end-to-end latency, then to the earlier row.
    """
    _require(frame, (metric,))
    meeting = frame[slo_mask(frame, limits)]
    if meeting.empty:
        return None
    tie_break = "p99_e2el_ms" if "p99_e2el_ms" in meeting.columns else metric
    ranked = meeting.assign(_order=range(len(meeting))).sort_values(
        [metric, tie_break, "_order"], ascending=[False, True, True], kind="stable"
    )
    return ranked.iloc[0].drop("_order")


def sensitivity(frame: pd.DataFrame, metric: str = THROUGHPUT, factors: Sequence[str] | None = None) -> pd.DataFrame:
    """How much `metric` moves when one factor changes and everything else is held fixed.

    For each factor (by default every swept engine argument and workload column that varies), rows
    are grouped by all the other factors; within each group holding two or more values of the factor,
    the spread is (max - min) / mean of the metric. `spread` is the mean over those groups (0.5 = the
    metric moves by half its level across the factor's values), `best_value` the value with the
    highest mean metric over the comparable rows. Sorted by spread, largest first.
    """
    _require(frame, (metric,))
    ok = measured(frame)
    if factors is None:
        factors = varying(ok, [*param_columns(ok), *workload_columns(ok)])
    rows = []
    for factor in factors:
        controls = [c for c in factors if c != factor]
        spreads, comparable = [], []
        groups = ok.astype({c: "object" for c in controls}).groupby(controls, dropna=False) if controls else [((), ok)]
        for _, group in groups:
            per_value = group.groupby(group[factor].astype(object), dropna=False)[metric].mean()
            if len(per_value) < 2 or per_value.mean() == 0:
                continue
            spreads.append(float((per_value.max() - per_value.min()) / per_value.mean()))
            comparable.append(group)
        if not spreads:
            continue
        pooled = pd.concat(comparable)
        means = pooled.groupby(pooled[factor].astype(object), dropna=False)[metric].mean()
        rows.append(
            {
                "factor": factor,
                "metric": metric,
                "spread": float(np.mean(spreads)),
                "groups": len(spreads),
                "best_value": means.idxmax(),
                "values": ", ".join(str(v) for v in means.index),
            }
        )
    columns = ["factor", "metric", "spread", "groups", "best_value", "values"]
    return pd.DataFrame(rows, columns=columns).sort_values("spread", ascending=False, ignore_index=True)


def overhead_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per point: wall time, server start, prompts, warm-up, load time and the sweep's own overhead (seconds)."""
    columns = [
        c
        for c in (
            "point_id",
            *param_columns(frame),
            *workload_columns(frame),
            "repeat",
            "status",
            "wall_s",
            "server_start_s",
            "prompts_s",
            "warmup_s",
            "load_s",
            "overhead_s",
        )
        if c in frame.columns
    ]
    return frame[columns]


def _require(frame: pd.DataFrame, columns: Sequence[str]) -> None:
    absent = [c for c in columns if c not in frame.columns]
    if absent:
        known = ", ".join(c for c in frame.columns if c.endswith(("_ms", "throughput")))
        raise WorkbenchError(f"results table has no column(s) {absent}; metric columns are: {known or 'none'}")


def point_labels(frame: pd.DataFrame) -> pd.Series:
    """A short label per row from the columns that vary: 'max_num_seqs=2 concurrency=8' (+ ' #1' repeat)."""
    factors = varying(frame, [*param_columns(frame), *workload_columns(frame)])
    show_repeat = "repeat" in frame.columns and frame["repeat"].nunique() > 1

    def label(row: pd.Series) -> str:
        text = " ".join(f"{c}={format_value(row[c])}" for c in factors) or str(row.get("point_id", ""))
        return f"{text} #{int(row['repeat'])}" if show_repeat else text

    return frame.apply(label, axis=1) if len(frame) else pd.Series(dtype=str)


def format_value(value: object) -> str:
    """A swept value for labels: 4.0 -> '4', 268435456 -> '256MiB' (KV bytes read better in MiB)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 2**20 and value % 2**20 == 0:
        return f"{value // 2**20}MiB"
    return str(value)
