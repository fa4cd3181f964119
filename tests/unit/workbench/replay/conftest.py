"""A small OpenAI-shaped upstream for the proxy and replay tests, served by uvicorn in a thread.

Its answers have vLLM 0.32's shapes (chat and completions, whole or streamed as server-sent events, logprobs
keyed "token_id:N" when asked) with fixed ids and times, so two requests get the very same bytes. A streamed
answer is sent in pieces cut mid-event, as a network would deliver it.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

WORDS = ["The", " capital", " of", " France", " is", " Paris", "."]


def _logprobs(chat: bool, top_k: int) -> Any:
    entries = [
        {
            "token": f"token_id:{100 + i}",
            "logprob": -0.1 * (i + 1),
            "top_logprobs": [
                {"token": f"token_id:{100 + i}", "logprob": -0.1 * (i + 1)},
                {"token": f"token_id:{900 + i}", "logprob": -3.0},
            ][:top_k],
        }
        for i in range(len(WORDS))
    ]
    if chat:
        return {"content": entries}
    return {
        "tokens": [e["token"] for e in entries],
        "token_logprobs": [e["logprob"] for e in entries],
        "top_logprobs": [{t["token"]: t["logprob"] for t in e["top_logprobs"]} for e in entries],
    }


class FakeOpenAI:
    """The upstream; `seen` holds every request (method, path, query, headers, body bytes)."""

    def __init__(self, words: list[str] | None = None) -> None:
        self.words = words or WORDS
        self.seen: list[tuple[str, str, bytes, dict[str, str], bytes]] = []
        self.times: list[float] = []  # when each request arrived

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.seen.append((scope["method"], scope["path"], scope["query_string"], headers, body))
        self.times.append(time.perf_counter())
        await self.answer(scope["path"], json.loads(body) if body.startswith(b"{") else {}, send)

    async def answer(self, path: str, request: dict, send) -> None:
        chat = path == "/v1/chat/completions"
        if path == "/health":
            return await _whole(send, 200, b"")
        if path == "/v1/models":
            return await _whole(send, 200, b'{"data": [{"id": "fake-model", "root": "/nowhere"}]}')
        if path not in ("/v1/chat/completions", "/v1/completions", "/gz"):
            return await _whole(send, 404, b'{"detail":"Not Found"}')
        if path == "/gz":
            return await _whole(send, 200, gzip.compress(b'{"ok": true}'), [(b"content-encoding", b"gzip")])
        top_k = int(request.get("top_logprobs") or request.get("logprobs") or 0) if request.get("logprobs") else 0
        if request.get("stream"):
            return await self.stream(
                send, chat, top_k, bool((request.get("stream_options") or {}).get("include_usage"))
            )
        text = "".join(self.words)
        choice = {"index": 0, "finish_reason": "stop", "logprobs": _logprobs(chat, top_k) if top_k else None}
        choice |= {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
        data = {
            "id": "cmpl-fixed",
            "created": 1,
            "model": request.get("model"),
            "choices": [choice],
            "usage": {"prompt_tokens": 5, "completion_tokens": len(self.words), "total_tokens": 5 + len(self.words)},
        }
        await _whole(send, 200, json.dumps(data).encode())

    async def stream(self, send, chat: bool, top_k: int, usage: bool) -> None:
        events = []
        if chat:
            events.append({"id": "c", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        logprobs = _logprobs(chat, top_k) if top_k else None
        for i, word in enumerate(self.words):
            choice = {"index": 0, "finish_reason": "stop" if i == len(self.words) - 1 else None}
            choice |= {"delta": {"content": word}} if chat else {"text": word}
            if logprobs is not None:
                choice["logprobs"] = (
                    {"content": [logprobs["content"][i]]} if chat else {k: [v[i]] for k, v in logprobs.items()}
                )
            events.append({"id": "c", "created": 1, "choices": [choice]})
        if usage:
            events.append(
                {"id": "c", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": len(self.words)}}
            )
        raw = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream; charset=utf-8"), (b"x-upstream", b"fake")],
            }
        )
        for start in range(0, len(raw), 37):  # pieces cut mid-event
            await send({"type": "http.response.body", "body": raw[start : start + 37], "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _whole(send, status: int, body: bytes, extra: list | None = None) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"x-upstream", b"fake"),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class Served:
    def __init__(self, app) -> None:
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}"

    def __enter__(self) -> Served:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def upstream() -> Iterator[tuple[FakeOpenAI, str]]:
    app = FakeOpenAI()
    with Served(app) as served:
        yield app, served.url
