"""One greedy generation as a twin run records it: the tokens, their logprobs and the runners-up.

A line of a side's log (`<side>.jsonl`, a `JsonlLog`): written when its request returns, read back when a
killed run resumes. Token ids, never text: two tokenizers or detokenizers cannot make two different
tokens look alike (`return_tokens_as_token_ids`, vLLM's completions API).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Generation:
    """Side's answer to one prompt. `top[i]`: token id -> logprob of the runners-up at position i
    (the chosen token among them); empty when the request failed (`error`)."""

    prompt: int  # index of the prompt in the run's prompt list
    group: int  # index of the request it was sent in: prompts of one group ran as one batch
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]  # of each chosen token
    top: tuple[dict[int, float], ...]
    finish_reason: str | None = None
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None

    def logprob_of(self, position: int, token: int) -> float | None:
        """This side's logprob of `token` at `position`, when it was among the runners-up it returned."""
        if position < len(self.token_ids) and self.token_ids[position] == token:
            return self.logprobs[position]
        return self.top[position].get(token) if position < len(self.top) else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "group": self.group,
            "token_ids": list(self.token_ids),
            "logprobs": list(self.logprobs),
            "top": [{str(k): v for k, v in t.items()} for t in self.top],
            "finish_reason": self.finish_reason,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Generation:
        return cls(
            prompt=int(raw["prompt"]),
            group=int(raw["group"]),
            token_ids=tuple(int(t) for t in raw["token_ids"]),
            logprobs=tuple(float(v) for v in raw["logprobs"]),
            top=tuple({int(k): float(v) for k, v in t.items()} for t in raw["top"]),
            finish_reason=raw.get("finish_reason"),
            error=raw.get("error"),
        )
