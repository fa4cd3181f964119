"""A profile per sweep point: the spec key, the stored columns, the report table, the diagnosis."""

from __future__ import annotations

import yaml

from workbench.profiling.profile import CPU_MAPPING, Profile, ProfileFormat, StepShare
from workbench.profiling.report import summary
from workbench.profiling.verdicts import judge
from workbench.sweep.diagnosis import Bottleneck, WorkloadContext, diagnose_point
from workbench.sweep.report import build_report, write_html
from workbench.sweep.spec import expand, load_sweep_spec
from workbench.sweep.store import PointResult, PointStatus, ResultStore

SPEC = {
    "name": "p",
    "base": "cpu-tiny",
    "grid": {"max_num_seqs": [2, 8]},
    "profile": True,
    "workload": {"input_len": 16, "output_len": 4, "num_prompts": 4, "concurrency": [4]},
}


def _profile_summary(busy: float, communication: float = 0.0) -> dict:
    steps = tuple(
        StepShare("0", i, 0.0, (busy - communication) * 1000, communication * 1000, 0.0, (1 - busy) * 1000)
        for i in range(4)
    )
    profile = Profile("c", ProfileFormat.TORCH_TRACE, "cpu", CPU_MAPPING, steps)
    return summary(profile, judge(profile))


def test_spec_profile_key_defaults_off(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({**SPEC, "profile": True}))
    assert load_sweep_spec(path).profile is True
    path.write_text(yaml.safe_dump({k: v for k, v in SPEC.items() if k != "profile"}))
    assert load_sweep_spec(path).profile is False


def test_report_shows_shares_and_verdicts_next_to_throughput(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    spec = load_sweep_spec(path)
    store = ResultStore(tmp_path / "results.jsonl")
    for point, (tput, busy) in zip(expand(spec), ((40.0, 0.3), (150.0, 0.8))):
        store.append(
            PointResult(
                point.point_id,
                "p",
                point.server_key,
                point.params_dict,
                {"input_len": 16, "output_len": 4, "num_prompts": 4, "concurrency": 4},
                0,
                PointStatus.OK,
                summary={"output_throughput": tput, "p99_ttft_ms": 100.0, "p99_e2el_ms": 500.0},
                server_metrics={"running_mean": 4.0},
                profile=_profile_summary(busy),
            )
        )
    report = build_report(spec, store.read())
    table = report.profile_table()
    assert list(table["busy_share"].round(2)) == [0.3, 0.8]
    assert list(table["profile_verdicts"]) == ["host_bound", "balanced"]
    assert "output_throughput" in table.columns
    diagnosis = report.diagnosis_table()
    host = diagnosis[diagnosis["bottleneck"] == "host_bound"]
    assert len(host) == 1 and "busy 30%" in host.iloc[0]["evidence"] and "throughput is low" in host.iloc[0]["evidence"]
    html = write_html(report, tmp_path / "report.html").read_text()
    assert "Where the time goes" in html and "worker&#x27;s compute" in html


def test_diagnosis_tells_a_host_bound_loop_from_a_small_batch():
    ctx = WorkloadContext(best_throughput=1000.0, largest_running=16.0, best_p99_ttft_ms=100.0, best_p99_e2el_ms=1000.0)
    base = {
        "point_id": "x",
        "status": "ok",
        "output_throughput": 500.0,
        "running_mean": 16.0,
        "waiting_mean": 0.0,
        "p99_ttft_ms": 100.0,
        "p99_e2el_ms": 1000.0,
    }
    # without a profile a full-batch low-throughput point has no explanation
    assert [f.bottleneck for f in diagnose_point(base, ctx, {})] == [Bottleneck.HEALTHY]
    profiled = {**base, "busy_share": 0.3, "communication_share": 0.0, "profile_verdicts": "host_bound"}
    assert [f.bottleneck for f in diagnose_point(profiled, ctx, {})] == [Bottleneck.HOST_BOUND]
    tp = {**base, "busy_share": 0.9, "communication_share": 0.3, "profile_verdicts": "communication_bound"}
    assert Bottleneck.COMMUNICATION_BOUND in [f.bottleneck for f in diagnose_point(tp, ctx, {})]


def test_a_failed_point_profile_is_a_column_not_a_crash():
    result = PointResult("i", "p", "k", {}, {}, 0, PointStatus.OK, profile={"error": "traces timed out"})
    assert result.row()["profile_error"] == "traces timed out"
    assert "busy_share" not in PointResult("i", "p", "k", {}, {}, 0, PointStatus.OK).row()
