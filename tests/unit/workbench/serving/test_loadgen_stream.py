"""The streaming client against a small local SSE server: timings, counts, failures, concurrency.

The server below speaks just enough HTTP/1.1 + server-sent events to look like vLLM's streamed
/v1/completions (token chunks, then a usage chunk, then [DONE]); the prompt text picks a behaviour.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from workbench.serving.load.runner import run_load_async
from workbench.serving.load.workload import Prompt, Workload

TOKENS = 5
GAP_S = 0.02
FIRST_S = 0.05


class FakeVLLM:
    def __init__(self) -> None:
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(
                    next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
                )
                body = json.loads(await reader.readexactly(length))
                self.requests += 1
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                try:
                    if not await self.respond(body, writer):
                        return
                finally:
                    self.in_flight -= 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def respond(self, body: dict, writer: asyncio.StreamWriter) -> bool:
        prompt = body["prompt"]
        if prompt == "fail500":
            writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops")
            await writer.drain()
            return True
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")

        async def event(payload: bytes) -> None:
            data = b"data: " + payload + b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()

        await asyncio.sleep(FIRST_S)
        for i in range(body["max_tokens"]):
            if i:
                await asyncio.sleep(GAP_S)
            if prompt == "drop" and i == 2:
                writer.transport.abort()  # the server died mid-stream
                return False
            chunk = {
                "id": "cmpl-1",
                "object": "text_completion",
                "choices": [{"index": 0, "text": f" t{i}", "finish_reason": None}],
                "usage": None,
            }
            await event(json.dumps(chunk, separators=(",", ":")).encode())
        usage = {
            "id": "cmpl-1",
            "choices": [],
            "usage": {
                "prompt_tokens": 7,
                "completion_tokens": body["max_tokens"],
                "total_tokens": 7 + body["max_tokens"],
            },
        }
        await event(json.dumps(usage).encode())
        await event(b"[DONE]")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


async def run_against_fake(prompts: list[str], workload: Workload):
    fake = FakeVLLM()
    server = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        result = await run_load_async(
            f"http://127.0.0.1:{port}", "fake", [Prompt(p, 7) for p in prompts], workload, progress=False
        )
    return result, fake


def test_timings_and_counts():
    workload = Workload(input_len=7, output_len=TOKENS, num_prompts=4, concurrency=2)
    result, fake = asyncio.run(run_against_fake(["ok"], workload))
    s = result.summary
    assert (s.sent, s.completed, s.failed) == (4, 4, 0) and fake.requests == 4
    assert s.total_output_tokens == 4 * TOKENS and s.total_input_tokens == 4 * 7
    for r in result.records:
        assert r.success and r.output_tokens == TOKENS and len(r.itl_s) == TOKENS - 1
        assert FIRST_S * 0.9 <= r.ttft_s < FIRST_S + 1.0
        assert all(gap >= GAP_S * 0.5 for gap in r.itl_s)
        assert r.e2el_s == pytest.approx(r.ttft_s + sum(r.itl_s), abs=1e-9)
        assert r.tpot_s == pytest.approx(sum(r.itl_s) / (TOKENS - 1), rel=1e-9)
    assert fake.max_in_flight <= 2


def test_failures_are_counted_not_raised():
    workload = Workload(input_len=7, output_len=TOKENS, num_prompts=6, concurrency=3)
    result, _ = asyncio.run(run_against_fake(["ok", "fail500", "drop"], workload))
    s = result.summary
    assert s.completed + s.failed == s.sent == 6
    assert s.completed == 2 and s.failed == 4
    errors = [r.error for r in result.records if not r.success]
    assert sum("HTTP 500" in e for e in errors) == 2
    assert all(e for e in errors)
    assert s.total_output_tokens == 2 * TOKENS  # partial streams add nothing


def test_concurrency_is_held_exactly():
    workload = Workload(input_len=7, output_len=3, num_prompts=12, concurrency=4)
    _, fake = asyncio.run(run_against_fake(["ok"], workload))
    assert fake.max_in_flight == 4


def test_open_loop_rate_and_duration():
    workload = Workload(input_len=7, output_len=2, duration_s=0.5, request_rate=20.0)
    started = time.perf_counter()
    result, _ = asyncio.run(run_against_fake(["ok"], workload))
    assert time.perf_counter() - started < 5
    sent = result.summary.sent
    assert 3 <= sent <= 20  # about rate * duration = 10 arrivals in 0.5 s
    assert max(r.sent_s for r in result.records) < 0.5 + 0.1
    assert result.summary.failed == 0
