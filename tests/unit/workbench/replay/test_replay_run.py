"""A whole replay against the small upstream: timing, conversations in order, resume, judgement, hand-off."""

from __future__ import annotations

import json

import pytest

from workbench import cli
from workbench.errors import WorkbenchError
from workbench.evaluate.datasets import load_dataset
from workbench.replay.api import Parity, ReplayRequest, read_replay, run_replay, to_twin
from workbench.replay.store import REQUESTS_FILE
from workbench.serving.load.trace import Answer, Choice, Endpoint, TraceRecord, read_trace, write_trace

TEXT = "The capital of France is Paris."


def chat(id_, at, text="Capital of France?", answer=TEXT, parent=None, think=None, extra=None):
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "temperature": 0} | (extra or {})
    return TraceRecord(
        id_,
        at,
        Endpoint.CHAT,
        body,
        "s" + id_ if parent is None else "s" + parent,
        0 if parent is None else 1,
        parent,
        think,
        Answer(200, (Choice(0, answer, "stop"),)),
    )


@pytest.fixture
def trace(tmp_path):
    records = [
        chat("r1", 0.0),
        chat("r2", 0.3, answer="Rome."),
        chat("r3", 0.35, parent="r1", think=0.2),
        TraceRecord(
            "r4",
            0.4,
            Endpoint.COMPLETIONS,
            {"model": "m", "prompt": "x", "temperature": 0, "stream": True},
            answer=Answer(200, (Choice(0, TEXT, "stop"),)),
        ),
    ]
    return write_trace(tmp_path / "trace" / "trace.jsonl", records).parent


def test_a_replay_keeps_the_timing_and_sends_a_turn_after_its_parents_answer(upstream, trace, tmp_path):
    fake, url = upstream
    result = run_replay(ReplayRequest(trace, url=url, out=tmp_path / "r", speed=2.0, progress=False))
    posts = [(t, json.loads(body)) for (method, path, *_, body), t in zip(fake.seen, fake.times) if method == "POST"]
    assert len(posts) == 4 and {p["model"] for _, p in posts} == {"fake-model"}  # the target's model name
    stream = next(p for _, p in posts if p.get("stream"))
    assert stream["stream_options"] == {"include_usage": True}
    lines = [json.loads(x) for x in (tmp_path / "r" / REQUESTS_FILE).read_text().splitlines()]
    by_id = {line["id"]: line for line in lines}
    assert by_id["r2"]["planned_s"] == pytest.approx(0.15)  # 0.3 s at speed 2
    parent_done = by_id["r1"]["sent_s"] + by_id["r1"]["answer"]["e2e_s"]
    assert by_id["r3"]["sent_s"] >= parent_done + 0.1 - 0.02  # after the answer, then half the think time
    counts = result.counts()
    assert counts[Parity.IDENTICAL] == 3 and counts[Parity.DIFFERENT] == 1  # r2 recorded "Rome.": different
    saved = read_replay(tmp_path / "r")
    assert saved["counts"] == {"identical": 3, "different": 1} and saved["timing"]["requests"] == 4


def test_a_killed_replay_resumes_and_a_changed_plan_is_refused(upstream, trace, tmp_path):
    fake, url = upstream
    out = tmp_path / "r"
    run_replay(ReplayRequest(trace, url=url, out=out, limit=2, progress=False))
    with pytest.raises(WorkbenchError, match="another plan"):
        run_replay(ReplayRequest(trace, url=url, out=out, progress=False))  # limit changed
    lines = (out / REQUESTS_FILE).read_text().splitlines()
    (out / REQUESTS_FILE).write_text(lines[0] + "\n")  # as if killed after the first answer
    posts = sum(m == "POST" for m, *_ in fake.seen)
    result = run_replay(ReplayRequest(trace, url=url, out=out, limit=2, progress=False))
    assert sum(m == "POST" for m, *_ in fake.seen) == posts + 1 and len(result.verdicts) == 2


def test_different_requests_become_a_twin_data_set_and_one_command(upstream, trace, tmp_path):
    _, url = upstream
    result = run_replay(ReplayRequest(trace, url=url, out=tmp_path / "r", progress=False))
    handoff = to_twin(result.verdicts, read_trace(trace), tmp_path / "r", reference="gpu.yaml", candidate=url)
    assert handoff.cases == ("r2",)
    assert handoff.command.startswith(f"ascend-workbench twin --recipe gpu.yaml --url {url} --prompts ")
    cases = load_dataset(handoff.prompts)
    assert [p.id for p in cases.problems] == ["r2"] and cases.problems[0].messages[0].content == "Capital of France?"
    with pytest.raises(WorkbenchError, match="reference configuration"):
        to_twin(result.verdicts, read_trace(trace), tmp_path / "r", reference=None, candidate=url)


def test_the_verb_prints_the_table_and_the_twin_command(upstream, trace, tmp_path, capsys):
    _, url = upstream
    code = cli.main(
        ["replay", str(trace), "--url", url, "--out", str(tmp_path / "r"), "--no-progress", "--to-twin", "gpu.yaml"]
    )
    printed = capsys.readouterr().out
    assert code == 1 and "verdict: error" in printed  # 1 of 4 different: beyond the policy
    assert "ascend-workbench twin --recipe gpu.yaml" in printed
    assert cli.main(["replay", str(tmp_path / "missing"), "--url", url]) == 2
    assert "no trace there" in capsys.readouterr().err
