"""Greedy generations with per-token logprobs from one side's server, saved as each request returns.

The prompts go as token ids (decided once for the whole run, so both sides condition on exactly the same
tokens) in groups of `batch`: one `/v1/completions` request per group, whose prompt is the list of the
group's token lists, so the group's sequences enter the engine together. That is the batch composition
a batch-invariance twin varies (batch 1: each prompt alone; batch 16: sixteen at once), and it is fixed
by the prompt order, so a repeat or a resumed run batches the same prompts together. The engine still
caps a batch at its `max_num_seqs`; the run records both.

Request fields (vLLM 0.32's completions API, vllm/entrypoints/openai/completion/protocol.py):
temperature 0 and `ignore_eos` (both sides generate exactly `max_tokens`, so an early stop cannot hide a
divergence), `logprobs: k` (the chosen token's logprob and the top-k runners-up per position),
`return_tokens_as_token_ids` (runners-up keyed "token_id:<id>", not by text that two tokens can share),
`return_token_ids` (the generated ids), and a fixed `seed`.

Each finished group is appended to the side's `JsonlLog`, one line per prompt; a killed run resumes by
skipping the groups whose prompts are all there (a group cut short, or one whose request failed, is sent
again whole, so its batch stays the same).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpx
from tqdm.auto import tqdm

from workbench.errors import WorkbenchError
from workbench.evaluate.endpoints import RequestFailed, post
from workbench.results.jsonl import JsonlLog
from workbench.twin.generation import Generation

MAX_TOP_LOGPROBS = 20  # vLLM's default --max-logprobs


@dataclass(frozen=True)
class CollectSettings:
    max_tokens: int
    top_logprobs: int = 5
    batch: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise WorkbenchError(f"--max-tokens {self.max_tokens}: generate at least one token")
        if not 1 <= self.top_logprobs <= MAX_TOP_LOGPROBS:
            raise WorkbenchError(
                f"--top-logprobs {self.top_logprobs}: choose 1 to {MAX_TOP_LOGPROBS} (vLLM's --max-logprobs default); "
                "the runners-up tell a near tie from a real divergence"
            )
        if self.batch < 1:
            raise WorkbenchError(f"--batch {self.batch}: send at least one prompt per request")


def request_body(model: str, prompts: Sequence[Sequence[int]], settings: CollectSettings) -> dict:
    return {
        "model": model,
        "prompt": [list(p) for p in prompts],
        "max_tokens": settings.max_tokens,
        "temperature": 0.0,
        "seed": settings.seed,
        "ignore_eos": True,
        "logprobs": settings.top_logprobs,
        "return_tokens_as_token_ids": True,
        "return_token_ids": True,
    }


def _token_id(key: str) -> int:
    """'token_id:1371' -> 1371 (vLLM's return_tokens_as_token_ids form)."""
    head, sep, tail = key.partition(":")
    if head != "token_id" or not sep:
        raise ValueError(f"runner-up {key!r} is not 'token_id:<id>'; the server ignored return_tokens_as_token_ids")
    return int(tail)


def parse_choice(choice: dict, prompt: int, group: int) -> Generation:
    """One choice of a completions answer -> Generation (ValueError when the server left fields out)."""
    ids = choice.get("token_ids")
    logprobs = choice.get("logprobs") or {}
    chosen, runners = logprobs.get("token_logprobs"), logprobs.get("top_logprobs")
    if ids is None or chosen is None or runners is None:
        raise ValueError("the answer lacks token_ids or logprobs (vLLM's return_token_ids and logprobs fields)")
    if not len(ids) == len(chosen) == len(runners):
        raise ValueError(f"{len(ids)} token ids but {len(chosen)} logprobs and {len(runners)} runner-up lists")
    top = tuple({_token_id(k): float(v) for k, v in (entry or {}).items()} for entry in runners)
    return Generation(
        prompt, group, tuple(int(i) for i in ids), tuple(float(v) for v in chosen), top, choice.get("finish_reason")
    )


def _send(client: httpx.Client, url: str, model: str, prompts, indices, group, settings) -> list[Generation]:
    """One group's request; a request the server refuses becomes failed generations, not an exception."""
    try:
        answer = post(client, url, "/v1/completions", request_body(model, prompts, settings))
        choices = sorted(answer["choices"], key=lambda c: c["index"])
        if len(choices) != len(indices):
            raise ValueError(f"{len(choices)} choices for {len(indices)} prompts")
        return [parse_choice(c, i, group) for c, i in zip(choices, indices, strict=True)]
    except (RequestFailed, ValueError, KeyError, TypeError) as exc:
        return [Generation(i, group, (), (), (), None, f"{type(exc).__name__}: {exc}"[:300]) for i in indices]


def collect(
    url: str,
    model: str,
    prompts: Sequence[Sequence[int]],
    settings: CollectSettings,
    log: JsonlLog,
    *,
    label: str = "",
    progress: bool = True,
) -> list[Generation]:
    """Every prompt's generation on the server at `url`: read from `log`, the missing groups sent and appended."""
    # failed requests are sent again on a resume (a later line of the same prompt wins)
    done = {g.prompt: g for g in log.read(Generation.from_dict).records if not g.failed}
    groups = [
        list(range(start, min(start + settings.batch, len(prompts))))
        for start in range(0, len(prompts), settings.batch)
    ]
    bar = tqdm(total=len(prompts), desc=f"twin {label}".strip(), unit="prompt", disable=not progress)
    with bar, httpx.Client() as client:
        for number, indices in enumerate(groups):
            if all(i in done for i in indices):
                bar.update(len(indices))
                continue
            for generation in _send(client, url, model, [prompts[i] for i in indices], indices, number, settings):
                if generation.prompt not in done:
                    log.append(generation.to_dict())
                    done[generation.prompt] = generation
            bar.update(len(indices))
    return [done[i] for i in range(len(prompts))]


__all__ = ["CollectSettings", "collect", "parse_choice", "request_body"]
