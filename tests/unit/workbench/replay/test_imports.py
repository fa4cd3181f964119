"""Traces users already have: Mooncake's FAST'25 trace, a WEKA conversation, vLLM request logs (real files)."""

from __future__ import annotations

import os

import pytest

from tests.conftest import REPO_ROOT
from workbench.errors import WorkbenchError
from workbench.replay.capture import ImportTraceRequest, TraceSource, run_import_trace
from workbench.replay.imports.lengths import Columns
from workbench.serving.load.trace import read_trace
from workbench.serving.load.workload import load_tokenizer

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "replay"


def test_mooncake_prompts_have_the_recorded_lengths_and_share_blocks_where_hash_ids_repeat(tiny_dir, tmp_path):
    result = run_import_trace(
        ImportTraceRequest(
            TraceSource.MOONCAKE,
            FIXTURES / "mooncake_conversation_head.jsonl",
            tmp_path / "mc",
            tokenizer=tiny_dir,
            length_scale=0.01,
            limit=12,
        )
    )
    records = read_trace(tmp_path / "mc")
    assert result.requests == 12 and result.classes == {"completion": 12}
    tokenizer = load_tokenizer(tiny_dir)
    for record in records:  # every prompt exactly as long as the trace says (scaled), as the server counts
        assert len(tokenizer.encode(record.body["prompt"])) == record.lengths["input_tokens"]
        assert record.body["max_tokens"] == record.lengths["output_tokens"] and record.body["ignore_eos"]
    # every request of this trace starts with hash id 0: one shared first block of round(512 * 0.01) = 5 tokens
    first_tokens = {tuple(tokenizer.encode(r.body["prompt"], add_special_tokens=False)[:5]) for r in records}
    assert len(first_tokens) == 1
    assert records[10].arrival_s == pytest.approx(3.0)  # timestamps in ms
    distinct = {tuple(tokenizer.encode(r.body["prompt"], add_special_tokens=False)[5:10]) for r in records}
    assert len(distinct) == 12  # the second blocks all differ (hash ids 1, 14, 28, ...)


def test_a_weka_conversation_is_a_session_sent_turn_after_turn(tiny_dir, tmp_path):
    run_import_trace(
        ImportTraceRequest(
            TraceSource.WEKA,
            FIXTURES / "weka_sample_trace.json",
            tmp_path / "w",
            tokenizer=tiny_dir,
            length_scale=0.005,
        )
    )
    records = read_trace(tmp_path / "w")
    assert [r.turn for r in records] == list(range(6)) and len({r.session for r in records}) == 1
    assert all(r.after_parent for r in records[1:]) and records[3].think_s == 284.0
    assert os.path.commonprefix([records[0].body["prompt"], records[1].body["prompt"]]) == records[0].body["prompt"]


def test_guidellm_columns_are_named_as_the_file_names_them(tiny_dir, tmp_path):
    source = tmp_path / "guidellm.jsonl"
    source.write_text('{"ts": 0.5, "in": 12, "out": 3}\n{"ts": 1.5, "in": 20, "out": 4}\n')
    run_import_trace(
        ImportTraceRequest(
            TraceSource.GUIDELLM,
            source,
            tmp_path / "g",
            tokenizer=tiny_dir,
            columns=Columns(timestamp="ts", input_length="in", output_length="out"),
        )
    )
    assert [(r.arrival_s, r.lengths["input_tokens"]) for r in read_trace(tmp_path / "g")] == [(0.0, 12), (1.0, 20)]
    with pytest.raises(WorkbenchError, match="no 'timestamp'"):
        run_import_trace(ImportTraceRequest(TraceSource.GUIDELLM, source, tmp_path / "g2", tokenizer=tiny_dir))


def test_vllm_request_logs_of_both_shapes_import_and_prompt_less_logs_are_refused(tmp_path):
    new = run_import_trace(
        ImportTraceRequest(TraceSource.VLLM_LOG, FIXTURES / "vllm032_debug_requests.log", tmp_path / "new")
    )
    records = read_trace(tmp_path / "new")
    assert (
        new.classes == {"chat": 2, "completion": 1}
        and records[0].body["messages"][0]["content"] == "What is the capital of France?"
    )
    assert records[0].answer.choices[0].text == "The capital of France is Paris." and records[1].body["seed"] == 1
    assert [r.arrival_s for r in records] == [0.0, 9.0, 34.0]
    run_import_trace(ImportTraceRequest(TraceSource.VLLM_LOG, FIXTURES / "vllm_old_requests.log", tmp_path / "old"))
    old = read_trace(tmp_path / "old")[0]
    assert old.body["prompt"].startswith("<|im_start|>system\nYou are a helpful assistant.")
    assert (old.body["temperature"], old.body["top_p"], old.body["top_k"], old.body["max_tokens"]) == (
        0.7,
        0.001,
        1,
        32742,
    )
    with pytest.raises(WorkbenchError, match="VLLM_LOGGING_LEVEL=DEBUG"):
        run_import_trace(
            ImportTraceRequest(TraceSource.VLLM_LOG, FIXTURES / "vllm032_info_requests.log", tmp_path / "info")
        )


def test_bad_inputs_say_what_to_do(tiny_dir, tmp_path):
    with pytest.raises(WorkbenchError, match="no such file"):
        ImportTraceRequest(TraceSource.MOONCAKE, tmp_path / "nope.jsonl", tmp_path / "o")
    with pytest.raises(WorkbenchError, match="--tokenizer"):
        run_import_trace(
            ImportTraceRequest(TraceSource.MOONCAKE, FIXTURES / "mooncake_conversation_head.jsonl", tmp_path / "o")
        )
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 4}\nnot json\n')
    with pytest.raises(WorkbenchError, match="line 2: not JSON"):
        run_import_trace(ImportTraceRequest(TraceSource.MOONCAKE, bad, tmp_path / "o2", tokenizer=tiny_dir))


def test_an_aisbench_row_may_carry_its_prompt_itself(tmp_path):
    source = tmp_path / "ais.jsonl"
    source.write_text(
        '{"timestamp": 0, "input_text": "Tell me about Paris.", "output_length": 8}\n'
        '{"timestamp": 1500, "input_text": "And Rome?"}\n'
    )
    run_import_trace(ImportTraceRequest(TraceSource.MOONCAKE, source, tmp_path / "a"))  # no tokenizer needed
    records = read_trace(tmp_path / "a")
    assert [(r.arrival_s, r.body["prompt"], r.body["max_tokens"]) for r in records] == [
        (0.0, "Tell me about Paris.", 8),
        (1.5, "And Rome?", 1),  # AISBench's default output length
    ]
