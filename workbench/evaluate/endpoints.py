"""The requests accuracy work sends to an OpenAI-compatible server, as token ids in and token ids out.

Every prompt goes to `/v1/completions` as a list of token ids (the OpenAI API accepts token arrays), so
the NLL request and the greedy request condition on exactly the same tokens, and a chat prompt is the
server's own chat template rendered once. Token ids come from the server's tokenizer (`/tokenize`, which
vLLM and vllm-ascend serve; chat through its `messages` form) or, for a server without it, from a local
tokenizer directory. The vLLM extensions used where available:

- `prompt_logprobs: 0` -> `choices[i].prompt_logprobs`: one entry per prompt token, the first null,
  each `{"<token id>": {"logprob": float, "rank": int, "decoded_token": str}}` holding at least the
  prompt's own token (vllm/entrypoints/openai/completion/protocol.py, `CompletionResponseChoice`, v0.32.0;
  -inf is sent as -9999.0 by `clamp_prompt_logprobs`);
- `return_token_ids: true` -> `choices[i].token_ids`: the generated ids.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from workbench.errors import WorkbenchError
from workbench.evaluate.datasets import Problem

REQUEST_TIMEOUT_S = 600.0  # a long greedy completion on a 2-core CPU server takes minutes


class RequestFailed(Exception):
    """The server answered this one request with an error (the problem is recorded as failed, the run goes on)."""


@dataclass(frozen=True)
class Completion:
    token_ids: tuple[int, ...]
    text: str
    finish_reason: str | None
    token_ids_from_text: bool  # True: the server gave no ids, they were re-tokenised from the text


def post(client: httpx.Client, url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST JSON; a 4xx/5xx becomes RequestFailed with the server's message, a dead server a WorkbenchError."""
    try:
        response = client.post(f"{url}{path}", json=body, timeout=REQUEST_TIMEOUT_S)
    except httpx.TransportError as exc:
        raise WorkbenchError(
            f"{url}{path}: the server stopped answering ({type(exc).__name__}); check it is still running, then "
            "rerun the same command: results already written are kept and skipped"
        ) from None
    if response.status_code >= 400:
        raise RequestFailed(f"HTTP {response.status_code} from {path}: {_error_text(response)}")
    try:
        return response.json()
    except json.JSONDecodeError:
        raise RequestFailed(f"{path} answered with something that is not JSON: {response.text[:200]!r}") from None


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    error = body.get("error", body) if isinstance(body, dict) else body
    return str(error.get("message", error) if isinstance(error, dict) else error)[:300]


class ServerTokenizer:
    """Token ids from the server's own `/tokenize` (vLLM, vllm-ascend): exactly what the engine sees."""

    def __init__(self, client: httpx.Client, url: str, model: str):
        self.client, self.url, self.model = client, url, model
        self.max_model_len: int | None = None  # from the first answer: prompt + completion must fit

    def _tokens(self, body: dict[str, Any]) -> tuple[int, ...]:
        answer = post(self.client, self.url, "/tokenize", {"model": self.model, **body})
        self.max_model_len = answer.get("max_model_len") or self.max_model_len
        return tuple(answer["tokens"])

    def encode(self, text: str, add_special_tokens: bool) -> tuple[int, ...]:
        return self._tokens({"prompt": text, "add_special_tokens": add_special_tokens})

    def encode_chat(self, problem: Problem) -> tuple[int, ...]:
        messages = [{"role": m.role, "content": m.content} for m in problem.messages]
        return self._tokens({"messages": messages, "add_generation_prompt": True})


class LocalTokenizer:
    """Token ids from a tokenizer directory (transformers), for servers without `/tokenize`."""

    def __init__(self, directory: Path):
        from workbench.serving.load.workload import load_tokenizer

        self.tokenizer = load_tokenizer(directory)
        self.max_model_len: int | None = None  # unknown: the server rejects a request that does not fit

    def encode(self, text: str, add_special_tokens: bool) -> tuple[int, ...]:
        return tuple(self.tokenizer.encode(text, add_special_tokens=add_special_tokens))

    def encode_chat(self, problem: Problem) -> tuple[int, ...]:
        messages = [{"role": m.role, "content": m.content} for m in problem.messages]
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        # transformers 5 answers a BatchEncoding (a Mapping, not a dict); iterating it would give its keys
        return tuple(ids["input_ids"] if isinstance(ids, Mapping) else ids)


def has_tokenize_endpoint(client: httpx.Client, url: str, model: str) -> bool:
    try:
        response = client.post(f"{url}/tokenize", json={"model": model, "prompt": "a"}, timeout=30.0)
    except httpx.TransportError:
        return False
    return response.status_code == 200 and "tokens" in response.json()


def prompt_logprobs(client: httpx.Client, url: str, model: str, token_ids: Sequence[int]) -> list[Any]:
    """The per-position prompt logprob entries for `token_ids` (one generated token is discarded)."""
    body = {"model": model, "prompt": list(token_ids), "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 0}
    choice = post(client, url, "/v1/completions", body)["choices"][0]
    entries = choice.get("prompt_logprobs")
    if entries is None:
        raise RequestFailed("the server returned no prompt_logprobs (a vLLM extension); NLL needs a vLLM server")
    return entries


def greedy_completion(
    client: httpx.Client,
    url: str,
    model: str,
    token_ids: Sequence[int],
    max_tokens: int,
    stop: Sequence[str],
    tokenizer: ServerTokenizer | LocalTokenizer,
) -> Completion:
    """Temperature-0 completion of `token_ids`; the generated ids from the server, else re-tokenised text."""
    body = {
        "model": model,
        "prompt": list(token_ids),
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "seed": 0,
        "stop": list(stop),
        "return_token_ids": True,
    }
    choice = post(client, url, "/v1/completions", body)["choices"][0]
    text = choice.get("text") or ""
    ids = choice.get("token_ids")
    if ids is None:
        return Completion(tokenizer.encode(text, add_special_tokens=False), text, choice.get("finish_reason"), True)
    return Completion(tuple(ids), text, choice.get("finish_reason"), False)
