"""The results store: one JSON line per finished point, read back as a table.

A sweep runs for hours and gets interrupted (Ctrl-C, SIGKILL, a full disk, a reboot), so each point is
appended to a `workbench.results.jsonl.JsonlLog` as soon as it is measured: a point is on disk whole or
not at all, and a damaged line never costs the points around it. Resuming is `done_ids()`: points
already present are not measured again. A point's provenance stamp is stored under `provenance`
(points written before the key was unified carry it under `fingerprint`, and still read).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.results.envelope import DocumentKind, provenance_of
from workbench.results.jsonl import JsonlLog

SWEEP_POINT_KIND = DocumentKind("sweep-point")  # one per line of a sweep's results.jsonl


class PointStatus(str, enum.Enum):
    OK = "ok"  # measured
    START_FAILED = "start_failed"  # the server for this configuration did not start; `crash` says why
    LOAD_FAILED = "load_failed"  # the server started but requests failed or it died during the load
    LOST = "lost"  # the Ray worker or node measuring it died and the retries ran out; `crash` says why


@dataclass(frozen=True)
class PointResult:
    """Everything one point produced. Plain JSON-able values so a line reads back without this class.

    summary:        the load generator's flat summary (output_throughput, p99_ttft_ms, ...)
    server_metrics: what /metrics said during the load (running_mean, waiting_max, kv_usage_max, ...)
    timings:        seconds: server_start_s (0 when the server was reused), warmup_s, load_s, wall_s
    latencies:      per-request ttft_ms / tpot_ms / e2el_ms lists, for distribution charts
    profile:        with a spec's `profile: true`: the point's time shares and verdicts
                    (workbench.profiling.report.summary), or {"error": ...}
    placement:      where and when it ran (workbench.sweep.measure): mode (serial/parallel/ray/confirm),
                    device group, host, window [start, end] in epoch seconds (its server start
                    included), load_window; the report finds points that ran side by side from these
    """

    point_id: str
    sweep: str
    server_key: str
    params: dict[str, Any]
    workload: dict[str, Any]
    repeat: int
    status: PointStatus
    summary: dict[str, Any] = field(default_factory=dict)
    server_metrics: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    crash: dict[str, Any] | None = None
    profile: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    server_pids: tuple[int, ...] = ()
    finished_at: str = ""
    placement: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        data["server_pids"] = list(self.server_pids)
        return SWEEP_POINT_KIND.stamp() | data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PointResult:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["provenance"] = provenance_of(data)  # older points: under "fingerprint"
        known["status"] = PointStatus(known["status"])
        known["server_pids"] = tuple(known.get("server_pids") or ())
        return cls(**known)

    def row(self) -> dict[str, Any]:
        """One flat table row: ids, swept params, workload, summary, server metrics, timings, crash kind."""
        row: dict[str, Any] = {
            "point_id": self.point_id,
            "server_key": self.server_key,
            "status": self.status.value,
            "repeat": self.repeat,
            **self.params,
            **{k: v for k, v in self.workload.items() if k != "seed"},
            **self.summary,
            **self.server_metrics,
            **self.timings,
            "crash_kind": (self.crash or {}).get("kind"),
            "crash_summary": (self.crash or {}).get("summary"),
            "crash_fix": (self.crash or {}).get("fix"),
            **profile_columns(self.profile),
            **placement_columns(self.placement),
            "finished_at": self.finished_at,
        }
        return row


def profile_columns(profile: dict[str, Any]) -> dict[str, Any]:
    """The profile's numbers as table columns (none when the point was not profiled)."""
    if not profile:
        return {}
    if "error" in profile:
        return {"profile_error": profile["error"]}
    return {
        "busy_share": profile.get("busy_share"),
        "communication_share": profile.get("communication_share"),
        "free_share": profile.get("free_share"),
        "profile_verdicts": ",".join(profile.get("verdicts") or []),
    }


def placement_columns(placement: dict[str, Any]) -> dict[str, Any]:
    """Where the point ran, as table columns (none for points stored before placements were recorded)."""
    if not placement:
        return {}
    return {"mode": placement.get("mode"), "group": placement.get("group"), "host": placement.get("host")}


class ResultStore:
    """The sweep's `JsonlLog` of `PointResult`s (one writer: the sweep's driver thread; parallel and Ray
    workers hand their results to the driver, which appends them one by one)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._log = JsonlLog(self.path)

    def __repr__(self) -> str:
        return f"ResultStore({self.path})"

    def append(self, result: PointResult) -> None:
        """Write one point durably (see `workbench.results.jsonl`)."""
        self._log.append(result.to_dict())

    def read(self) -> list[PointResult]:
        """All complete points in file order; a damaged line is kept in the file, reported and skipped
        (its point is measured again on resume), a torn last line is ignored."""
        return list(self._log.read(PointResult.from_dict).records)

    def done_ids(self) -> set[str]:
        """Ids of points already in the store (any status): a resumed sweep skips these."""
        return {r.point_id for r in self.read()}

    def frame(self) -> pd.DataFrame:
        """One row per point (see `PointResult.row`); empty frame with the id columns if nothing is stored."""
        return results_frame(self.read())


def results_frame(results: Iterable[PointResult]) -> pd.DataFrame:
    rows = [r.row() for r in results]
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=["point_id", "server_key", "status", "repeat"])


def latencies_frame(results: Iterable[PointResult], label_columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """Long table of per-request latencies: point_id, metric (ttft_ms/tpot_ms/e2el_ms), value, labels."""
    rows = []
    for result in results:
        labels = {c: result.row().get(c) for c in label_columns}
        for metric, values in result.latencies.items():
            rows += [{"point_id": result.point_id, **labels, "metric": metric, "value": v} for v in values]
    return pd.DataFrame(rows, columns=["point_id", *label_columns, "metric", "value"])
