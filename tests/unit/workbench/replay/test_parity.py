"""The verdict per request, on hand-made answers and on a real capture of SmolLM2 replayed on itself."""

from __future__ import annotations

import json
import math

import pytest

from tests.conftest import REPO_ROOT
from workbench.replay.parity import (
    JudgedAs,
    Parity,
    Tolerances,
    first_divergence,
    honours_format,
    judge_all,
    judge_choice,
)
from workbench.replay.policy import load_thresholds
from workbench.replay.store import ReplayLine, ScoreLine
from workbench.serving.load.trace import Choice, Endpoint, Score, TokenLogprobs, ToolCall, TraceRecord, read_trace

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "replay"
TOL = Tolerances(tie_nats=0.05, drift_nats=0.01, distribution_nats=0.05)


def lp(tokens, logprobs, runners):
    return TokenLogprobs(tuple(tokens), tuple(logprobs), tuple(runners))


def test_the_gap_of_a_divergence_adds_both_sides_margins():
    # recorded: a -1.20, b -1.21 (margin 0.01); replayed: b -1.19, a -1.20 (margin 0.01): gap 0.02, a near tie
    recorded = lp(["x", "a"], [-0.1, -1.20], [{"x": -0.1}, {"a": -1.20, "b": -1.21}])
    replayed = lp(["x", "b"], [-0.1, -1.19], [{"x": -0.1}, {"b": -1.19, "a": -1.20}])
    tie = first_divergence(recorded, replayed, 0.05)
    assert tie.parity is Parity.NEAR_TIE and tie.position == 1 and tie.gap == pytest.approx(0.02)
    far = lp(["x", "b"], [-0.1, -0.5], [{"x": -0.1}, {"b": -0.5, "a": -2.0}])
    assert first_divergence(recorded, far, 0.05).gap == pytest.approx(0.01 + 1.5)
    outside = lp(["x", "b"], [-0.1, -0.5], [{"x": -0.1}, {"b": -0.5, "c": -0.6}])  # a not among the runners-up
    assert first_divergence(recorded, outside, 10.0).parity is Parity.DIFFERENT  # a lower bound is never a tie


def greedy_record(body=None):
    return TraceRecord(
        "r", 0.0, Endpoint.CHAT, {"messages": [{"role": "user", "content": "Q?"}], "temperature": 0} | (body or {})
    )


def test_tool_calls_compare_as_json_and_schemas_are_checked():
    record = greedy_record({"tools": [{}]})
    a = Choice(0, "", "tool_calls", (ToolCall("get_weather", '{"city": "Paris"}'),))
    b = Choice(0, "Sure.", "tool_calls", (ToolCall("get_weather", '{ "city":"Paris" }'),))
    assert judge_choice(record, a, b, None, TOL)[0].parity is Parity.SAME_TOOL_CALL
    schema = {
        "type": "json_schema",
        "json_schema": {"schema": {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]}},
    }
    assert honours_format({"response_format": schema}, '{"age": 3}') and not honours_format(
        {"response_format": schema}, '{"age": "x"}'
    )
    json_record = greedy_record({"response_format": schema})
    verdict, how = judge_choice(
        json_record, Choice(0, '{"age": 3}', "stop"), Choice(0, '{"age": 4}', "stop"), None, TOL
    )
    assert (verdict.parity, how) == (Parity.SCHEMA_VALID, JudgedAs.TOKENS)
    assert (
        judge_choice(json_record, Choice(0, '{"age": 3}', "stop"), Choice(0, "{age", "stop"), None, TOL)[0].parity
        is Parity.DIFFERENT
    )


def test_broken_means_a_problem_the_recording_did_not_have():
    record = greedy_record()
    clean = Choice(0, "Paris is the capital of France.", "stop")
    assert judge_choice(record, clean, Choice(0, "!" * 40, "length"), None, TOL)[0].parity is Parity.BROKEN
    assert judge_choice(record, clean, Choice(0, "", "stop"), None, TOL)[0].parity is Parity.BROKEN
    nan = Choice(0, clean.text, "stop", logprobs=lp(["a"], [math.nan], [{}]))
    assert "non_finite_logprobs" in judge_choice(record, clean, nan, None, TOL)[0].detail
    looping = Choice(0, "!" * 40, "length")  # the reference looped already: inherited, compared as usual
    assert judge_choice(record, looping, Choice(0, "!" * 41, "length"), None, TOL)[0].parity is Parity.DIFFERENT


def test_a_sampled_answer_is_judged_by_its_likelihood_under_both_services():
    record = TraceRecord("r", 0.0, Endpoint.CHAT, {"messages": [{"role": "user", "content": "Q?"}], "temperature": 0.8})
    recorded = Choice(0, "one answer", "stop", score=Score((1, 2, 3), (-1.0, -2.0, -0.5)))
    replayed = Choice(0, "another answer", "stop")
    same = ScoreLine("r", 0, Score((1, 2, 3), (-1.001, -2.002, -0.5)))
    close = ScoreLine("r", 0, Score((1, 2, 3), (-1.05, -2.03, -0.52)))
    far = ScoreLine("r", 0, Score((1, 2, 3), (-2.0, -3.0, -1.5)))
    assert judge_choice(record, recorded, replayed, same, TOL)[0].parity is Parity.IDENTICAL
    assert judge_choice(record, recorded, replayed, close, TOL)[0].parity is Parity.NEAR_TIE
    verdict, how = judge_choice(record, recorded, replayed, far, TOL)
    assert (verdict.parity, how) == (Parity.DIFFERENT, JudgedAs.DISTRIBUTION) and "-1 nats/token" in verdict.detail


def test_smollm2_replayed_on_its_own_server_is_identical_and_a_changed_answer_is_not():
    records = read_trace(FIXTURES / "smollm2_capture")
    raw = (FIXTURES / "smollm2_capture" / "replay_requests.jsonl").read_text().splitlines()
    lines = {line.id: line for line in (ReplayLine.from_dict(json.loads(x)) for x in raw)}
    verdicts = judge_all(records, lines, {}, Tolerances.of(load_thresholds()))
    assert [v.parity for v in verdicts] == [Parity.IDENTICAL] * 14
    greedy = next(r for r in records if r.greedy and r.request_class == "chat")
    line = lines[greedy.id]
    choice = line.answer.choices[0]
    altered = choice.__class__(0, choice.text + " And more.", "length", logprobs=None)
    changed = ReplayLine(line.id, line.planned_s, line.sent_s, line.answer.__class__(200, (altered,)))
    verdict = judge_all([greedy], {greedy.id: changed}, {}, TOL)[0]
    assert verdict.parity is Parity.DIFFERENT and verdict.recorded and verdict.replayed.endswith("And more.")


def test_a_replay_that_gives_the_recorded_services_other_answer_is_not_blamed():
    from workbench.replay.logprobs import attach_shadow
    from workbench.serving.load.trace import Answer

    record = greedy_record()
    client = Answer(200, (Choice(0, "Paris is big.", "stop"),))
    shadow = Answer(
        200,
        (
            Choice(
                0,
                "Paris is large.",
                "stop",
                logprobs=lp(["P", "l"], [-0.1, -0.7], [{"P": -0.1}, {"l": -0.7, "b": -0.71}]),
            ),
        ),
    )
    recorded, mismatched = attach_shadow(client, shadow)
    assert (
        mismatched == 1
        and recorded.choices[0].alternate.text == "Paris is large."
        and recorded.choices[0].logprobs is None
    )
    again = Choice(0, "Paris is large.", "stop")
    verdict, _ = judge_choice(record, recorded.choices[0], again, None, TOL)
    assert verdict.parity is Parity.NEAR_TIE and "when asked again" in verdict.detail
    elsewhere = Choice(0, "Rome.", "stop", logprobs=lp(["R"], [-0.2], [{"R": -0.2, "P": -3.0}]))
    assert judge_choice(record, recorded.choices[0], elsewhere, None, TOL)[0].parity is Parity.DIFFERENT
