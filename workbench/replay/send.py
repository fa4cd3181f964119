"""Sending a trace to a service: every request at its planned time, each answer saved as it completes.

The body sent is the recorded one with three changes, each so the answer can be judged and timed:
`model` becomes the target's served model; a greedy request whose logprobs the proxy recorded in its
shadow asks for the same logprobs (`workbench.replay.logprobs.logprobs_fields`: they do not change which
token is chosen); a streamed request asks for its usage at the end (`stream_options.include_usage`), so
TPOT has a token count. Everything else — messages, tools, `response_format`, `n`, sampling parameters,
streaming — goes as the client sent it.

Phase 1 (`send_all`) keeps the trace's timing (`workbench.replay.schedule`); phase 2 (`score_all`) scores
the recorded answers of sampled requests under the new service after the timed run, so the scoring never
adds load to the latencies measured.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import aiohttp
from tqdm.auto import tqdm

from workbench.replay.assemble import answer_from_body, answer_from_stream
from workbench.replay.logprobs import TIMEOUT, logprobs_fields, rescore
from workbench.replay.schedule import Planned
from workbench.replay.store import ReplayLine, ScoreLine
from workbench.results.jsonl import JsonlLog
from workbench.serving.load.trace import Answer, LogprobsSource, TraceRecord

DEFAULT_TOP_LOGPROBS = 5


def recorded_top_k(record: TraceRecord) -> int:
    """How many runners-up the recording holds per token (what the replay asks for, to compare like with like)."""
    for choice in record.answer.choices if record.answer else ():
        if choice.logprobs and choice.logprobs.top:
            return max(1, len(choice.logprobs.top[0]))
    return DEFAULT_TOP_LOGPROBS


def replay_body(record: TraceRecord, model: str) -> dict[str, Any]:
    """The request as it is replayed (see the module docstring for the three changes)."""
    body = dict(record.body) | {"model": model}
    if record.answer is not None and record.answer.logprobs_source is LogprobsSource.SHADOW:
        body |= logprobs_fields(record.endpoint, recorded_top_k(record))
    if body.get("stream"):
        body["stream_options"] = dict(body.get("stream_options") or {}) | {"include_usage": True}
    return body


async def send_one(session: aiohttp.ClientSession, base_url: str, record: TraceRecord, model: str) -> Answer:
    body = replay_body(record, model)
    source = LogprobsSource.CLIENT
    started = time.perf_counter()
    chunks: list[tuple[float, bytes]] = []
    try:
        async with session.post(base_url + record.endpoint.path, json=body) as response:
            streamed = response.headers.get("content-type", "").startswith("text/event-stream")
            async for chunk in response.content.iter_any():
                chunks.append((time.perf_counter(), chunk))
            status = response.status
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        return Answer(status=0, e2e_s=time.perf_counter() - started, error=f"{type(exc).__name__}: {exc}"[:300])
    ended = time.perf_counter()
    if streamed:
        return answer_from_stream(record.endpoint, status, chunks, started, ended, source)
    return answer_from_body(record.endpoint, status, b"".join(c for _, c in chunks), started, ended, source)


async def send_all(base_url: str, model: str, planned: Sequence[Planned], log: JsonlLog, *, progress: bool) -> None:
    """Phase 1: every planned request at its time (conversations in order), each line appended as it returns."""
    events = {p.record.id: asyncio.Event() for p in planned}
    finished: dict[str, float] = {}
    bar = tqdm(total=len(planned), desc="replay", unit="req", disable=not progress)
    connector = aiohttp.TCPConnector(limit=0)  # open loop: the trace decides the concurrency
    async with aiohttp.ClientSession(connector=connector, timeout=TIMEOUT) as session:
        t0 = time.perf_counter()

        async def one(item: Planned) -> None:
            try:
                if item.wait_for is not None:
                    await events[item.wait_for].wait()
                    due = finished[item.wait_for] + item.think_s
                else:
                    due = t0 + item.offset_s
                await asyncio.sleep(max(due - time.perf_counter(), 0.0))
                sent = time.perf_counter() - t0
                answer = await send_one(session, base_url, item.record, model)
                log.append(ReplayLine(item.record.id, due - t0, sent, answer).to_line())
                bar.update(1)
            finally:
                finished[item.record.id] = time.perf_counter()
                events[item.record.id].set()  # a failed parent still releases its children

        try:
            await asyncio.gather(*(one(p) for p in planned))
        finally:
            bar.close()


def scored_choices(record: TraceRecord) -> list:
    """The choices of a sampled request that carry a recorded score (the ones judged as distributions)."""
    if record.answer is None or record.greedy:
        return []
    return [choice for choice in record.answer.choices if choice.score is not None]


async def score_all(
    base_url: str,
    model: str,
    records: Sequence[TraceRecord],
    done: set[tuple[str, int]],
    log: JsonlLog,
    *,
    progress: bool,
) -> None:
    """Phase 2: each sampled choice's recorded score, recomputed under the new service (one at a time)."""
    todo = [(r, c) for r in records for c in scored_choices(r) if (r.id, c.index) not in done]
    if not todo:
        return
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        for record, choice in tqdm(todo, desc="score sampled", unit="answer", disable=not progress):
            assert choice.score is not None
            try:
                line = ScoreLine(record.id, choice.index, await rescore(session, base_url, model, record, choice.score))
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError, KeyError, IndexError) as exc:
                line = ScoreLine(record.id, choice.index, None, f"{type(exc).__name__}: {exc}"[:300])
            log.append(line.to_line())


__all__ = [
    "DEFAULT_TOP_LOGPROBS",
    "recorded_top_k",
    "replay_body",
    "score_all",
    "scored_choices",
    "send_all",
    "send_one",
]
