"""Which conversation a chat request belongs to: the chain of requests whose messages extend an earlier one's.

A client holding a conversation sends the whole history every turn: turn 2's messages are turn 1's
messages, then turn 1's answer as an assistant message, then the new user message. So request R extends
an earlier request P when P's messages are a prefix of R's. Two users can open with the same words, so a
match that also contains P's *answer* (P's messages + an assistant message equal to what P was answered)
is preferred over one on the messages alone, and the longest prefix wins; among equals, the latest request.

Messages are compared by role, text and tool calls (name and arguments; tool-call ids are random per
service and never part of the key). Pure bookkeeping: no I/O, no clock.

    index = SessionIndex()
    link = index.link(messages)                  # at arrival: parent (or None), session, turn
    index.remember(request_id, link, messages, answer_message)   # once answered
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.serving.load.trace import message_text


def _message_key(message: Mapping[str, Any]) -> str:
    calls = [
        [str((c.get("function") or c).get("name", "")), str((c.get("function") or c).get("arguments", ""))]
        for c in message.get("tool_calls") or ()
    ]
    return json.dumps([message.get("role"), message_text(message), calls], ensure_ascii=False)


def prefix_keys(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """keys[k] identifies messages[:k + 1]: a chained hash, so every prefix costs one step."""
    keys, running = [], hashlib.sha256()
    for message in messages:
        running.update(_message_key(message).encode())
        running.update(b"\x00")
        keys.append(running.copy().hexdigest()[:32])
    return keys


@dataclass(frozen=True)
class SessionLink:
    """Where a request sits in its conversation; `parent` None starts a new session."""

    session: str
    turn: int
    parent: str | None


@dataclass
class SessionIndex:
    """Every answered chat request by the key of its messages (weak) and of messages + answer (strong)."""

    weak: dict[str, tuple[str, SessionLink]] = field(default_factory=dict)
    strong: dict[str, tuple[str, SessionLink]] = field(default_factory=dict)
    sessions: int = 0

    def link(self, messages: Sequence[Mapping[str, Any]]) -> SessionLink:
        """The session of a request arriving with `messages` (a new one when no earlier request is its prefix)."""
        keys = prefix_keys(messages)
        for k in range(len(keys) - 2, -1, -1):  # proper prefixes, longest first
            found = self.strong.get(keys[k]) or self.weak.get(keys[k])
            if found is not None:
                parent, link = found
                return SessionLink(link.session, link.turn + 1, parent)
        self.sessions += 1
        return SessionLink(f"s{self.sessions:05d}", 0, None)

    def remember(
        self,
        request_id: str,
        link: SessionLink,
        messages: Sequence[Mapping[str, Any]],
        answer: Mapping[str, Any] | None,
    ) -> None:
        """Index an answered request; `answer` is its answer as the assistant message a client would append."""
        if not messages:
            return
        self.weak[prefix_keys(messages)[-1]] = (request_id, link)
        if answer is not None:
            self.strong[prefix_keys([*messages, answer])[-1]] = (request_id, link)


def assistant_message(text: str, tool_calls: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The assistant message a client appends after an answer (text and (name, arguments) tool calls)."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [{"function": {"name": n, "arguments": a}} for n, a in tool_calls]
    return message


__all__ = ["SessionIndex", "SessionLink", "assistant_message", "prefix_keys"]
