"""The scripted clients, the capture verb, and bench / sweep with a trace as their workload."""

from __future__ import annotations

import math

import pytest

from tests.conftest import REPO_ROOT
from workbench import cli
from workbench.errors import WorkbenchError
from workbench.replay.api import CaptureRequest, TrafficSpec, play_traffic, read_capture, read_trace
from workbench.replay.capture import capture_proxy
from workbench.replay.recorder import CaptureSettings
from workbench.replay.traffic import _schedule, single_request, traffic_items
from workbench.serving.load.runner import run_coroutine, run_load_async
from workbench.serving.load.trace import trace_prompts, trace_workload
from workbench.sweep.spec import parse_sweep_spec, workload_points

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "replay"


def test_the_acceptance_traffic_holds_over_two_hundred_requests_of_every_kind():
    spec = TrafficSpec("m", conversations=40, turns=3, single_repeats=2)
    work = _schedule(spec, traffic_items())
    conversations = sum(k == "chat" for k, _ in work)
    requests = 3 * conversations + sum(k == "single" for k, _ in work)
    assert requests >= 200 and {i["kind"] for k, i in work if k == "single"} == {"tools", "json", "completion"}
    path, body = single_request(spec, next(i for k, i in work if k == "single" and i["kind"] == "tools"), stream=False)
    assert (
        path == "/v1/chat/completions"
        and body["tool_choice"] == "auto"
        and "<tool_call>" in body["messages"][2]["content"]
    )


def test_played_conversations_are_recorded_as_sessions(upstream, tmp_path):
    _, url = upstream
    spec = TrafficSpec("m", conversations=2, turns=3, single_repeats=0, rate=50.0, think_s=0.01, sampled_every=0)
    with capture_proxy(CaptureRequest(url, tmp_path / "t", port=0, settings=CaptureSettings(top_logprobs=0))) as proxy:
        assert play_traffic(proxy.url, spec) == 6
    records = read_trace(tmp_path / "t")
    sessions = {}
    for record in records:
        sessions.setdefault(record.session, []).append(record.turn)
    assert sorted(map(sorted, sessions.values())) == [[0, 1, 2], [0, 1, 2]]
    assert all(r.after_parent for r in records if r.turn) and read_capture(tmp_path / "t")["sessions"] == 2


def test_the_capture_verb_checks_its_arguments(tmp_path, capsys):
    assert cli.main(["capture", "--upstream", "127.0.0.1:8000", "--out", str(tmp_path / "o")]) == 2
    assert "--upstream" in capsys.readouterr().err
    assert cli.main(["capture", "--import", "mooncake", "--out", str(tmp_path / "o")]) == 2
    assert "takes the file to import" in capsys.readouterr().err
    assert (
        cli.main(
            ["capture", "--import", "vllm-log", str(FIXTURES / "vllm_old_requests.log"), "--out", str(tmp_path / "o")]
        )
        == 0
    )
    assert "1 requests" in capsys.readouterr().out


def test_a_trace_load_sends_each_request_as_recorded_at_its_time(upstream):
    fake, url = upstream
    records = read_trace(FIXTURES / "smollm2_capture")[:4]
    result = run_coroutine(
        run_load_async(
            url, "fake-model", trace_prompts(records), trace_workload(records, 50.0), progress=False, hang=None
        )
    )
    assert result.summary.completed == 4 and result.workload.mode == "trace x50"
    paths = [path for method, path, *_ in fake.seen if method == "POST"]
    assert sorted(paths) == sorted(r.endpoint.path for r in records)
    assert result.guard is not None and result.guard.answers == 4 and result.guard.flagged == 0


def test_a_sweep_takes_a_trace_as_its_workload_one_point_per_speed(tmp_path):
    trace = str(FIXTURES / "smollm2_capture" / "trace.jsonl")
    spec = parse_sweep_spec(
        {"name": "t", "base": "cpu-tiny", "workload": {"trace": trace, "num_prompts": 10, "speed": [4, 1]}},
        tmp_path / "s.yaml",
    )
    points = workload_points(spec.workload)
    assert [p.speed for p in points] == [1.0, 4.0] and points[0].num_prompts == 10
    assert points[0].label == "trace x1 (10 requests)" and points[1].to_loadgen().trace_speed == 4.0
    assert math.isinf(points[0].to_loadgen().request_rate)
    fixed = parse_sweep_spec(
        {
            "name": "f",
            "base": "cpu-tiny",
            "workload": {"input_len": 8, "output_len": 4, "num_prompts": 2, "concurrency": 1},
        },
        tmp_path / "f.yaml",
    )
    assert "trace" not in workload_points(fixed.workload)[0].identity()  # ids of fixed-length points unchanged
    with pytest.raises(WorkbenchError, match="a trace sets lengths"):
        parse_sweep_spec(
            {"name": "b", "base": "cpu-tiny", "workload": {"trace": trace, "num_prompts": 2, "concurrency": 4}},
            tmp_path / "b.yaml",
        )
