"""A replay trace as the performance twin's load (`twin.perf.trace_load`, `PerfWorkload.of_trace`, the verb's
--prompts): the requests each window sends, their classes and lengths, and the refusals."""

from __future__ import annotations

import json

import pytest

from tests.unit.workbench.replay.conftest import FakeOpenAI, Served
from workbench import cli
from workbench.errors import WorkbenchError
from workbench.recipes import DeviceKind
from workbench.serving.load.trace import Answer, Endpoint, TraceRecord, write_trace
from workbench.serving.server import Server
from workbench.twin import api
from workbench.twin.perf.request import PerfWorkload
from workbench.twin.perf.windows import Target, prompts_for, run_load

from .test_use_case import verb_request

CHAT = [{"role": "user", "content": "What is the capital of France?"}]
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


def _usage(prompt: int, completion: int) -> Answer:
    return Answer(200, usage={"prompt_tokens": prompt, "completion_tokens": completion})


def records() -> list[TraceRecord]:
    """One request of every class, in arrival order: (id, class, recorded input, recorded output)."""
    follow = [*CHAT, {"role": "assistant", "content": "Paris."}, {"role": "user", "content": "And of Italy?"}]
    return [
        TraceRecord("r1", 0.0, Endpoint.CHAT, {"messages": CHAT, "max_tokens": 64}, "s1", 0, answer=_usage(12, 7)),
        TraceRecord("r2", 0.5, Endpoint.CHAT, {"messages": follow, "max_tokens": 64}, "s1", 1, "r1", 0.2),
        TraceRecord("r3", 1.0, Endpoint.CHAT, {"messages": CHAT, "tools": [TOOL]}, answer=_usage(40, 18)),
        TraceRecord(
            "r4",
            1.5,
            Endpoint.CHAT,
            {"messages": CHAT, "response_format": {"type": "json_object"}, "max_completion_tokens": 90},
            answer=_usage(15, 30),
        ),
        TraceRecord(
            "r5",
            2.0,
            Endpoint.COMPLETIONS,
            {"max_tokens": 5},
            source="mooncake",
            lengths={"input_tokens": 24, "output_tokens": 1},
        ),
    ]


@pytest.fixture
def trace(tmp_path):
    return write_trace(tmp_path / "trace.jsonl", records())


@pytest.fixture(scope="module")
def tokenizer():
    from workbench.embedded_models.catalog import prepare
    from workbench.serving.load.workload import load_tokenizer

    return load_tokenizer(prepare("tiny"))


def test_a_trace_load_sends_its_requests_in_the_traces_classes_at_the_recorded_output_lengths(trace):
    load = PerfWorkload.of_trace(trace, concurrency=2)
    assert load.num_prompts == 5 and load.concurrency == 2
    assert load.request_classes() == ("chat", "followup", "tools", "json", "completion")
    assert load.classes() == ("chat", "followup", "tools", "json", "completion")
    # usage, else max_tokens (r2 has no answer), else an import's lengths; a one-token answer decodes 2 (TPOT)
    assert load.output_lens() == (7, 64, 18, 30, 2)
    assert load.lengths() == (12, 0, 40, 15, 24)
    stored = load.to_dict()
    assert "input_lens" not in stored and stored["trace"]["requests"] == 5 and stored["trace"]["path"] == str(trace)
    assert stored["trace"]["classes"] == {"chat": 1, "followup": 1, "tools": 1, "json": 1, "completion": 1}


def test_num_prompts_takes_the_first_requests_of_the_trace(trace):
    load = PerfWorkload.of_trace(trace, num_prompts=3)
    assert [r.id for r in load.trace.records] == ["r1", "r2", "r3"]
    assert load.classes() == ("chat", "followup", "tools") and load.num_prompts == 3
    assert load.to_dict()["trace"]["digest"] != PerfWorkload.of_trace(trace).to_dict()["trace"]["digest"]
    assert PerfWorkload.of_trace(trace.parent).trace.path == trace  # a `capture --out` directory works too


def test_the_bodies_fix_each_output_length_and_a_prompt_is_rebuilt_where_the_trace_kept_lengths_only(trace, tokenizer):
    prompts = prompts_for(tokenizer, PerfWorkload.of_trace(trace, seed=3))
    assert [p.path for p in prompts] == ["/v1/chat/completions"] * 4 + ["/v1/completions"]
    assert [p.body["max_tokens"] for p in prompts] == [7, 64, 18, 30, 2]
    assert all(p.body["ignore_eos"] for p in prompts) and all(p.offset_s is None for p in prompts)
    assert prompts[3].body["max_completion_tokens"] == 30  # vLLM prefers it to max_tokens
    assert prompts[2].body["tools"] == [TOOL] and prompts[0].body["messages"] == CHAT  # the recorded request
    rebuilt = prompts[4]
    assert rebuilt.body["prompt"] == rebuilt.text and rebuilt.num_tokens == 24
    assert len(tokenizer(rebuilt.text)["input_ids"]) == 24


def test_each_window_request_is_timed_in_its_class_and_the_server_gets_the_fixed_lengths(trace, tokenizer):
    app = FakeOpenAI()
    load = PerfWorkload.of_trace(trace, concurrency=2, warmup_requests=7)
    with Served(app) as served:
        target = Target("A", Server(served.url, "fake-model"), None, DeviceKind.CPU, 1, tokenizer)
        prompts = prompts_for(tokenizer, load)
        timings = run_load(target, prompts, load, progress=False)
        sent = [json.loads(body) for _, path, _, _, body in app.seen if path.startswith("/v1/")]
        # a warm-up cycles the prompts: request i is prompt i % 5, in that prompt's class
        warm = run_load(target, [prompts[i % 5] for i in range(7)], load, progress=False)
    assert [t.klass for t in timings] == ["chat", "followup", "tools", "json", "completion"]
    assert all(t.success for t in timings)
    assert sorted(b["max_tokens"] for b in sent[:5]) == [2, 7, 18, 30, 64]
    assert all(b["ignore_eos"] and b["stream"] and b["model"] == "fake-model" for b in sent)
    assert [t.klass for t in warm] == ["chat", "followup", "tools", "json", "completion", "chat", "followup"]


@pytest.mark.parametrize("given", ["text", "humaneval", "prompts.jsonl", "missing.jsonl"])
def test_a_prompts_value_that_is_not_a_trace_is_refused_naming_the_flag(tmp_path, monkeypatch, given):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "hello"}\n')
    with pytest.raises(WorkbenchError, match=f"--prompts {given}: with --perf, --prompts takes a replay trace"):
        PerfWorkload.of_trace(given)


def test_a_trace_without_output_lengths_is_refused_naming_the_request(tmp_path):
    path = write_trace(tmp_path / "t.jsonl", [TraceRecord("r9", 0.0, Endpoint.CHAT, {"messages": CHAT})])
    with pytest.raises(WorkbenchError, match="request r9 records no output length"):
        PerfWorkload.of_trace(path)


def test_a_trace_load_made_by_hand_must_send_all_its_requests(trace):
    load = PerfWorkload.of_trace(trace)
    with pytest.raises(WorkbenchError, match="--num-prompts 16: a trace load sends its 5 requests"):
        PerfWorkload(trace=load.trace)


def test_the_verb_turns_prompts_into_a_trace_load(monkeypatch, trace):
    argv = ["twin", "--perf", "--recipe", "cpu-tiny", "--prompts", str(trace), "--num-prompts", "4"]
    request = verb_request(monkeypatch, "run_perf_twin", [*argv, "--concurrency", "3", "--warmup", "0"])
    assert isinstance(request, api.PerfTwinRequest)
    assert request.workload == PerfWorkload.of_trace(trace, num_prompts=4, concurrency=3, warmup_requests=0)
    assert request.workload.classes() == ("chat", "followup", "tools", "json")


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--prompts", "text"], "--prompts text: with --perf, --prompts takes a replay trace"),
        (["--prompts", "TRACE", "--input-len", "64"], "sets the lengths (each request's recorded ones)"),
        (["--prompts", "TRACE", "--output-len", "8"], "leave out --input-len and --output-len"),
    ],
)
def test_the_verb_refuses_prompts_it_cannot_use_as_the_load(trace, capsys, extra, words):
    argv = [
        "twin",
        "--perf",
        "--recipe",
        "cpu-tiny",
        "--no-progress",
        *(str(trace) if e == "TRACE" else e for e in extra),
    ]
    assert cli.main(argv) == 2
    assert words in capsys.readouterr().err


def test_the_result_names_the_trace_and_stores_it_and_an_older_document_still_reads(tmp_path, trace):
    from dataclasses import replace

    from .test_perf_result import result

    found = result(tmp_path / "run", planted=True)
    found = replace(found, request=replace(found.request, workload=PerfWorkload.of_trace(trace, concurrency=2)))
    assert f"load: 5 requests of trace {trace} (chat 1, followup 1, tools 1, json 1, completion 1)" in found.text()
    written = api.read_perf_twin(found.write().parent)
    assert written["schema_version"] == 2 and written["workload"]["trace"]["requests"] == 5
    old = tmp_path / "old"
    old.mkdir()
    (old / "perf-twin.json").write_text(json.dumps({"kind": "perf-twin", "schema_version": 1, "differs": False}))
    assert api.read_perf_twin(old)["differs"] is False
