"""The sweep's findings in one place: `SweepReport` (tables) and a self-contained HTML file.

`build_report(spec, results)` turns stored points into the tables a reader needs — the best point
under the SLO, the points table, Pareto fronts, sensitivity, diagnosis, time per point, which points
ran side by side (parallel and Ray sweeps) and, after `--confirm-best K`, their numbers alone — and
`write_html` renders them with the plotly figures from `workbench.sweep.charts`. The HTML embeds
plotly.js once so it opens offline (no CDN is reachable on many porting machines).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from workbench.profiling.profile import CPU_MAPPING
from workbench.sweep import charts
from workbench.sweep.analysis import (
    aggregate_repeats,
    best_under_slo,
    overhead_table,
    param_columns,
    pareto_front,
    point_labels,
    sensitivity,
    varying,
    workload_columns,
)
from workbench.sweep.diagnosis import diagnose
from workbench.sweep.interference import confirm_table, side_by_side
from workbench.sweep.spec import SweepSpec, expand
from workbench.sweep.store import PointResult, latencies_frame, results_frame

CPU_NOTE = (
    "shares of each engine step: busy = computing + communication not hidden by compute; on a CPU engine: "
    + CPU_MAPPING
)

SUMMARY_COLUMNS = (
    "output_throughput",
    "request_throughput",
    "p50_ttft_ms",
    "p99_ttft_ms",
    "p99_tpot_ms",
    "p99_e2el_ms",
    "request_goodput",
    "guard_flagged",  # answers the output guard found broken, of a sample (workbench.serving.guard)
    "running_mean",
    "waiting_mean",
    "kv_usage_max",
    "preemptions",
    "prefix_hit_rate",
    "busy_share",
    "communication_share",
    "profile_verdicts",
)
# a spec's `profile: true` adds these per point (workbench.sweep.store.profile_columns)
PROFILE_COLUMNS = ("busy_share", "communication_share", "free_share", "profile_verdicts", "profile_error")


@dataclass(frozen=True)
class SweepReport:
    """Tables derived from one sweep's results (all pandas; nothing here talks to a server)."""

    spec: SweepSpec
    points: pd.DataFrame  # one row per stored point, with a `label` column
    configs: pd.DataFrame  # repeats averaged, with `label`
    best: pd.Series | None  # the best configuration under the SLO (None: no point meets it)
    sensitivity: pd.DataFrame
    diagnosis: pd.DataFrame
    latencies: pd.DataFrame  # long per-request table with `label`
    timings: pd.DataFrame
    side_by_side: pd.DataFrame = field(default_factory=pd.DataFrame)  # per point: group, host, points beside it
    confirm: pd.DataFrame = field(default_factory=pd.DataFrame)  # --confirm-best: side by side vs alone

    @property
    def limits(self) -> dict[str, float]:
        return self.spec.slo.limits()

    def points_table(self) -> pd.DataFrame:
        """The readable per-point table: label, status, key metrics, crash kind."""
        keep = [
            "label",
            "status",
            *[c for c in SUMMARY_COLUMNS if c in self.points.columns],
            "crash_kind",
            "group",
            "beside",
        ]
        return self.points[[c for c in keep if c in self.points.columns]]

    def side_by_side_table(self) -> pd.DataFrame:
        """Points that shared a host with points of other groups, with those points' labels (empty when none)."""
        if self.side_by_side.empty or not (self.side_by_side["overlap_s"] > 0).any():
            return pd.DataFrame()
        return self.side_by_side[self.side_by_side["overlap_s"] > 0]

    def interference_text(self) -> str:
        """One line: how many points ran side by side, whether the best ones were confirmed alone, and
        whether any server ran below normal CPU priority."""
        if self.side_by_side.empty:
            return "placement not recorded (a sweep stored before device groups)"
        return self._sharing_text() + self._priority_text()

    def _sharing_text(self) -> str:
        shared = int((self.side_by_side["overlap_s"] > 0).sum())
        if not shared:
            return f"every point ran alone on its host ({len(self.side_by_side)} points)"
        text = (
            f"{shared} of {len(self.side_by_side)} points ran side by side with points of other device groups "
            "on the same host (memory bandwidth and host CPU are shared)"
        )
        if self.confirm.empty:
            return text + "; re-measure the best alone with --confirm-best K"
        ratio = self.confirm["throughput_alone_over_side_by_side"].dropna()
        spread = f"{ratio.min():.2f}-{ratio.max():.2f}" if len(ratio) else "n/a"
        return text + f"; {len(self.confirm)} best points re-measured alone: throughput alone / side by side = {spread}"

    def _priority_text(self) -> str:
        """A warning clause when some servers ran below normal CPU priority (a niceness above 0)."""
        if "niceness" not in self.side_by_side:
            return ""
        lowered = self.side_by_side["niceness"].dropna()
        lowered = lowered[lowered > 0]
        if lowered.empty:
            return ""
        return (
            f"; {len(lowered)} points ran at CPU niceness {int(lowered.max())}: their servers yield the host CPU to "
            "every other process, unlike a deployed service (for Ray, start each node's raylet at niceness 0)"
        )

    def profile_table(self) -> pd.DataFrame:
        """Each profiled point's time shares and verdicts next to its throughput and latency (empty when
        the spec did not ask for profiles). On CPU the shares follow workbench.profiling.profile.CPU_MAPPING."""
        present = [c for c in PROFILE_COLUMNS if c in self.points.columns]
        if not present:
            return pd.DataFrame()
        keep = ["label", "output_throughput", "p99_ttft_ms", "p99_e2el_ms", *present]
        return self.points[[c for c in keep if c in self.points.columns]]

    def diagnosis_table(self) -> pd.DataFrame:
        """The diagnosis with each point's label in place of its id."""
        if self.diagnosis.empty:
            return self.diagnosis
        labels = dict(zip(self.points["point_id"], self.points["label"], strict=True))
        return self.diagnosis.assign(point_id=self.diagnosis["point_id"].map(labels)).rename(
            columns={"point_id": "point"}
        )

    def guard_text(self) -> str:
        """One line: the output guard over every point's sampled answers (does the engine talk nonsense?)."""
        if "guard_answers" not in self.points.columns:
            return "guard: no answers sampled (points stored before the output guard)"
        answers, flagged = self.points["guard_answers"].fillna(0), self.points["guard_flagged"].fillna(0)
        bad = self.points.loc[flagged > 0, "label"].tolist()
        where = f" at {', '.join(bad[:5])}" if bad else ""
        return f"guard: {int(flagged.sum())} of {int(answers.sum())} sampled answers look broken{where}"

    def best_text(self) -> str:
        if self.best is None:
            return f"no configuration meets the SLO {self.limits or '(none set)'}"
        metrics = ", ".join(
            f"{c}={self.best[c]:.1f}"
            for c in ("output_throughput", "p99_ttft_ms", "p99_e2el_ms")
            if c in self.best.index
        )
        return f"best under the SLO {self.limits}: {self.best['label']} ({metrics})"


def build_report(
    spec: SweepSpec, results: Sequence[PointResult], confirmations: Sequence[PointResult] = ()
) -> SweepReport:
    points = results_frame(results)
    points = points.assign(label=point_labels(points))
    beside = _with_labels(side_by_side(results), dict(zip(points["point_id"], points["label"], strict=True)))
    if not beside.empty:
        points = points.merge(beside[["point_id", "beside"]], on="point_id", how="left")
    configs = aggregate_repeats(points)
    configs = configs.assign(label=point_labels(configs)) if not configs.empty else configs.assign(label=None)
    labels = dict(zip(points["point_id"], points["label"], strict=True))
    latencies = latencies_frame(results)
    latencies = latencies.assign(label=latencies["point_id"].map(labels))
    has_metrics = not configs.empty and "output_throughput" in configs.columns
    return SweepReport(
        spec=spec,
        points=points,
        configs=configs,
        best=best_under_slo(configs, spec.slo.limits()) if has_metrics else None,
        sensitivity=sensitivity(configs) if has_metrics else pd.DataFrame(),
        diagnosis=diagnose(points, spec.slo.limits()) if len(points) else pd.DataFrame(),
        latencies=latencies,
        timings=overhead_table(points.assign(point_id=points["label"])),
        side_by_side=beside,
        confirm=_confirm_labelled(results, confirmations, labels),
    )


def _with_labels(beside: pd.DataFrame, labels: dict[str, str]) -> pd.DataFrame:
    """The side-by-side table with point labels in place of ids (`beside` becomes 'a; b')."""
    if beside.empty:
        return beside
    return beside.assign(
        label=beside["point_id"].map(labels),
        beside=beside["beside"].map(lambda ids: "; ".join(labels.get(i, i) for i in ids)),
    )


def _confirm_labelled(
    results: Sequence[PointResult], confirmations: Sequence[PointResult], labels: dict[str, str]
) -> pd.DataFrame:
    table = confirm_table(results, confirmations)
    if table.empty:
        return table
    return table.assign(point_id=table["point_id"].map(labels)).rename(columns={"point_id": "point"})


def figures(report: SweepReport) -> list[tuple[str, go.Figure]]:
    """The report's charts in reading order, each with a heading."""
    figs: list[tuple[str, go.Figure]] = []
    configs = report.configs
    if not configs.empty and "output_throughput" in configs.columns:
        figs.append(("Throughput vs p99 TTFT", charts.pareto_scatter(configs, "p99_ttft_ms", limits=report.limits)))
        figs.append(
            (
                "Throughput vs p99 end-to-end latency",
                charts.pareto_scatter(configs, "p99_e2el_ms", limits=report.limits),
            )
        )
        factors = varying(configs, [*param_columns(configs), *workload_columns(configs)])
        if len(factors) >= 2:
            figs.append((f"{factors[0]} x {factors[1]}", charts.param_heatmap(configs, factors[0], factors[1])))
        figs.append(("Sensitivity", charts.sensitivity_bars(report.sensitivity)))
    for metric in ("ttft_ms", "e2el_ms"):
        figs.append((f"Per-request {metric}", charts.latency_distribution(report.latencies, metric)))
    figs.append(("Time per point", charts.timing_bars(report.points)))
    return figs


def _table(frame: pd.DataFrame) -> str:
    if frame is None or frame.empty:
        return "<p><em>none</em></p>"
    return frame.to_html(index=False, float_format=lambda v: f"{v:.3g}", na_rep="", border=0, classes="t")


def write_html(report: SweepReport, path: Path) -> Path:
    """Write the report as one HTML file (plotly.js inlined once) and return its path."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>sweep {html.escape(report.spec.name)}</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:1200px} table.t{border-collapse:collapse;"
        "font-size:13px} table.t td,table.t th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}"
        "</style></head><body>",
        f"<h1>Sweep {html.escape(report.spec.name)}</h1><p>{html.escape(report.spec.description)}</p>",
        f"<p><b>{html.escape(report.best_text())}</b></p>",
        "<h2>Points</h2>",
        _table(report.points_table()),
        "<h2>Diagnosis</h2>",
        _table(report.diagnosis_table()),
        *(
            [
                "<h2>Where the time goes (a profile per point)</h2>",
                f"<p>{html.escape(CPU_NOTE)}</p>",
                _table(report.profile_table()),
            ]
            if not report.profile_table().empty
            else []
        ),
        "<h2>Sensitivity</h2>",
        _table(report.sensitivity),
        "<h2>Side by side</h2>",
        f"<p>{html.escape(report.interference_text())}</p>",
        *(
            [_table(report.side_by_side_table()[["label", "mode", "group", "host", "beside", "overlap_s"]])]
            if not report.side_by_side_table().empty
            else []
        ),
        *(
            ["<h2>Best points re-measured alone (--confirm-best)</h2>", _table(report.confirm)]
            if not report.confirm.empty
            else []
        ),
    ]
    for configs_x in ("p99_ttft_ms", "p99_e2el_ms"):
        if not report.configs.empty and configs_x in report.configs.columns:
            front = pareto_front(report.configs, configs_x)
            parts += [
                f"<h2>Pareto front: throughput vs {configs_x}</h2>",
                _table(front[front["pareto"]][["label", configs_x, "output_throughput"]]),
            ]
    parts += ["<h2>Time per point (s)</h2>", _table(report.timings)]
    include_js: bool | str = True
    for heading, fig in figures(report):
        parts += [f"<h2>{html.escape(heading)}</h2>", fig.to_html(full_html=False, include_plotlyjs=include_js)]
        include_js = False
    parts.append("</body></html>")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts))
    return path


def plan_frame(spec: SweepSpec) -> pd.DataFrame:
    """The points a spec expands into, one row each: id, server key, swept args, workload, repeat."""
    rows = [
        {
            "point_id": p.point_id,
            "server_key": p.server_key,
            **p.params_dict,
            "workload": p.workload.label,
            "repeat": p.repeat,
        }
        for p in expand(spec)
    ]
    return pd.DataFrame(rows)
