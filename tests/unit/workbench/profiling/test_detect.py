"""Format detection, and one message naming what is missing for empty, truncated and unknown directories."""

from __future__ import annotations

import gzip
import shutil

import pytest

from workbench.errors import WorkbenchError
from workbench.profiling.detect import Found, detect
from workbench.profiling.read import read_profile


def test_each_fixture_is_detected_as_its_format(fixtures):
    assert detect(fixtures / "torch_npu_tp2").kind is Found.TORCH_NPU
    assert detect(fixtures / "msprof_tp2").kind is Found.MSPROF
    assert detect(fixtures / "samples" / "cluster_step_trace_time.csv").kind is Found.CLUSTER
    trace_view = next((fixtures / "torch_npu_trace_view").rglob("trace_view.json"))
    assert detect(trace_view).kind is Found.TORCH_NPU  # the file inside ASCEND_PROFILER_OUTPUT: its directory


def test_missing_path(tmp_path):
    with pytest.raises(WorkbenchError, match="no such file or directory"):
        detect(tmp_path / "nope")


def test_empty_directory(tmp_path):
    with pytest.raises(WorkbenchError, match="the directory is empty"):
        detect(tmp_path)


def test_unknown_kind_names_the_expected_layouts(tmp_path):
    (tmp_path / "notes.txt").write_text("not a profile")
    with pytest.raises(WorkbenchError) as err:
        detect(tmp_path)
    message = str(err.value)
    for expected in (
        "ASCEND_PROFILER_OUTPUT",
        "mindstudio_profiler_output",
        "cluster_step_trace_time.csv",
        "*.pt.trace.json",
    ):
        assert expected in message


def test_an_ascend_pt_directory_that_was_never_analysed(tmp_path):
    (tmp_path / "host_1_20240101_ascend_pt" / "PROF_000001_x").mkdir(parents=True)
    with pytest.raises(WorkbenchError, match=r"no ASCEND_PROFILER_OUTPUT inside; analyse it first"):
        detect(tmp_path)


def test_an_output_directory_without_any_known_file(tmp_path):
    (tmp_path / "h_1_ascend_pt" / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    with pytest.raises(WorkbenchError, match="none of step_trace_time.csv, trace_view.json"):
        read_profile(tmp_path)


def test_a_truncated_csv(tmp_path):
    out = tmp_path / "h_1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "step_trace_time.csv").write_text("")
    with pytest.raises(WorkbenchError, match="empty file, no header row"):
        read_profile(tmp_path)


def test_only_the_api_server_trace(tmp_path):
    (tmp_path / "host_7.async_llm.1733000000000.pt.trace.json.gz").write_bytes(gzip.compress(b'{"traceEvents": []}'))
    with pytest.raises(WorkbenchError, match="only the API server's own trace"):
        detect(tmp_path)


def test_a_truncated_trace_view(fixtures, tmp_path):
    source = next((fixtures / "torch_npu_trace_view").rglob("trace_view.json"))
    out = tmp_path / "h_1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    data = source.read_bytes()
    (out / "trace_view.json").write_bytes(data[: len(data) // 2])
    with pytest.raises(WorkbenchError, match="truncated or not JSON"):
        read_profile(tmp_path)


def test_device_outputs_win_over_the_frontend_trace(fixtures, tmp_path):
    shutil.copytree(fixtures / "torch_npu_tp2", tmp_path / "run")
    (tmp_path / "run" / "node0_9.async_llm.1.pt.trace.json.gz").write_bytes(gzip.compress(b'{"traceEvents": []}'))
    assert detect(tmp_path / "run").kind is Found.TORCH_NPU
