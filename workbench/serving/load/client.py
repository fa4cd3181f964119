"""One streamed `/v1/completions` request, timed chunk by chunk.

Why aiohttp for the stream and not httpx (used everywhere else in the workbench): on the same SSE
stream httpx spent about 3x the client CPU per token (its pure-Python h11 parser handles every chunk),
and on a small machine the client competes with the server for the same cores. aiohttp's parser is in
C and is what `vllm bench serve` uses; token chunks are also recognised here without a JSON parse.
Output token counts come from the server's usage block (`stream_options.include_usage`).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import aiohttp

from workbench.serving.load.workload import Prompt


@dataclass(frozen=True)
class RequestRecord:
    """One request as the client saw it (times in seconds)."""

    index: int
    sent_s: float  # since the start of the run
    prompt_tokens: int
    output_tokens: int
    ttft_s: float
    e2el_s: float
    itl_s: tuple[float, ...]
    success: bool
    error: str = ""

    @property
    def tpot_s(self) -> float:
        """(E2E - TTFT) / (output_tokens - 1); 0.0 with one output token or less (vLLM's convention)."""
        return (self.e2el_s - self.ttft_s) / (self.output_tokens - 1) if self.output_tokens > 1 else 0.0


class _StreamState:
    """Timestamps and counts gathered while one SSE stream arrives (private to `send_one`)."""

    __slots__ = ("first", "last", "gaps", "usage", "error", "kept")

    def __init__(self, kept: list[bytes] | None = None) -> None:
        self.first: float | None = None
        self.last = 0.0
        self.gaps: list[float] = []
        self.usage: dict | None = None
        self.error = ""
        self.kept = kept  # the payloads themselves, for the output guard (a sample of a run's requests)

    def on_event(self, body: bytes, now: float) -> None:
        """One `data: ...` payload. Token chunks are recognised without a JSON parse: the stream is
        dominated by them and parsing each costs the client more CPU than the rest of the work."""
        if self.kept is not None:
            self.kept.append(body)
        if body.startswith(b'{"id"') and b'"delta":{"role":"assistant","content":""}' in body:
            return  # a chat stream's first chunk names the role and carries no token (vllm bench serve skips it too)
        if body.startswith(b'{"id"') and b'"choices":[{' in body:
            self.on_choice(now)
            return
        if body == b"[DONE]":
            return
        event = json.loads(body)
        if event.get("choices"):
            self.on_choice(now)
        if event.get("usage"):
            self.usage = event["usage"]
        if event.get("error"):
            self.error = str(event["error"])[:500]

    def on_choice(self, now: float) -> None:
        if self.first is None:
            self.first = now
        else:
            self.gaps.append(now - self.last)
        self.last = now


async def send_one(
    session: aiohttp.ClientSession,
    url: str,
    payload: dict,
    index: int,
    prompt: Prompt,
    t0: float,
    kept: list[bytes] | None = None,
) -> RequestRecord:
    """One streamed request; with `kept`, its event payloads are appended there (for the output guard)."""
    state = _StreamState(kept)
    started = time.perf_counter()
    try:
        async with session.post(url, json=payload) as response:
            if response.status != 200:
                state.error = f"HTTP {response.status}: {(await response.read())[:300]!r}"
            else:
                buffer = b""
                async for chunk in response.content.iter_any():
                    now = time.perf_counter()
                    buffer += chunk
                    *events, buffer = buffer.split(b"\n\n")
                    for event in events:
                        if event.startswith(b"data: "):
                            state.on_event(event[6:], now)
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError, json.JSONDecodeError) as exc:
        state.error = f"{type(exc).__name__}: {exc}"[:500]
    success = state.first is not None and not state.error
    if state.first is None and not state.error:
        state.error = "stream ended without any token"
    usage = state.usage or {}
    return RequestRecord(
        index=index,
        sent_s=started - t0,
        prompt_tokens=int(usage.get("prompt_tokens") or prompt.num_tokens),
        output_tokens=int(usage.get("completion_tokens") or (len(state.gaps) + 1 if success else 0)),
        ttft_s=(state.first - started) if state.first is not None else 0.0,
        e2el_s=(state.last - started) if state.first is not None else 0.0,
        itl_s=tuple(state.gaps),
        success=success,
        error=state.error,
    )
