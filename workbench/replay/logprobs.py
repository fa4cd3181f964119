"""Logprobs a client never asked for, obtained without touching what it receives.

Two questions need per-token probabilities and neither may change a client's bytes:

- **greedy requests** (temperature 0): where a replay's answer parts from the recorded one, were the two
  tokens nearly tied? The capture proxy asks the upstream the *same* request again after the client's
  answer is delivered (`shadow_body`: the body plus `logprobs`, `top_logprobs` and
  `return_tokens_as_token_ids`, unstreamed), and keeps the shadow's logprobs when the shadow answered the
  same text and tool calls. Greedy decoding of an unchanged configuration should, but on an engine whose
  numerics depend on the batch it may not: then the shadow's answer is kept as the choice's `alternate`,
  counted as the configuration's run-to-run noise, and a replay that gives that answer is not blamed.
- **sampled requests** (temperature > 0): two samples differ by design, so the answer is judged as a
  distribution: the recorded answer's tokens are scored under a service (`score_answer`: the prompt
  rendered by the service's own /tokenize, the answer's tokens appended, one `/v1/completions` with
  `prompt_logprobs: 0` and `max_tokens: 1`), giving the log-likelihood each service assigns to the same
  tokens. The replay compares the recorded service's scores with the new one's (`workbench.replay.parity`).

Fields are vLLM 0.32's (vllm/entrypoints/openai/chat_completion/protocol.py, completion/protocol.py,
vllm/entrypoints/serve/tokenize): `return_tokens_as_token_ids` keys every token "token_id:<id>", so two
tokens that print alike are never confused.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import aiohttp

from workbench.replay.assemble import answer_from_body
from workbench.serving.load.trace import Alternate, Answer, Endpoint, LogprobsSource, Score, TraceRecord

TIMEOUT = aiohttp.ClientTimeout(total=600.0, sock_connect=30.0)


def wants_shadow(record_body: Mapping[str, Any], greedy: bool) -> bool:
    """A greedy request whose client did not ask for logprobs itself."""
    return greedy and not record_body.get("logprobs") and not record_body.get("top_logprobs")


def logprobs_fields(endpoint: Endpoint, top_k: int) -> dict[str, Any]:
    """What a request adds to get the chosen tokens' logprobs, the top-k runners-up, and token ids as keys."""
    if endpoint is Endpoint.CHAT:
        return {"logprobs": True, "top_logprobs": top_k, "return_tokens_as_token_ids": True}
    return {"logprobs": top_k, "return_tokens_as_token_ids": True}


def shadow_body(endpoint: Endpoint, body: Mapping[str, Any], top_k: int) -> dict[str, Any]:
    """The request asked again, whole (not streamed), with logprobs."""
    shadow = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    return shadow | logprobs_fields(endpoint, top_k) | {"stream": False}


async def post_json(
    session: aiohttp.ClientSession, url: str, body: Mapping[str, Any]
) -> tuple[int, bytes, float, float]:
    started = time.perf_counter()
    async with session.post(url, json=body) as response:
        data = await response.read()
        return response.status, data, started, time.perf_counter()


async def ask_logprobs(
    session: aiohttp.ClientSession, base_url: str, endpoint: Endpoint, body: Mapping[str, Any], top_k: int
) -> Answer:
    """The shadow answer (see the module docstring); a failure comes back as an Answer with `error`."""
    try:
        status, data, started, ended = await post_json(
            session, base_url + endpoint.path, shadow_body(endpoint, body, top_k)
        )
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        return Answer(status=0, error=f"{type(exc).__name__}: {exc}"[:300])
    return answer_from_body(endpoint, status, data, started, ended, LogprobsSource.SHADOW)


def attach_shadow(answer: Answer, shadow: Answer) -> tuple[Answer, int]:
    """`answer` with the shadow's logprobs on every choice the shadow answered alike; and how many did not."""
    if not shadow.ok or len(shadow.choices) != len(answer.choices):
        return answer, len(answer.choices)
    choices, mismatched = [], 0
    for mine, theirs in zip(answer.choices, shadow.choices, strict=True):
        same = mine.text == theirs.text and mine.tool_calls == theirs.tool_calls
        if same:
            choices.append(replace(mine, logprobs=theirs.logprobs) if theirs.logprobs else mine)
        else:  # kept as the configuration's other answer to this request
            choices.append(replace(mine, alternate=Alternate(theirs.text, theirs.tool_calls, theirs.logprobs)))
        mismatched += not same
    attached = any(c.logprobs for c in choices)
    return replace(answer, choices=tuple(choices), logprobs_source=LogprobsSource.SHADOW if attached else None), (
        mismatched
    )


# -- scoring an answer (sampled requests) -------------------------------------------------------------


async def _token_ids(session: aiohttp.ClientSession, base_url: str, body: Mapping[str, Any]) -> list[int]:
    status, data, _, _ = await post_json(session, base_url + "/tokenize", body)
    if status != 200:
        raise ValueError(f"/tokenize answered HTTP {status}: {data[:200]!r}")
    return [int(t) for t in json.loads(data)["tokens"]]


def _prompt_tokenize_body(record: TraceRecord, model: str) -> dict[str, Any]:
    body = record.body
    if record.endpoint is Endpoint.COMPLETIONS:
        return {"model": model, "prompt": body.get("prompt", "")}
    request = {"model": model, "messages": body.get("messages", []), "add_generation_prompt": True}
    for key in ("tools", "chat_template_kwargs", "add_generation_prompt", "continue_final_message"):
        if key in body:
            request[key] = body[key]
    return request


async def _score_ids(
    session: aiohttp.ClientSession, base_url: str, model: str, record: TraceRecord, answer: list[int]
) -> Score:
    """Each of `answer`'s tokens' logprob after the record's prompt, as rendered by the service itself."""
    prompt = await _token_ids(session, base_url, _prompt_tokenize_body(record, model))
    body = {"model": model, "prompt": prompt + answer, "max_tokens": 1, "prompt_logprobs": 0, "temperature": 0.0}
    status, data, _, _ = await post_json(session, base_url + "/v1/completions", body)
    if status != 200:
        raise ValueError(f"/v1/completions (prompt_logprobs) answered HTTP {status}: {data[:200]!r}")
    rows = json.loads(data)["choices"][0]["prompt_logprobs"][len(prompt) :]
    return Score(tuple(answer), tuple(_float(row[str(t)]["logprob"]) for t, row in zip(answer, rows, strict=True)))


def _float(value: Any) -> float:
    return float("nan") if value is None else float(value)


async def score_answer(
    session: aiohttp.ClientSession, base_url: str, model: str, record: TraceRecord, text: str
) -> Score | None:
    """The logprob a service gives each token of `text` as the answer to `record` (None: nothing to score)."""
    if not text or (record.endpoint is Endpoint.COMPLETIONS and not isinstance(record.body.get("prompt"), str)):
        return None
    answer = await _token_ids(session, base_url, {"model": model, "prompt": text, "add_special_tokens": False})
    return await _score_ids(session, base_url, model, record, answer) if answer else None


async def rescore(
    session: aiohttp.ClientSession, base_url: str, model: str, record: TraceRecord, score: Score
) -> Score:
    """The same token ids as `score`, scored under another service (the replay side of a sampled request)."""
    return await _score_ids(session, base_url, model, record, list(score.token_ids))


__all__ = [
    "TIMEOUT",
    "ask_logprobs",
    "attach_shadow",
    "logprobs_fields",
    "rescore",
    "score_answer",
    "shadow_body",
    "wants_shadow",
]
