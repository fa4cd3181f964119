"""The trace format: lines stamped kind 'trace', read back whole, damaged lines skipped, other files refused."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO_ROOT
from workbench.errors import WorkbenchError
from workbench.serving.load.trace import (
    Answer,
    Choice,
    Endpoint,
    TraceRecord,
    is_trace_file,
    read_trace,
    trace_prompts,
    trace_workload,
    write_trace,
)

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "replay"


def test_a_record_survives_the_round_trip_and_says_what_it_is(tmp_path):
    record = TraceRecord(
        "r1",
        1.5,
        Endpoint.CHAT,
        {"messages": [{"role": "user", "content": "hi"}], "temperature": 0},
        "s1",
        1,
        "r0",
        0.25,
        Answer(200, (Choice(0, "hello", "stop"),), {"completion_tokens": 2}, 0.1, 0.3),
    )
    path = write_trace(tmp_path / "trace.jsonl", [record])
    line = json.loads(path.read_text().splitlines()[0])
    assert (line["kind"], line["schema_version"]) == ("trace", 1)
    assert read_trace(tmp_path) == (record,)  # the directory `capture` writes works as well as the file
    assert record.greedy and record.after_parent and record.request_class == "followup" and record.prompt_text() == "hi"


def test_request_classes_and_greedy_come_from_the_request_itself():
    def make(body, endpoint=Endpoint.CHAT, turn=0):
        return TraceRecord("r", 0.0, endpoint, body, turn=turn)

    assert make({"tools": [{}]}).request_class == "tools"
    assert make({"response_format": {"type": "json_schema"}}).request_class == "json"
    assert make({"prompt": "x"}, Endpoint.COMPLETIONS).request_class == "completion"
    assert not make({}).greedy  # no temperature: the server's default samples for most models
    assert make({"top_k": 1}).greedy and not make({"temperature": 0.7}).greedy


def test_the_captured_fixture_reads_in_arrival_order_with_its_conversations():
    records = read_trace(FIXTURES / "smollm2_capture")
    assert len(records) == 14 and [r.arrival_s for r in records] == sorted(r.arrival_s for r in records)
    followups = [r for r in records if r.turn == 1]
    ids = {r.id: r for r in records}
    assert len(followups) == 4 and all(ids[r.parent].session == r.session and r.think_s >= 0 for r in followups)


def test_a_file_that_is_not_a_trace_is_refused_with_the_import_command(tmp_path):
    assert not is_trace_file(FIXTURES / "mooncake_conversation_head.jsonl")
    with pytest.raises(WorkbenchError, match="capture --import FORMAT FILE"):
        read_trace(FIXTURES / "mooncake_conversation_head.jsonl")
    with pytest.raises(WorkbenchError, match="no trace there"):
        read_trace(tmp_path / "missing.jsonl")


def test_a_newer_layout_is_refused_and_a_damaged_line_skipped(tmp_path):
    good = TraceRecord("r1", 0.0, Endpoint.COMPLETIONS, {"prompt": "x"}).to_line()
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps(good | {"schema_version": 9}) + "\n")
    with pytest.raises(WorkbenchError, match="newer than this workbench reads"):
        read_trace(newer)
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text(json.dumps(good) + "\n{not json\n" + json.dumps(good | {"id": "r2"}) + "\n")
    with pytest.warns(UserWarning, match="line 2 is damaged"):
        assert [r.id for r in read_trace(damaged)] == ["r1", "r2"]


def test_a_trace_is_a_load_workload_its_requests_at_their_own_times():
    records = read_trace(FIXTURES / "smollm2_capture")
    prompts = trace_prompts(records)
    workload = trace_workload(records, 2.0)
    assert workload.num_prompts == 14 and workload.trace_speed == 2.0 and workload.mode == "trace x2"
    assert [p.offset_s for p in prompts] == [r.arrival_s for r in records]
    assert {p.path for p in prompts} == {"/v1/chat/completions", "/v1/completions"} and all(p.body for p in prompts)
