"""Prompts of recorded lengths that share a prefix wherever a trace's hash ids repeat.

Length-only traces (Mooncake, AISBench, GuideLLM's WEKA) record for each request its input length and the
ids of its prompt's blocks: `block_size` tokens each (512 in Mooncake's FAST'25 traces), the last one
partial; two requests with the same first k hash ids had the same first k blocks, which is what a prefix
cache reuses. The prompt of a request is rebuilt here block by block: the tokens of hash id h are drawn once
(seeded by h) and reused wherever h appears again, so the replay hits the prefix cache where the traced
service did; a partial last block takes the first tokens of its full block, as vLLM's `timed_trace` data
set does (vllm/benchmarks/datasets/datasets.py, class TimedTrace, vLLM 0.32).

Tokens are ' word' tokens of the model's own tokenizer that decode and re-encode as themselves
(`workbench.serving.load.workload`), so the prompt's length is exact; it is checked by re-encoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.errors import WorkbenchError
from workbench.serving.load.workload import word_token_ids


@dataclass
class BlockPrompts:
    """Builds prompts from hash ids with one tokenizer; remembers every block it drew (one per hash id)."""

    tokenizer: Any
    block_size: int
    seed: int = 0
    words: np.ndarray = field(init=False)
    blocks: dict[int, list[int]] = field(default_factory=dict)
    specials: int = field(init=False)

    def __post_init__(self) -> None:
        if self.block_size < 1:
            raise WorkbenchError(f"--block-size {self.block_size}: a hash id stands for at least one token")
        self.words = word_token_ids(self.tokenizer, 4096, np.random.default_rng(self.seed))
        added = getattr(self.tokenizer, "num_special_tokens_to_add", None)
        self.specials = added() if callable(added) else 0

    def _block(self, hash_id: int) -> list[int]:
        if hash_id not in self.blocks:
            magnitude = abs(int(hash_id))  # negative keys: filler blocks no trace id can name
            rng = np.random.default_rng([self.seed, int(hash_id < 0), magnitude >> 32, magnitude & 0xFFFFFFFF])
            self.blocks[hash_id] = [int(t) for t in rng.choice(self.words, size=self.block_size)]
        return self.blocks[hash_id]

    def token_ids(self, hash_ids: Sequence[int], input_length: int, fresh_key: int) -> list[int]:
        """`input_length` tokens minus the special ones: the blocks of `hash_ids`, then fresh blocks if short."""
        wanted = input_length - self.specials
        if wanted < 1:
            raise WorkbenchError(f"input length {input_length} leaves no room after {self.specials} special tokens")
        ids: list[int] = []
        for hash_id in hash_ids:
            ids += self._block(int(hash_id))[: wanted - len(ids)]
            if len(ids) >= wanted:
                return ids
        extra = 0
        while len(ids) < wanted:  # a trace whose hash ids cover fewer tokens than its length: unshared filler
            ids += self._block(-(fresh_key * 4096 + extra) - 1)[: wanted - len(ids)]
            extra += 1
        return ids

    def prompt(self, hash_ids: Sequence[int], input_length: int, fresh_key: int) -> str:
        ids = self.token_ids(hash_ids, input_length, fresh_key)
        text = self.tokenizer.decode(ids)
        counted = len(self.tokenizer.encode(text, add_special_tokens=True))
        if counted != input_length:
            raise WorkbenchError(
                f"built a prompt of {counted} tokens instead of {input_length}: this tokenizer merges ' word' tokens "
                "across words; pass another --seed or report the tokenizer"
            )
        return text


__all__ = ["BlockPrompts"]
