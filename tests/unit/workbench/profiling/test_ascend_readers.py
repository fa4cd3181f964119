"""Every Ascend reader on its fixtures: real profiler CSVs and documented layouts (see SOURCES.md).

Expected numbers are read from the same files with the csv / json modules, independently of the
readers' pandas code, or computed by hand for the constructed msprof layout.
"""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from workbench.errors import WorkbenchError
from workbench.profiling import ascend_steps, msprof, torch_npu
from workbench.profiling.read import read_profile

SAMPLES = "samples"


def _cluster_rows(path):
    with path.open() as handle:
        return {r["Index"]: r for r in csv.DictReader(handle) if r["Type"] == "rank"}


def test_cluster_table_gives_every_rank_and_drops_the_stage_row(fixtures):
    path = fixtures / SAMPLES / "cluster_step_trace_time.csv"
    profile = read_profile(path)
    expected = _cluster_rows(path)
    ranks = profile.ranks_frame().set_index("rank")
    assert sorted(ranks.index) == sorted(expected)  # 8 ranks, the '(0, ..., 7)' stage row is not one
    for rank, row in expected.items():
        assert ranks.loc[rank, "computing_us"] == pytest.approx(float(row["Computing"]))
        assert ranks.loc[rank, "communication_not_overlapped_us"] == pytest.approx(
            float(row["Communication(Not Overlapped)"])
        )
        assert ranks.loc[rank, "overlapped_us"] == pytest.approx(float(row["Overlapped"]))
        assert ranks.loc[rank, "free_us"] == pytest.approx(float(row["Free"]))
    assert profile.whole_window  # no Step values: each row is a whole collection


def test_torch_npu_tp2_reads_both_ranks_and_their_files(fixtures):
    profile = read_profile(fixtures / "torch_npu_tp2")
    assert profile.format.value == "torch_npu" and profile.device == "npu"
    assert profile.ranks == ["0", "1"]  # from profiler_info_<rank>.json
    expected = _cluster_rows(fixtures / SAMPLES / "cluster_step_trace_time.csv")
    ranks = profile.ranks_frame().set_index("rank")
    for rank in ("0", "1"):
        assert ranks.loc[rank, "free_us"] == pytest.approx(float(expected[rank]["Free"]))
    ops = {(o.rank, o.name): o for o in profile.ops}
    # rank 0 has kernel_details.csv: op types with their Accelerator Core; HCCL rows are communication
    with (fixtures / SAMPLES / "kernel_details_with_aic_metrics_trimmed.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    broadcast = sum(float(r["Duration(us)"]) for r in rows if r["Type"] == "hcom_broadcast_")
    assert ops[("0", "hcom_broadcast_")].self_us == pytest.approx(broadcast)
    assert ops[("0", "hcom_broadcast_")].kind == "HCCL" and ops[("0", "hcom_broadcast_")].communication
    assert ops[("0", "Cast")].calls == sum(
        r["Type"] == "Cast" and r["Accelerator Core"] == "AI_VECTOR_CORE" for r in rows
    )
    # rank 1 has op_statistic.csv only, so its communication comes from communication.json
    assert ops[("1", "MatMulV2")].calls == 332 and ops[("1", "MatMulV2")].kind == "AI_CORE"
    comm = json.loads(
        (
            next((fixtures / "torch_npu_tp2").glob("*1002*")) / "ASCEND_PROFILER_OUTPUT" / "communication.json"
        ).read_text()
    )
    elapse = {
        op.split("@")[0]: info["Communication Time Info"]["Elapse Time(ms)"]
        for op, info in comm["step"]["collective"].items()
    }
    for name, ms in elapse.items():
        assert ops[("1", name)].self_us == pytest.approx(ms * 1000.0) and ops[("1", name)].kind == "HCCL"


def test_trace_view_overlap_track_sums_per_step(fixtures):
    path = next((fixtures / "torch_npu_trace_view").rglob("trace_view.json"))
    events = json.loads(path.read_text())
    overlap = {e["pid"] for e in events if e.get("name") == "process_name" and e["args"]["name"] == "Overlap Analysis"}
    sums = {}
    for e in events:
        if e.get("ph") == "X" and e["pid"] in overlap:
            sums[e["name"]] = sums.get(e["name"], 0.0) + float(e["dur"])
    profile = read_profile(fixtures / "torch_npu_trace_view")
    (step,) = profile.steps
    assert step.step == 1  # ProfilerStep#1
    assert step.computing_us == pytest.approx(sums["Computing"])
    assert step.free_us == pytest.approx(sums["Free"])
    assert step.communication_us == 0.0  # one card: no Communication track
    assert any("Overlap Analysis" in n for n in profile.notes)


def test_kernel_details_alone_gives_shares_from_task_intervals(fixtures, tmp_path):
    out = tmp_path / "x_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    shutil.copy(fixtures / SAMPLES / "kernel_details_with_aic_metrics_trimmed.csv", out / "kernel_details.csv")
    profile = read_profile(tmp_path)
    (step,) = profile.steps  # every row is Step Id 1
    with (out / "kernel_details.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    start = min(float(r["Start Time(us)"]) for r in rows)
    end = max(float(r["Start Time(us)"]) + float(r["Duration(us)"]) for r in rows)
    assert step.total_us == pytest.approx(end - start)

    def spans(core_is_hccl):
        return [
            (float(r["Start Time(us)"]), float(r["Start Time(us)"]) + float(r["Duration(us)"]))
            for r in rows
            if (r["Accelerator Core"] == "HCCL") == core_is_hccl
        ]

    def union(pairs):  # plain Python, independent of the numpy code under test
        merged = []
        for a, b in sorted(pairs):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        return merged

    compute, comm = union(spans(False)), union(spans(True))
    overlap = sum(max(0.0, min(b, d) - max(a, c)) for a, b in compute for c, d in comm)
    assert step.computing_us == pytest.approx(sum(b - a for a, b in compute))
    assert step.communication_us == pytest.approx(sum(b - a for a, b in comm))
    assert step.overlapped_us == pytest.approx(overlap)


def test_kernel_details_quirks_tab_suffix_and_missing_columns(fixtures):
    tasks = torch_npu._kernel_tasks(fixtures / SAMPLES / "kernel_details_pipe_utilization.csv")
    assert tasks["start"].min() == pytest.approx(1736413971411629.128)  # "…128\t" parsed
    assert set(tasks["kind"]) == {"AI_CORE", "MIX_AIC", "AI_VECTOR_CORE"}
    minimal = torch_npu._kernel_tasks(fixtures / SAMPLES / "kernel_details_minimal_columns.csv")
    assert set(minimal["kind"]) == {"UNKNOWN"}  # Accelerator Core is N/A there
    assert "Cast16" in set(minimal["op"])  # Type N/A: the task name stands in


def test_op_statistic_with_and_without_device_id(fixtures):
    with_device = ascend_steps.ops_from_statistic(fixtures / SAMPLES / "op_statistic_real_rows_mindspore_910.csv", "9")
    assert [(o.rank, o.name, o.kind, o.calls) for o in with_device][:1] == [("0", "Cast", "AI_VECTOR_CORE", 240)]
    without = ascend_steps.ops_from_statistic(fixtures / SAMPLES / "op_statistic_no_device_id_triton_npu.csv", "9")
    assert [(o.rank, o.name, o.self_us) for o in without] == [("9", "gelu_and_mul_triton_kernel", 122.861)]


def test_msprof_export_split_per_iteration(fixtures):
    """Hand-computed from the fixture's tasks (SOURCES.md lists them): device 0, iteration 1 has compute
    [1000, 1400), HCCL [1350, 1600): computing 400, overlapped 50, not overlapped 200, free 400 of 1000."""
    profile = read_profile(fixtures / "msprof_tp2")
    assert profile.format.value == "msprof"
    steps = {(s.rank, s.step): s for s in profile.steps}
    first = steps[("0", 1)]
    assert (first.computing_us, first.overlapped_us, first.communication_not_overlapped_us, first.free_us) == (
        pytest.approx(400.0),
        pytest.approx(50.0),
        pytest.approx(200.0),
        pytest.approx(400.0),
    )
    second = steps[("0", 2)]
    assert (second.computing_us, second.communication_not_overlapped_us, second.free_us) == (
        pytest.approx(500.0),
        pytest.approx(100.0),
        pytest.approx(400.0),
    )
    assert steps[("1", 1)].computing_us == pytest.approx(550.0)
    ops = {(o.rank, o.name): o for o in profile.ops}
    assert ops[("0", "hcom_allReduce_")].kind == "HCCL" and ops[("0", "hcom_allReduce_")].calls == 2


def test_msprof_statistics_only_export(fixtures, tmp_path):
    out = tmp_path / "PROF_1" / msprof.OUTPUT_DIR
    out.mkdir(parents=True)
    shutil.copy(fixtures / SAMPLES / "msprof_op_statistic_ut_expected.csv", out / "op_statistic_1.csv")
    shutil.copy(
        next((fixtures / "msprof_tp2").rglob("communication_statistic_*.csv")), out / "communication_statistic_1.csv"
    )
    profile = read_profile(tmp_path)
    assert not profile.steps and any("no time shares" in n for n in profile.notes)
    kinds = {o.name: o.kind for o in profile.ops}
    assert kinds == {
        "RmsNormTactic": "AI_CORE",
        "ArgMaxV2": "AI_VECTOR_CORE",
        "hcom_send_": "HCCL",
        "hcom_allGather_": "HCCL",
    }


def test_msprof_ut_layouts_parse(fixtures, tmp_path):
    """msprof's own unit-test expectations: tab-suffixed times, header-only variants, the step_trace header."""
    out = tmp_path / "PROF_2" / msprof.OUTPUT_DIR
    out.mkdir(parents=True)
    shutil.copy(fixtures / SAMPLES / "msprof_op_summary_ut_expected_pipeutil.csv", out / "op_summary_1.csv")
    shutil.copy(fixtures / SAMPLES / "msprof_step_trace_ut_expected.csv", out / "step_trace_1.csv")
    profile = read_profile(tmp_path)
    assert {o.name for o in profile.ops} == {"MatMulV3", "MatMulV3_1", "MatMulV3_2"}  # OP Type empty: the name
    windows = msprof._windows(out)
    assert windows.iloc[0]["end"] - windows.iloc[0]["start"] == pytest.approx(9598.772)
    assert any("outside every step_trace iteration" in n for n in profile.notes)  # synthetic clocks differ


def test_step_trace_time_header_only_is_an_empty_table(fixtures, tmp_path):
    out = tmp_path / "y_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    shutil.copy(fixtures / SAMPLES / "step_trace_time_header_from_torch_npu_source.csv", out / "step_trace_time.csv")
    profile = read_profile(tmp_path)
    assert profile.steps == ()


def test_a_csv_without_the_needed_columns_names_them(tmp_path):
    out = tmp_path / "z_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "kernel_details.csv").write_text("Name,Foo\nx,1\n")
    with pytest.raises(WorkbenchError, match=r"kernel_details.csv: no column 'Start Time\(us\)'"):
        read_profile(tmp_path)


def test_vllm_host_scopes_in_trace_view_become_host_phases(fixtures, tmp_path):
    """A vllm-ascend capture with VLLM_CUSTOM_SCOPES_FOR_PROFILING=1: its scopes are CPU events of trace_view."""
    out = tmp_path / "h_1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    source = next((fixtures / "torch_npu_tp2").rglob("step_trace_time.csv"))
    shutil.copy(source, out / "step_trace_time.csv")
    events = [
        {"ph": "X", "cat": "cpu_op", "name": name, "pid": 5, "tid": 5, "ts": str(1.7e15 + start), "dur": dur}
        for name, start, dur in (
            ("execute_context_0(0)_generation_2(2)", 0, 900.0),
            ("gpu_model_runner: sample", 700, 150.0),
            ("execute_context_0(0)_generation_2(2)", 1000, 900.0),
            ("gpu_model_runner: sample", 1700, 120.0),
        )
    ]
    (out / "trace_view.json").write_text(json.dumps(events))
    host = {h.phase: h for h in read_profile(tmp_path).host}
    assert host["gpu_model_runner: sample"].total_us == pytest.approx(270.0)
    assert host["gpu_model_runner: sample"].calls == 2
    assert any(p.startswith("between steps") and h.total_us == pytest.approx(100.0) for p, h in host.items())
