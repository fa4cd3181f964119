"""The parts of a capture that need no vLLM server: the profiler config, trace completeness, errors."""

from __future__ import annotations

import gzip
import http.server
import json
import threading

import pytest

from workbench.errors import WorkbenchError
from workbench.profiling import capture
from workbench.recipes import DeviceKind, load_serving_recipe


def test_profiler_config_is_accepted_by_vllms_own_config(tmp_path):
    from vllm.config import ProfilerConfig

    config = ProfilerConfig(**capture.profiler_config(tmp_path / "traces"))
    assert config.profiler == "torch" and config.torch_profiler_dir == str((tmp_path / "traces").resolve())
    assert config.torch_profiler_with_stack is False and config.ignore_frontend is True
    flag, value = capture.profiler_args(tmp_path)
    assert flag == "--profiler-config" and json.loads(value)["torch_profiler_dir"].startswith("/")


def test_expected_ranks_is_the_parallel_product():
    recipe = load_serving_recipe("cpu-tiny")
    assert capture.expected_ranks(recipe) == 1
    assert capture.expected_ranks(recipe.with_overrides(engine={"tensor_parallel_size": 2})) == 2


def test_gzip_complete_tells_a_finished_file_from_one_being_written(tmp_path):
    whole = tmp_path / "a.pt.trace.json.gz"
    whole.write_bytes(gzip.compress(b'{"traceEvents": []}' * 1000))
    assert capture.gzip_complete(whole)
    cut = tmp_path / "b.pt.trace.json.gz"
    cut.write_bytes(whole.read_bytes()[:-12])
    assert not capture.gzip_complete(cut)
    plain = tmp_path / "c.pt.trace.json"
    plain.write_text("{}")
    assert capture.gzip_complete(plain)


def test_window_outputs_keep_only_the_windows_prefix(tmp_path):
    for name in (
        "p1_dp0_pp0_tp0_dcp0_ep0_rank0.1.pt.trace.json.gz",
        "p2_dp0_pp0_tp0_dcp0_ep0_rank0.2.pt.trace.json.gz",
        "h_9.async_llm.3.pt.trace.json.gz",
    ):
        (tmp_path / name).write_bytes(b"")
    found = capture.window_outputs(tmp_path, "p1", DeviceKind.CPU)
    assert [p.name for p in found] == ["p1_dp0_pp0_tp0_dcp0_ep0_rank0.1.pt.trace.json.gz"]


def test_waiting_for_a_rank_that_never_writes_names_what_is_missing(tmp_path):
    (tmp_path / "w_dp0_pp0_tp0_dcp0_ep0_rank0.1.pt.trace.json.gz").write_bytes(gzip.compress(b"{}"))
    with pytest.raises(WorkbenchError, match=r"1 of 2 rank traces after 1 s \(w_dp0"):
        capture.wait_for_traces(tmp_path, 2, "w", timeout_s=1.0)


def test_a_settled_complete_trace_is_returned(tmp_path, monkeypatch):
    monkeypatch.setattr(capture, "SETTLE_S", 0.2)
    (tmp_path / "w_dp0_pp0_tp0_dcp0_ep0_rank0.1.pt.trace.json.gz").write_bytes(gzip.compress(b"{}"))
    assert len(capture.wait_for_traces(tmp_path, 1, "w", timeout_s=10.0)) == 1


class _NotFound(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's naming)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_server_without_the_profiler_gets_the_flag_named():
    server = http.server.HTTPServer(("127.0.0.1", 0), _NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(WorkbenchError, match="started without --profiler-config"):
            capture.post(f"http://127.0.0.1:{server.server_port}", "/start_profile", {"profile_prefix": "x"})
    finally:
        server.shutdown()
