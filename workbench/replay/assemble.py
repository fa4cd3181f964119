"""An OpenAI-compatible answer, whole or streamed, assembled into one `Answer` (the trace's record of it).

The capture proxy and the replay client both see answers as bytes: a JSON body, or a server-sent-event
stream (`data: {...}` events separated by a blank line, `data: [DONE]` at the end). This module turns them
into text, tool calls, finish reason, usage and per-token logprobs, in the two shapes vLLM's OpenAI API
writes (vLLM 0.32, vllm/entrypoints/openai/chat_completion/protocol.py and completion/protocol.py):

- chat: `message.content` / `delta.content`, `tool_calls` (streamed as deltas per `index`, arguments in
  pieces), `logprobs.content[i] = {token, logprob, top_logprobs: [{token, logprob}]}`;
- completions: `text`, `logprobs = {tokens, token_logprobs, top_logprobs: [{token: logprob}]}`.

TTFT is the time of the first event that carries output (text, a tool call or a token); vLLM's first chat
chunk announces the role with empty content and is not output. Pure: bytes and clock readings in, `Answer` out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workbench.serving.load.trace import Answer, Choice, Endpoint, LogprobsSource, TokenLogprobs, ToolCall


@dataclass
class _ChoiceParts:
    """One choice while its stream arrives."""

    text: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    tools: dict[int, dict[str, list[str]]] = field(default_factory=dict)  # index -> {"name": [...], "arguments": [...]}
    tokens: list[str] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top: list[dict[str, float]] = field(default_factory=list)

    def choice(self, index: int) -> Choice:
        calls = tuple(
            ToolCall("".join(parts["name"]), "".join(parts["arguments"])) for _, parts in sorted(self.tools.items())
        )
        logprobs = TokenLogprobs(tuple(self.tokens), tuple(self.logprobs), tuple(self.top)) if self.tokens else None
        return Choice(index, "".join(self.text), self.finish_reason, calls, logprobs)


def _add_logprobs(parts: _ChoiceParts, logprobs: Any) -> None:
    if not isinstance(logprobs, Mapping):
        return
    if "content" in logprobs:  # chat
        for entry in logprobs.get("content") or ():
            parts.tokens.append(str(entry["token"]))
            parts.logprobs.append(_float(entry["logprob"]))
            parts.top.append({str(t["token"]): _float(t["logprob"]) for t in entry.get("top_logprobs") or ()})
        return
    tops = logprobs.get("top_logprobs") or [None] * len(logprobs.get("tokens") or ())  # completions
    for token, value, top in zip(logprobs.get("tokens") or (), logprobs.get("token_logprobs") or (), tops):
        parts.tokens.append(str(token))
        parts.logprobs.append(_float(value))
        parts.top.append({str(k): _float(v) for k, v in (top or {}).items()})


def _add_tool_deltas(parts: _ChoiceParts, calls: Any) -> None:
    for position, call in enumerate(calls or ()):
        slot = parts.tools.setdefault(int(call.get("index", position)), {"name": [], "arguments": []})
        function = call.get("function") or {}
        if function.get("name"):
            slot["name"].append(str(function["name"]))
        if function.get("arguments"):
            arguments = function["arguments"]
            slot["arguments"].append(arguments if isinstance(arguments, str) else json.dumps(arguments))


def _float(value: Any) -> float:
    return float("nan") if value is None else float(value)


def _add_choice(parts: _ChoiceParts, raw: Mapping[str, Any], endpoint: Endpoint) -> bool:
    """Fold one choice object (whole or a delta) into `parts`; True when it carried output."""
    carried = False
    if endpoint is Endpoint.CHAT:
        message = raw.get("delta") or raw.get("message") or {}
        if message.get("content"):
            parts.text.append(str(message["content"]))
            carried = True
        if message.get("tool_calls"):
            _add_tool_deltas(parts, message["tool_calls"])
            carried = True
    elif raw.get("text"):
        parts.text.append(str(raw["text"]))
        carried = True
    before = len(parts.tokens)
    _add_logprobs(parts, raw.get("logprobs"))
    if raw.get("finish_reason"):
        parts.finish_reason = str(raw["finish_reason"])
    return carried or len(parts.tokens) > before


class AnswerAssembler:
    """Collects one answer: `add_event(obj, now)` per parsed event (or the whole JSON body), then `answer()`."""

    def __init__(self, endpoint: Endpoint, started: float):
        self.endpoint = endpoint
        self.started = started
        self.parts: dict[int, _ChoiceParts] = {}
        self.usage: dict[str, Any] | None = None
        self.error: str | None = None
        self.first: float | None = None
        self.last: float | None = None

    def add_event(self, event: Any, now: float) -> None:
        if not isinstance(event, Mapping):
            self.error = f"unexpected event {str(event)[:200]}"
            return
        if event.get("error"):
            self.error = json.dumps(event["error"])[:500] if not isinstance(event["error"], str) else event["error"]
        if event.get("usage"):
            self.usage = dict(event["usage"])
        for raw in event.get("choices") or ():
            index = int(raw.get("index", 0))
            if _add_choice(self.parts.setdefault(index, _ChoiceParts()), raw, self.endpoint):
                self.first = now if self.first is None else self.first
                self.last = now

    def answer(self, status: int, ended: float, *, streamed: bool, source: LogprobsSource | None) -> Answer:
        choices = tuple(parts.choice(index) for index, parts in sorted(self.parts.items()))
        has_logprobs = any(c.logprobs for c in choices)
        error = self.error
        if status != 200 and error is None:
            error = f"HTTP {status}"
        return Answer(
            status=status,
            choices=choices,
            usage=self.usage,
            ttft_s=(self.first - self.started) if streamed and self.first is not None else None,
            e2e_s=((self.last if streamed and self.last is not None else ended) - self.started),
            error=error,
            logprobs_source=source if has_logprobs else None,
        )


class SseSplitter:
    """Bytes of an event stream in, complete `data:` payloads out (an event may span network chunks)."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        self.buffer += chunk.replace(b"\r\n", b"\n")
        *events, self.buffer = self.buffer.split(b"\n\n")
        return [line[6:] for event in events for line in event.split(b"\n") if line.startswith(b"data: ")]


def parse_event(payload: bytes) -> Any:
    """One `data:` payload as JSON; None for `[DONE]`; a dict with 'error' when it is not JSON."""
    if payload.strip() == b"[DONE]":
        return None
    try:
        return json.loads(payload)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {"error": f"undecodable stream event {payload[:200]!r}"}


def answer_from_body(
    endpoint: Endpoint, status: int, body: bytes, started: float, ended: float, source: LogprobsSource | None
) -> Answer:
    """A whole (non-streamed) answer."""
    assembler = AnswerAssembler(endpoint, started)
    try:
        data = json.loads(body) if body else {}
    except (json.JSONDecodeError, UnicodeDecodeError):
        data = {"error": f"undecodable body {body[:200]!r}"}
    if status != 200 and isinstance(data, Mapping) and not data.get("error"):
        data = {"error": data.get("message") or data.get("detail") or f"HTTP {status}"}
    assembler.add_event(data, ended)
    return assembler.answer(status, ended, streamed=False, source=source)


def answer_from_stream(
    endpoint: Endpoint,
    status: int,
    chunks: list[tuple[float, bytes]],
    started: float,
    ended: float,
    source: LogprobsSource | None,
) -> Answer:
    """A streamed answer from its network chunks and their arrival times."""
    if status != 200:
        return answer_from_body(endpoint, status, b"".join(c for _, c in chunks), started, ended, source)
    assembler = AnswerAssembler(endpoint, started)
    splitter = SseSplitter()
    done = False
    for now, chunk in chunks:
        for payload in splitter.feed(chunk):
            event = parse_event(payload)
            if event is None:
                done = True
            else:
                assembler.add_event(event, now)
    answer = assembler.answer(status, ended, streamed=True, source=source)
    if not done and answer.error is None:  # a stream that stops without [DONE] was cut off
        return _with_error(answer, "the stream ended without [DONE]")
    return answer


def _with_error(answer: Answer, error: str) -> Answer:
    from dataclasses import replace

    return replace(answer, error=error)


__all__ = ["AnswerAssembler", "SseSplitter", "answer_from_body", "answer_from_stream", "parse_event"]
