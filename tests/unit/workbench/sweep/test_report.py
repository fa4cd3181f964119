"""Report tables, charts, widgets' pure parts and the CLI verb, from a hand-made results store."""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
import pytest
import yaml

from workbench.cli import main
from workbench.stack.fingerprint import cpu_model
from workbench.sweep import charts
from workbench.sweep.report import build_report, plan_frame, write_html
from workbench.sweep.spec import expand, load_sweep_spec
from workbench.sweep.store import PointResult, PointStatus, ResultStore
from workbench.sweep.widgets import ALL, explorer_figure, factors, select

SPEC = {
    "name": "r",
    "base": "cpu-tiny",
    "grid": {"max_num_seqs": [2, 8]},
    "workload": {"input_len": 16, "output_len": 4, "num_prompts": 4, "concurrency": [1, 4]},
    "slo": {"p99_ttft_ms": 300},
}
# (max_num_seqs, concurrency) -> (output_throughput, p99_ttft_ms, running_mean, waiting_mean)
MEASURED = {
    (2, 1): (40.0, 100.0, 1.0, 0.0),
    (2, 4): (60.0, 900.0, 2.0, 2.0),
    (8, 1): (41.0, 110.0, 1.0, 0.0),
    (8, 4): (150.0, 250.0, 4.0, 0.0),
}


@pytest.fixture
def stored(tmp_path: Path):
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    spec = load_sweep_spec(path)
    store = ResultStore(tmp_path / "out" / "results.jsonl")
    for p in expand(spec):
        seqs, conc = p.params_dict["max_num_seqs"], p.workload.concurrency
        tput, ttft, running, waiting = MEASURED[(seqs, conc)]
        store.append(
            PointResult(
                p.point_id,
                "r",
                p.server_key,
                p.params_dict,
                {
                    "input_len": 16,
                    "output_len": 4,
                    "num_prompts": 4,
                    "concurrency": conc,
                    "request_rate": None,
                    "prefix_ratio": 0.0,
                    "seed": 0,
                },
                0,
                PointStatus.OK,
                summary={
                    "output_throughput": tput,
                    "p99_ttft_ms": ttft,
                    "p50_ttft_ms": ttft / 2,
                    "p99_e2el_ms": ttft + 500,
                },
                server_metrics={
                    "running_mean": running,
                    "waiting_mean": waiting,
                    "preemptions": 0.0,
                    "kv_usage_max": 0.1,
                },
                timings={
                    "server_start_s": 30.0 if conc == 1 else 0.0,
                    "warmup_s": 1.0,
                    "load_s": 5.0,
                    "wall_s": 37.0 if conc == 1 else 7.0,
                    "overhead_s": 2.0,
                },
                latencies={"ttft_ms": [ttft / 2, ttft], "e2el_ms": [ttft + 400, ttft + 500]},
            )
        )
    return spec, store


def test_report_tables(stored):
    spec, store = stored
    report = build_report(spec, store.read())
    assert report.points["label"].tolist() == [
        "max_num_seqs=2 concurrency=1",
        "max_num_seqs=2 concurrency=4",
        "max_num_seqs=8 concurrency=1",
        "max_num_seqs=8 concurrency=4",
    ]
    assert report.best["label"] == "max_num_seqs=8 concurrency=4"
    assert "best under the SLO {'p99_ttft_ms': 300.0}: max_num_seqs=8 concurrency=4" in report.best_text()
    labels = dict(zip(report.points["point_id"], report.points["label"], strict=True))
    found = (
        report.diagnosis.assign(label=report.diagnosis["point_id"].map(labels))
        .groupby("label")["bottleneck"]
        .apply(list)
    )
    assert found.to_dict() == {
        "max_num_seqs=2 concurrency=1": ["healthy"],
        "max_num_seqs=2 concurrency=4": ["queueing"],  # p99 TTFT 900 > 300 ms SLO with 2 requests waiting
        "max_num_seqs=8 concurrency=1": ["healthy"],
        "max_num_seqs=8 concurrency=4": ["healthy"],
    }
    assert set(report.sensitivity["factor"]) == {"max_num_seqs", "concurrency"}
    assert report.latencies["label"].notna().all() and len(report.latencies) == 16
    assert report.timings["overhead_s"].tolist() == [2.0] * 4


def test_html_report_has_tables_and_each_chart(stored, tmp_path):
    spec, store = stored
    path = write_html(build_report(spec, store.read()), tmp_path / "report.html")
    text = path.read_text()
    for heading in (
        "Points",
        "Diagnosis",
        "Sensitivity",
        "Pareto front: throughput vs p99_ttft_ms",
        "Throughput vs p99 end-to-end latency",
        "max_num_seqs x concurrency",
        "Per-request ttft_ms",
        "Time per point",
    ):
        assert f"<h2>{heading}</h2>" in text, heading
    assert text.count("plotly.js v") == 1  # inlined once, offline-safe


def test_charts_are_figures_even_when_empty(stored):
    spec, store = stored
    report = build_report(spec, store.read())
    fig = charts.pareto_scatter(report.configs, limits=report.limits)
    names = [t.name for t in fig.data]
    assert names == ["meets SLO", "misses SLO", "Pareto front"]
    assert len(fig.data[0].x) == 3 and len(fig.data[1].x) == 1
    heat = charts.param_heatmap(report.configs, "max_num_seqs", "concurrency")
    assert heat.data[0].z.tolist() == [[40.0, 60.0], [41.0, 150.0]]
    empty = report.configs.iloc[0:0]
    for figure in (
        charts.pareto_scatter(empty),
        charts.timing_bars(empty),
        charts.sensitivity_bars(report.sensitivity.iloc[0:0]),
    ):
        assert isinstance(figure, go.Figure) and not figure.data


def test_widget_pure_parts(stored):
    spec, store = stored
    report = build_report(spec, store.read())
    assert factors(report) == ["max_num_seqs", "concurrency"]
    assert len(select(report.configs, {"max_num_seqs": "8", "concurrency": ALL})) == 2
    fig = explorer_figure(report, "p99_e2el_ms", "output_throughput", {"concurrency": 4})
    assert sorted(fig.data[-1].y) == [60.0, 150.0] or sorted(v for t in fig.data[:-1] for v in t.y) == [60.0, 150.0]


def test_plan_frame(stored):
    spec, _ = stored
    plan = plan_frame(spec)
    assert plan["workload"].tolist() == ["in=16 out=4 c=1", "in=16 out=4 c=4"] * 2
    assert plan["server_key"].nunique() == 2


def test_cli_report_only(stored, capsys):
    spec, store = stored
    rc = main(["sweep", "--spec", str(spec.source), "--out", str(store.path.parent), "--report-only"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "best under the SLO" in out and (store.path.parent / "report.html").exists()


def test_cli_bad_spec_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**SPEC, "grid": {"max_num_seq": [2]}}))
    assert main(["sweep", "--spec", str(bad), "--out", str(tmp_path)]) == 2
    assert "grid.max_num_seq: unknown key; did you mean 'max_num_seqs'?" in capsys.readouterr().err


def test_cpu_model_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: X\nmodel name\t: Example CPU 9000 @ 3GHz\n")
    assert cpu_model(info) == "Example CPU 9000 @ 3GHz"
