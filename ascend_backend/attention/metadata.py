"""What one attention step needs to know about its batch: state, lengths, block tables, slots.

A model executor builds `AttentionMetadata` once per forward step from plain Python lists it gets
from the block manager (block ids per sequence, how many tokens each sequence has and how many of
them are new this step) and hands the same object to every layer. Every layer then writes its new
keys/values to `slot_mapping` and reads the paged cache through `block_tables`.

The four states are the cases vllm-ascend dispatches on (`AscendAttentionState`); each has its own
NPU kernel, and the native path mirrors them:

    PrefillNoCache   every sequence is new (query_len == seq_len): attention over the fresh K/V,
                     causal; the cache is only written.
    PrefillCacheHit  prefills whose prefix is already cached (prefix caching): the new tokens
                     attend to cached + new tokens, read back from the paged cache.
    DecodeOnly       every sequence adds one token: paged decode attention.
    ChunkedPrefill   a mix of decodes and prefill chunks in one batch (chunked prefill /
                     "splitfuse"); the general case.

Index arithmetic, worked once (block_size = 4):

    sequence 0: block table [7, 2], seq_len 6, query_len 6   (a fresh prompt of 6 tokens)
    sequence 1: block table [5],    seq_len 3, query_len 1   (decoding its 3rd token)

    new tokens' positions:  seq 0 -> 0 1 2 3 4 5      seq 1 -> 2
    block of a position:    block_table[pos // 4]       slot = block * 4 + pos % 4
    slot_mapping          = [28, 29, 30, 31, 8, 9, 22]
                              (block 7, offsets 0-3) (block 2, 0-1) (block 5, offset 2)
    query_start_loc       = [0, 6, 7]       block_tables = [[7, 2], [5, 0]]  (0 = padding, never read)
    state                 = ChunkedPrefill  (a prefill and a decode in one batch)
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

import torch


class AttentionState(enum.Enum):
    """The attention case of a batch; names follow vllm-ascend's AscendAttentionState."""

    PrefillNoCache = "prefill_no_cache"
    PrefillCacheHit = "prefill_cache_hit"
    DecodeOnly = "decode_only"
    ChunkedPrefill = "chunked_prefill"


def classify_state(
    query_lens: Sequence[int], seq_lens: Sequence[int], *, chunked_prefill: bool = True
) -> AttentionState:
    """The state vllm-ascend's model runner would pick for these lengths.

    Same order of tests as the runner: all-new prompts first (so a batch of one-token prompts is a
    prefill, not a decode), then all-decode; a remaining mix is ChunkedPrefill when the scheduler
    chunks prefills and PrefillCacheHit when it does not (then a batch is prefills only).
    """
    if list(query_lens) == list(seq_lens):
        return AttentionState.PrefillNoCache
    if all(q == 1 for q in query_lens):
        return AttentionState.DecodeOnly
    return AttentionState.ChunkedPrefill if chunked_prefill else AttentionState.PrefillCacheHit


@dataclass(frozen=True, eq=False)
class AttentionMetadata:
    """One step's batch description, shared by all layers. Build it with `build_attention_metadata`.

    `eq=False`: it holds tensors, and identity is the only equality that means anything for them.
    """

    state: AttentionState
    block_size: int
    # Host copies of the lengths: native kernels plan their loops from them and CANN kernels take
    # lengths as host tensors; keeping them avoids a device->host sync per layer.
    query_lens: tuple[int, ...]  # new tokens per sequence this step
    seq_lens: tuple[int, ...]  # tokens per sequence after this step (cached + new)
    # Lengths as int32 tensors stay on the host, where CANN kernels want them; the rest lives on
    # the device the kernels run on.
    query_lens_tensor: torch.Tensor  # [num_seqs] int32, host
    seq_lens_tensor: torch.Tensor  # [num_seqs] int32, host
    query_start_loc: torch.Tensor  # [num_seqs + 1] int32, cumulative query_lens starting at 0
    block_tables: torch.Tensor  # [num_seqs, max_blocks] int32, rows padded with block 0
    slot_mapping: torch.Tensor  # [num_tokens] int32, cache slot of each new token

    @property
    def num_seqs(self) -> int:
        return len(self.seq_lens)

    @property
    def num_tokens(self) -> int:
        return sum(self.query_lens)

    @property
    def context_lens(self) -> tuple[int, ...]:
        """Tokens per sequence already in the cache before this step."""
        return tuple(s - q for s, q in zip(self.seq_lens, self.query_lens))


def compute_slot_mapping(
    block_tables: Sequence[Sequence[int]], seq_lens: Sequence[int], query_lens: Sequence[int], block_size: int
) -> list[int]:
    """Cache slot of every new token, sequences back to back (see the worked example above)."""
    slots: list[int] = []
    for table, seq_len, query_len in zip(block_tables, seq_lens, query_lens):
        for pos in range(seq_len - query_len, seq_len):
            slots.append(table[pos // block_size] * block_size + pos % block_size)
    return slots


def build_attention_metadata(
    block_tables: Sequence[Sequence[int]],
    seq_lens: Sequence[int],
    query_lens: Sequence[int],
    block_size: int,
    *,
    chunked_prefill: bool = True,
    state: AttentionState | None = None,
    device: torch.device | str = "cpu",
) -> AttentionMetadata:
    """Metadata from plain lists, validated. `state=None` classifies it as vllm-ascend does; an
    explicit state is checked against the lengths (DecodeOnly needs one new token per sequence,
    PrefillNoCache needs query_len == seq_len)."""
    block_tables = [list(row) for row in block_tables]
    seq_lens, query_lens = [int(s) for s in seq_lens], [int(q) for q in query_lens]
    _validate(block_tables, seq_lens, query_lens, block_size)
    chosen = classify_state(query_lens, seq_lens, chunked_prefill=chunked_prefill) if state is None else state
    _check_state_fits(chosen, query_lens, seq_lens)

    max_blocks = max(len(row) for row in block_tables)
    padded = [row + [0] * (max_blocks - len(row)) for row in block_tables]
    starts = [0]
    for q in query_lens:
        starts.append(starts[-1] + q)

    def int32(values: Sequence[int] | Sequence[Sequence[int]], where: torch.device | str = device) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.int32, device=where)

    return AttentionMetadata(
        state=chosen,
        block_size=block_size,
        query_lens=tuple(query_lens),
        seq_lens=tuple(seq_lens),
        query_lens_tensor=int32(query_lens, "cpu"),
        seq_lens_tensor=int32(seq_lens, "cpu"),
        query_start_loc=int32(starts),
        block_tables=int32(padded),
        slot_mapping=int32(compute_slot_mapping(block_tables, seq_lens, query_lens, block_size)),
    )


def _validate(block_tables: list[list[int]], seq_lens: list[int], query_lens: list[int], block_size: int) -> None:
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if not seq_lens:
        raise ValueError("attention metadata needs at least one sequence (seq_lens is empty)")
    if not len(block_tables) == len(seq_lens) == len(query_lens):
        raise ValueError(
            f"block_tables, seq_lens and query_lens must have one entry per sequence; got "
            f"{len(block_tables)}, {len(seq_lens)} and {len(query_lens)}"
        )
    for i, (table, seq_len, query_len) in enumerate(zip(block_tables, seq_lens, query_lens)):
        if not 1 <= query_len <= seq_len:
            raise ValueError(
                f"sequence {i}: query_len {query_len} must be between 1 and seq_len {seq_len} "
                "(seq_len counts cached plus new tokens)"
            )
        if len(table) * block_size < seq_len:
            raise ValueError(
                f"sequence {i}: {len(table)} blocks of {block_size} slots cannot hold seq_len {seq_len}; "
                f"allocate at least {-(-seq_len // block_size)} blocks before building the metadata"
            )
        if any(block < 0 for block in table):
            raise ValueError(f"sequence {i}: block ids must be >= 0, got {table}")


def _check_state_fits(state: AttentionState, query_lens: list[int], seq_lens: list[int]) -> None:
    if state is AttentionState.DecodeOnly and any(q != 1 for q in query_lens):
        raise ValueError(f"state DecodeOnly needs query_len 1 for every sequence, got {query_lens}")
    if state is AttentionState.PrefillNoCache and query_lens != seq_lens:
        raise ValueError(
            f"state PrefillNoCache needs query_len == seq_len (nothing cached), got query_lens {query_lens} "
            f"and seq_lens {seq_lens}"
        )
