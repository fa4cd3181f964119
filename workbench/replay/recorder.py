"""What the capture proxy keeps of each request: one trace line, written as soon as the request is done.

At arrival a request gets its id, its offset from the first request and its place in a conversation
(`workbench.replay.sessions`); once its answer is delivered, the answer is assembled from the bytes the
client received (`workbench.replay.assemble`) and, off the client's path, completed by the upstream
(`workbench.replay.logprobs`): the logprobs of a greedy answer, or the score of a sampled one. Then the
line is appended to `trace.jsonl` (`JsonlLog`: a killed proxy loses at most the requests still in flight).

The recorder runs inside the proxy's event loop and is not thread-safe by design (one loop, one writer).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp

from workbench.replay.assemble import answer_from_body, answer_from_stream
from workbench.replay.logprobs import TIMEOUT, ask_logprobs, attach_shadow, score_answer, wants_shadow
from workbench.replay.sessions import SessionIndex, SessionLink, assistant_message
from workbench.results.jsonl import JsonlLog
from workbench.serving.load.trace import TRACE_FILE, Answer, Endpoint, LogprobsSource, TraceRecord

# At most this many shadow/score requests at once: they load the upstream, which serves real clients.
SHADOW_CONCURRENCY = 4


@dataclass(frozen=True)
class CaptureSettings:
    """How the proxy completes what it records: top-k logprobs of greedy answers (0: none), scores of
    sampled ones, and the model name scoring requests use (None: the request's own `model`)."""

    top_logprobs: int = 5
    score_sampled: bool = True
    # at shutdown, how long the proxy waits for the shadow and score requests still running; those it stops
    # are written without their logprobs (a replay then cannot tell a near tie there: `different`)
    drain_s: float = 1800.0


@dataclass(frozen=True)
class Pending:
    """A request that arrived and is being answered."""

    id: str
    endpoint: Endpoint
    body: dict[str, Any]
    arrival: float  # perf_counter at arrival
    link: SessionLink | None


@dataclass
class CaptureStats:
    requests: int = 0
    errors: int = 0
    shadowed: int = 0
    shadow_mismatches: int = 0  # greedy choices the upstream answered differently the second time
    scored: int = 0
    classes: Counter = field(default_factory=Counter)


class Recorder:
    def __init__(self, out_dir: Path, upstream: str, settings: CaptureSettings):
        self.log = JsonlLog(Path(out_dir) / TRACE_FILE, fsync=False)  # one write per line; see the docstring
        self.upstream = upstream.rstrip("/")
        self.settings = settings
        self.sessions = SessionIndex()
        self.ends: dict[str, float] = {}  # request id -> perf_counter when its answer was delivered
        self.t0: float | None = None
        self.count = 0
        self.stats = CaptureStats()
        self.tasks: set[asyncio.Task] = set()
        self.limit = asyncio.Semaphore(SHADOW_CONCURRENCY)
        self.session: aiohttp.ClientSession | None = None

    def begin(self, endpoint: Endpoint, body: dict[str, Any], arrival: float) -> Pending:
        if self.t0 is None:
            self.t0 = arrival
        self.count += 1
        messages = body.get("messages") if endpoint is Endpoint.CHAT else None
        link = self.sessions.link(messages) if isinstance(messages, list) and messages else None
        return Pending(f"r{self.count:06d}", endpoint, body, arrival, link)

    def finish(self, pending: Pending, status: int, streamed: bool, chunks: list[tuple[float, bytes]], ended: float):
        """The client has its answer: assemble ours, complete it in the background, then write the line."""
        source = LogprobsSource.CLIENT
        if streamed:
            answer = answer_from_stream(pending.endpoint, status, chunks, pending.arrival, ended, source)
        else:
            body = b"".join(chunk for _, chunk in chunks)
            answer = answer_from_body(pending.endpoint, status, body, pending.arrival, ended, source)
        self.ends[pending.id] = ended
        record = self._record(pending, answer)
        if pending.link is not None and answer.ok:
            first = answer.choices[0] if answer.choices else None
            reply = assistant_message(first.text, [(c.name, c.arguments) for c in first.tool_calls]) if first else None
            self.sessions.remember(pending.id, pending.link, pending.body["messages"], reply)
        task = asyncio.get_running_loop().create_task(self._complete_and_write(record))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _record(self, pending: Pending, answer: Answer) -> TraceRecord:
        link = pending.link
        parent = link.parent if link is not None else None
        think = pending.arrival - self.ends[parent] if parent in self.ends else None
        return TraceRecord(
            id=pending.id,
            arrival_s=pending.arrival - (self.t0 or pending.arrival),
            endpoint=pending.endpoint,
            body=pending.body,
            session=link.session if link is not None else None,
            turn=link.turn if link is not None else 0,
            parent=parent,
            think_s=max(think, 0.0) if think is not None else None,
            answer=answer,
        )

    async def _complete_and_write(self, record: TraceRecord) -> None:
        try:
            record = await self._complete(record)
        finally:
            self.log.append(record.to_line())
            self._count(record)

    async def _complete(self, record: TraceRecord) -> TraceRecord:
        answer = record.answer
        if answer is None or not answer.ok:
            return record
        top_k = self.settings.top_logprobs
        async with self.limit:
            session = self._session()
            if top_k and wants_shadow(record.body, record.greedy):
                shadow = await ask_logprobs(session, self.upstream, record.endpoint, record.body, top_k)
                answer, mismatched = attach_shadow(answer, shadow)
                self.stats.shadowed += 1
                self.stats.shadow_mismatches += mismatched
            elif self.settings.score_sampled and not record.greedy:
                answer = await self._scored(session, record, answer)
        return replace(record, answer=answer)

    async def _scored(self, session: aiohttp.ClientSession, record: TraceRecord, answer: Answer) -> Answer:
        model = str(record.body.get("model", ""))
        choices = []
        for choice in answer.choices:
            try:
                score = await score_answer(session, self.upstream, model, record, choice.text)
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError, KeyError, IndexError):
                score = None  # unscored: the replay judges this choice by the guard alone, and says so
            self.stats.scored += score is not None
            choices.append(replace(choice, score=score))
        return replace(answer, choices=tuple(choices))

    def _session(self) -> aiohttp.ClientSession:
        if self.session is None:
            self.session = aiohttp.ClientSession(timeout=TIMEOUT)
        return self.session

    def _count(self, record: TraceRecord) -> None:
        self.stats.requests += 1
        self.stats.errors += record.answer is not None and not record.answer.ok
        self.stats.classes[record.request_class] += 1

    async def drain(self) -> None:
        """Wait for the lines still being completed (at shutdown, up to `drain_s`), then close the upstream session."""
        deadline = time.monotonic() + self.settings.drain_s
        while self.tasks and time.monotonic() < deadline:
            await asyncio.wait(set(self.tasks), timeout=max(deadline - time.monotonic(), 0.01))
        for task in list(self.tasks):  # past the deadline: written without their logprobs, never dropped
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.session is not None:
            await self.session.close()
            self.session = None


__all__ = ["CaptureSettings", "CaptureStats", "Pending", "Recorder"]
