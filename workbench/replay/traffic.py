"""A service's clients, scripted: multi-turn conversations, tool calls, JSON-schema requests and completions.

To accept a port on *its own* traffic a user puts the capture proxy in front of the GPU service and lets its
clients talk. Where there are no clients (notebook 12, the replay benchmark, the acceptance test), this module
plays them with `data/traffic.jsonl` (see its README): each conversation is a session whose turns quote the
previous answers back, sent after a short think time; single requests (tools, JSON, completions) arrive on
their own. Conversations and single requests start at exponential gaps (`rate` per second). Every fifth
conversation samples (temperature 0.8, a fixed seed); the rest are greedy. Half the requests stream.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import aiohttp
import numpy as np

from workbench.errors import WorkbenchError
from workbench.replay.assemble import SseSplitter, parse_event
from workbench.replay.logprobs import TIMEOUT

TRAFFIC_FILE = "traffic.jsonl"


@dataclass(frozen=True)
class TrafficSpec:
    model: str
    conversations: int = 40  # at most the file's 40
    turns: int = 3
    single_repeats: int = 2  # each tool / JSON / completion item is sent this many times
    singles: int | None = None  # None: every single item of the file; else the first N of each kind
    max_tokens: int = 48
    rate: float = 2.0  # arrivals (conversations and single requests) per second
    think_s: float = 0.3  # mean pause before a follow-up turn
    sampled_every: int = 5  # every Nth conversation samples (0: none)
    kinds: tuple[str, ...] = ("tools", "json", "completion")  # single kinds sent (tools need a tool parser)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.conversations < 0 or self.turns < 1 or self.single_repeats < 0 or self.rate <= 0:
            raise WorkbenchError("traffic: conversations >= 0, turns >= 1, single_repeats >= 0 and rate > 0")


def traffic_items() -> list[dict[str, Any]]:
    path = resources.files("workbench.replay") / "data" / TRAFFIC_FILE
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _chat_body(spec: TrafficSpec, messages: list[dict], index: int, stream: bool, sampled: bool) -> dict[str, Any]:
    body = {"model": spec.model, "messages": messages, "max_tokens": spec.max_tokens, "stream": stream}
    return body | ({"temperature": 0.8, "top_p": 0.95, "seed": index} if sampled else {"temperature": 0.0})


def single_request(spec: TrafficSpec, item: dict[str, Any], stream: bool) -> tuple[str, dict[str, Any]]:
    """(path, body) of a tool, JSON or completion item."""
    if item["kind"] == "completion":
        body = {"model": spec.model, "prompt": item["prompt"], "max_tokens": spec.max_tokens, "temperature": 0.0}
        return "/v1/completions", body | {"stream": stream}
    if item["kind"] == "tools":
        question, answer = item["example"]
        messages = [
            {"role": "system", "content": item["system"]},
            {"role": "user", "content": question},
            {"role": "assistant", "content": answer},
            {"role": "user", "content": item["ask"]},
        ]
        extra = {"tools": item["tools"], "tool_choice": "auto"}
    else:
        messages = [{"role": "user", "content": item["ask"]}]
        extra = {
            "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": item["schema"]}}
        }
    return "/v1/chat/completions", _chat_body(spec, messages, 0, stream, False) | extra


async def _post(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """The answer's first choice as a message: text (streamed or not) and tool calls."""
    async with session.post(url, json=body) as response:
        if not body.get("stream"):
            data = await response.json(content_type=None)
            choice = (data.get("choices") or [{}])[0]
            return choice.get("message") or {"content": choice.get("text", "")}
        splitter, parts = SseSplitter(), []
        async for chunk in response.content.iter_any():
            for payload in splitter.feed(chunk):
                event = parse_event(payload) or {}
                for choice in event.get("choices") or ():
                    parts.append((choice.get("delta") or {}).get("content") or choice.get("text") or "")
        return {"content": "".join(parts)}


async def _conversation(session, base_url: str, spec: TrafficSpec, turns: Sequence[str], index: int, rng) -> int:
    sampled = bool(spec.sampled_every) and index % spec.sampled_every == spec.sampled_every - 1
    messages: list[dict[str, Any]] = []
    for turn, text in enumerate(turns[: spec.turns]):
        if turn:
            await asyncio.sleep(float(rng.exponential(spec.think_s)))
        messages.append({"role": "user", "content": text})
        body = _chat_body(spec, list(messages), index, stream=(index + turn) % 2 == 0, sampled=sampled)
        reply = await _post(session, base_url + "/v1/chat/completions", body)
        messages.append({"role": "assistant", "content": reply.get("content") or ""})
    return min(len(turns), spec.turns)


def _schedule(spec: TrafficSpec, items: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """What arrives, in order: ('chat', turns) and ('single', item), shuffled with a fixed seed."""
    chats = [("chat", i["turns"]) for i in items if i["kind"] == "chat"][: spec.conversations]
    singles = []
    for kind in spec.kinds:
        chosen = [i for i in items if i["kind"] == kind][: spec.singles]
        singles += [("single", i) for _ in range(spec.single_repeats) for i in chosen]
    work = chats + singles
    order = np.random.default_rng(spec.seed).permutation(len(work))
    return [work[i] for i in order]


async def send_traffic(base_url: str, spec: TrafficSpec) -> int:
    """Play the clients against `base_url` (the capture proxy); returns how many requests were sent."""
    rng = np.random.default_rng(spec.seed)
    work = _schedule(spec, traffic_items())
    gaps = rng.exponential(1.0 / spec.rate, size=len(work))
    base_url = base_url.rstrip("/")
    async with aiohttp.ClientSession(timeout=TIMEOUT, connector=aiohttp.TCPConnector(limit=0)) as session:

        async def run(position: int, kind: str, what: Any) -> int:
            await asyncio.sleep(float(np.sum(gaps[: position + 1])))
            if kind == "chat":
                return await _conversation(session, base_url, spec, what, position, np.random.default_rng(position))
            path, body = single_request(spec, what, stream=position % 2 == 0)
            await _post(session, base_url + path, body)
            return 1

        counts = await asyncio.gather(*(run(p, kind, what) for p, (kind, what) in enumerate(work)))
    return int(sum(counts))


__all__ = ["TrafficSpec", "send_traffic", "single_request", "traffic_items"]
