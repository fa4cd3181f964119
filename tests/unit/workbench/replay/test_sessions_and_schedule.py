"""Conversations found from the messages alone, and the replay schedule that keeps them in order."""

from __future__ import annotations

import pytest

from workbench.errors import WorkbenchError
from workbench.replay.schedule import plan
from workbench.replay.sessions import SessionIndex, assistant_message
from workbench.serving.load.trace import Endpoint, TraceRecord


def user(text):
    return {"role": "user", "content": text}


def test_a_follow_up_joins_the_conversation_whose_answer_it_quotes():
    index = SessionIndex()
    alice, bob = [user("Hi")], [user("Hi")]  # two users open with the same words
    a0, b0 = index.link(alice), index.link(bob)
    index.remember("a0", a0, alice, assistant_message("Hello Alice", []))
    index.remember("b0", b0, bob, assistant_message("Hello Bob", []))
    follow = index.link([*bob, {"role": "assistant", "content": "Hello Bob"}, user("How are you?")])
    assert (follow.parent, follow.session, follow.turn) == ("b0", b0.session, 1)  # the answer decides, not recency
    edited = index.link([*alice, {"role": "assistant", "content": "(edited by the client)"}, user("And?")])
    assert edited.parent == "b0"  # messages alone match both openers: the latest is taken
    assert index.link([user("Something else")]).parent is None


def test_tool_call_ids_never_break_a_chain():
    index = SessionIndex()
    first = [user("Weather in Paris?")]
    link = index.link(first)
    index.remember("r1", link, first, assistant_message("", [("get_weather", '{"city": "Paris"}')]))
    reply = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call-xyz",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
    assert index.link([*first, reply, user("Thanks")]).parent == "r1"


def record(id_, at, parent=None, think=None):
    return TraceRecord(id_, at, Endpoint.CHAT, {}, "s" if parent else None, 1 if parent else 0, parent, think)


def test_the_schedule_scales_time_and_holds_follow_ups_for_their_parent():
    records = [record("A", 10.0), record("B", 14.0), record("C", 16.0, "A", 1.0)]
    planned = {p.record.id: p for p in plan(records, speed=2.0)}
    assert planned["A"].offset_s == 0.0 and planned["B"].offset_s == 2.0  # from the first request, halved
    assert (planned["C"].wait_for, planned["C"].think_s) == ("A", 0.5)
    resumed = {p.record.id: p for p in plan(records, 1.0, done={"A"})}
    assert set(resumed) == {"B", "C"} and resumed["B"].offset_s == 0.0 and resumed["C"].wait_for is None
    with pytest.raises(WorkbenchError, match="--speed"):
        plan(records, 0.0)
