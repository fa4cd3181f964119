"""Native (PyTorch) attention over the paged KV cache: the reference every NPU kernel is held to.

Registered as the `native` implementation of each attention op (the ops and their signatures are
declared in `attention/ops.py`); runs on any device, and on CPU it is also the serving path, so it has
to be fast as well as exact:

- Logits, softmax and the weighted sum of values are computed in float32 for every input dtype
  (fp16/bf16 tiles are upcast after they are gathered), as vLLM's kernels do; outputs are cast back.
- Decode on CPU, when the call is big enough, runs `fused_decode`: the same maths compiled by
  Inductor into one loop that reads K/V straight from the blocks. Otherwise (small calls, other
  devices, no C++ compiler) the eager tiles below serve.
- Eager decode never materialises a dense copy of the whole batch's K/V. Sequences are sorted by length
  and cut into tiles of a few MiB; each tile gathers its blocks with one `index_select` (the block
  table may be shuffled and non-contiguous) and runs two batched matmuls per KV head while the tile is still in
  cache. A sequence too long for one tile is split over several, merged with log-sum-exp weights.
- Prefill paths compute per sequence with an explicit causal mask, in query-row chunks so a long
  prompt never needs a [heads, q, kv] score tensor of gigabytes.

Shapes: q/k/v rows are tokens packed sequence after sequence, `[num_tokens, heads, head_size]`;
lengths arrive as int32 host tensors (the form CANN kernels take) and are read with `.tolist()`.

One algorithm for every cache layout: the registered ops check their arguments against the backend's
layout (`layout.py`) and call layout-free cores (`write_slots`, `decode_paged`, `attend_paged`) that take
the key and value caches as two `[num_blocks, block_size, kv_heads, head_size]` views with any strides.
The backend passes `kv_cache[0]` and `kv_cache[1]`; `vllm_cpu_layout` passes permuted views of vLLM's
CPU cache, so the vLLM plugin's native path runs this same code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ascend_backend.attention import fused_decode
from ascend_backend.attention.layout import KVCacheDims
from ascend_backend.registry import REGISTRY, Backend

# Bytes of float32 keys one decode tile gathers. Small enough that the tile's K and V stay in the
# CPU caches between the gather and the two matmuls; large enough that per-tile Python overhead
# is a small share (see benchmarks/bench_paged_decode.py).
DECODE_TILE_BYTES = 4 * 2**20
# Bytes of float32 scores one prefill chunk may hold ([heads, rows, kv_len]).
PREFILL_SCORE_BYTES = 64 * 2**20


# --------------------------------------------------------------------------------------------- checks
def _check_heads(query: torch.Tensor, dims: KVCacheDims, what: str = "query") -> int:
    """Queries per KV head (1 = MHA, num_heads = MQA); raises on shapes that cannot pair up."""
    if query.dim() != 3:
        raise ValueError(f"{what} must be [num_tokens, num_heads, head_size], got shape {tuple(query.shape)}")
    num_heads, head_size = query.shape[1], query.shape[2]
    if head_size != dims.head_size:
        raise ValueError(f"{what} head_size {head_size} does not match the KV cache head_size {dims.head_size}")
    if num_heads % dims.num_kv_heads:
        raise ValueError(
            f"{what} has {num_heads} heads, not a multiple of the cache's {dims.num_kv_heads} KV heads "
            "(GQA needs num_heads = k * num_kv_heads)"
        )
    return num_heads // dims.num_kv_heads


def _check_lengths(lens: list[int], block_tables: torch.Tensor, dims: KVCacheDims, what: str) -> None:
    capacity = block_tables.shape[1] * dims.block_size
    if block_tables.dim() != 2 or block_tables.shape[0] != len(lens):
        raise ValueError(
            f"block_tables must be [num_seqs, max_blocks] with one row per sequence; got shape "
            f"{tuple(block_tables.shape)} for {len(lens)} sequences"
        )
    bad = [(i, n) for i, n in enumerate(lens) if not 1 <= n <= capacity]
    if bad:
        i, n = bad[0]
        raise ValueError(
            f"{what}[{i}] = {n}: every sequence needs between 1 and max_blocks * block_size = {capacity} "
            "tokens in the cache"
        )


# --------------------------------------------------------------------------------------------- cache
@REGISTRY.register("reshape_and_cache", Backend.NATIVE)
def reshape_and_cache_native(key, value, kv_cache, slot_mapping):
    dims = KVCacheDims.of(kv_cache)
    expected = (slot_mapping.shape[0], dims.num_kv_heads, dims.head_size)
    for name, tensor in (("key", key), ("value", value)):
        if tuple(tensor.shape) != expected:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)}; expected {expected} (one row per slot)")
        if tensor.dtype != kv_cache.dtype:
            raise ValueError(f"{name} is {tensor.dtype} but the KV cache is {kv_cache.dtype}; cast it first")
    if not kv_cache.is_contiguous():
        raise ValueError("kv_cache must be contiguous (allocate it with allocate_kv_cache)")
    write_slots(key, value, kv_cache[0], kv_cache[1], slot_mapping.to(device=kv_cache.device, dtype=torch.long))


def write_slots(
    key: torch.Tensor,  # [T, kv_heads, head_size], in the cache dtype
    value: torch.Tensor,  # [T, kv_heads, head_size]
    key_cache: torch.Tensor,  # [num_blocks, block_size, kv_heads, head_size], any strides; written in place
    value_cache: torch.Tensor,  # same shape as key_cache
    slots: torch.Tensor,  # [T] int64, every slot >= 0 (callers drop padding first)
) -> None:
    """Token t's key and value go to block slots[t] // block_size, offset slots[t] % block_size."""
    block_size = key_cache.shape[1]
    blocks, offsets = slots // block_size, slots % block_size
    key_cache[blocks, offsets] = key
    value_cache[blocks, offsets] = value


# --------------------------------------------------------------------------------------------- decode
@dataclass(frozen=True)
class DecodeTile:
    """Sequences decoded together, over blocks [first_block, first_block + num_blocks) of each."""

    seqs: tuple[int, ...]
    first_block: int
    num_blocks: int


def plan_decode_tiles(lens: list[int], block_size: int, blocks_per_tile: int) -> list[list[DecodeTile]]:
    """Group sequences into tiles of at most `blocks_per_tile` blocks (counting padding).

    Returns groups: each group's tiles cover the same sequences and are merged by log-sum-exp; a
    group has more than one tile only when a single sequence is longer than a tile. Sorting by length
    first keeps padding (blocks gathered only to be masked) small.

        lens [300, 40, 50], block_size 32, blocks_per_tile 8
        -> [[seqs (1, 2), blocks 0-1]], [[seq 0, blocks 0-7], [seq 0, blocks 8-9]]
    """
    groups: list[list[DecodeTile]] = []
    current: list[int] = []
    current_blocks = 0
    for seq in sorted(range(len(lens)), key=lens.__getitem__):
        blocks = -(-lens[seq] // block_size)
        if current and (len(current) + 1) * blocks > blocks_per_tile:
            groups.append([DecodeTile(tuple(current), 0, current_blocks)])
            current = []
        if blocks > blocks_per_tile:
            groups.append(
                [
                    DecodeTile((seq,), start, min(blocks_per_tile, blocks - start))
                    for start in range(0, blocks, blocks_per_tile)
                ]
            )
            continue
        current.append(seq)
        current_blocks = blocks
    if current:
        groups.append([DecodeTile(tuple(current), 0, current_blocks)])
    return groups


def _attend_tile(
    query: torch.Tensor,  # [c, kv_heads, group, head_size] float32, already multiplied by the scale
    keys: torch.Tensor,  # [c, tokens, kv_heads, head_size] float32
    values: torch.Tensor,  # [c, tokens, kv_heads, head_size] float32
    pad: torch.Tensor | None,  # [c, 1, tokens] bool, True where a slot is past the context
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of each sequence's queries over its tile, with the log-sum-exp for merging.

    One batched matmul per KV head scores all queries sharing it: keys[:, :, h] is a strided
    [c, tokens, head_size] view of the gathered tile (BLAS takes the row stride, no copy), and the
    long token axis keeps the matmuls efficient even with only a few queries per head.
    Returns out [c, kv_heads, group, head_size] (normalised) and lse [c, kv_heads, group].
    """
    c, kv_heads, group, head_size = query.shape
    out = torch.empty(c, kv_heads, group, head_size, dtype=torch.float32, device=query.device)
    lse = torch.empty(c, kv_heads, group, dtype=torch.float32, device=query.device)
    for h in range(kv_heads):
        logits = torch.bmm(query[:, h], keys[:, :, h].transpose(1, 2))  # [c, group, tokens]
        if pad is not None:
            logits.masked_fill_(pad, float("-inf"))
        lse[:, h] = torch.logsumexp(logits, dim=-1)
        probs = logits.sub_(lse[:, h].unsqueeze(-1)).exp_()
        out[:, h] = torch.bmm(probs, values[:, :, h])  # [c, group, head_size]
    return out, lse


def _merge_by_lse(parts: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """Combine attention over disjoint key ranges: weights exp(lse_i - logsumexp_j lse_j)."""
    outs = torch.stack([o for o, _ in parts])  # [tiles, c, kv_heads, group, head_size]
    lses = torch.stack([lse for _, lse in parts])  # [tiles, c, kv_heads, group]
    weights = torch.softmax(lses, dim=0).unsqueeze(-1)
    return (outs * weights).sum(0)


@REGISTRY.register("paged_decode_attention", Backend.NATIVE)
def paged_decode_attention_native(query, kv_cache, block_tables, context_lens, scale):
    dims = KVCacheDims.of(kv_cache)
    _check_heads(query, dims)
    lens = [int(n) for n in context_lens.tolist()]
    _check_lengths(lens, block_tables, dims, "context_lens")
    return decode_paged(query, kv_cache[0], kv_cache[1], block_tables, lens, scale)


def decode_paged(
    query: torch.Tensor,  # [S, num_heads, head_size]
    key_cache: torch.Tensor,  # [num_blocks, block_size, kv_heads, head_size], any strides
    value_cache: torch.Tensor,  # same shape as key_cache
    block_tables: torch.Tensor,  # [S, max_blocks] int32/int64
    lens: list[int],  # [S] tokens in the cache per sequence, each >= 1
    scale: float,
    index: fused_decode.DecodeIndex | None = None,  # the fused kernel's token locations, if built already
) -> torch.Tensor:  # [S, num_heads, head_size]
    """Each sequence's one query over its whole cached context: the fused kernel where `use_fused`
    says so, else the eager tiles. Arguments are trusted (the registered ops check them). `index` is
    built once per engine step by the vLLM plugin; without it the fused path builds it here and vets
    the block ids (its loads are not bounds-checked)."""
    num_blocks, block_size, kv_heads, head_size = key_cache.shape
    group = query.shape[1] // kv_heads
    if fused_decode.use_fused(query.device, len(lens), max(lens), kv_heads, head_size):
        q = (query.float() * scale).view(len(lens), kv_heads, group, head_size)
        if index is None:
            index = fused_decode.build_decode_index(block_tables, lens, block_size, num_blocks)
        out = fused_decode.fused_decode(q, key_cache, value_cache, index)
        if out is not None:
            return out.view_as(query).to(query.dtype)
    block_bytes = block_size * kv_heads * head_size * 4
    groups = plan_decode_tiles(lens, block_size, max(1, DECODE_TILE_BYTES // block_bytes))

    # Work in length order so every tile is a contiguous row range; undo the order at the end.
    order = [s for tiles in groups for s in tiles[0].seqs]
    perm = torch.tensor(order, dtype=torch.long, device=query.device)
    q_sorted = (query.index_select(0, perm).float() * scale).view(len(order), kv_heads, group, head_size)
    tables = block_tables.index_select(0, perm.to(block_tables.device))
    out_sorted = torch.empty(len(order), kv_heads, group, head_size, dtype=torch.float32, device=query.device)
    row = 0
    for tiles in groups:
        rows = slice(row, row + len(tiles[0].seqs))
        row = rows.stop
        parts = [
            _attend_tile(q_sorted[rows], *_gather_tile(key_cache, value_cache, tables[rows], tile, lens, block_size))
            for tile in tiles
        ]
        out_sorted[rows] = parts[0][0] if len(parts) == 1 else _merge_by_lse(parts)
    out = torch.empty_like(query)
    out.index_copy_(0, perm, out_sorted.view_as(query).to(query.dtype))
    return out


def _gather_tile(
    key_cache: torch.Tensor,  # [num_blocks, block_size, kv_heads, head_size], any strides
    value_cache: torch.Tensor,
    tables: torch.Tensor,  # [c, max_blocks] rows of the tile's sequences
    tile: DecodeTile,
    lens: list[int],
    block_size: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The tile's keys and values, [c, blocks * block_size, kv_heads, head_size] float32, and the
    mask [c, 1, tokens] of slots past each sequence's context (None when every slot is real).

    Table entries past a sequence's own blocks (padding, or the tail of a shorter sequence in a tile
    of longer ones) are replaced by block 0 before the gather: they are read only to be masked, and
    padding values in a block table carry no promise of being valid block ids. The gathered values of
    masked slots are zeroed: a weight of 0 does not cancel a NaN (0 * NaN = NaN), and a slot this
    sequence never wrote may hold one left by an earlier request (vLLM reuses blocks uncleared).
    """
    c, first, count = len(tile.seqs), tile.first_block, tile.num_blocks
    valid = [min(lens[s] - first * block_size, count * block_size) for s in tile.seqs]
    ids = tables[:, first : first + count]
    own_blocks = [-(-v // block_size) for v in valid]
    if min(own_blocks) < count:
        own = torch.tensor(own_blocks, device=ids.device)
        ids = ids.masked_fill(torch.arange(count, device=ids.device) >= own[:, None], 0)
    ids = ids.reshape(-1).to(torch.long)
    tokens = count * block_size
    keys = key_cache.index_select(0, ids).float().view(c, tokens, *key_cache.shape[2:])
    values = value_cache.index_select(0, ids).float().view(c, tokens, *value_cache.shape[2:])
    pad = None
    if min(valid) < tokens:
        slots = torch.arange(tokens, device=keys.device)
        past = slots >= torch.tensor(valid, device=keys.device)[:, None]  # [c, tokens]
        values[past] = 0  # a fresh copy (index_select): only the masked rows are written
        pad = past.unsqueeze(1)
    return keys, values, pad


# --------------------------------------------------------------------------------------------- prefill
def _causal_attention(
    query: torch.Tensor,  # [q_len, num_heads, head_size]
    keys: torch.Tensor,  # [kv_len, num_kv_heads, head_size], positions 0..kv_len-1
    values: torch.Tensor,  # [kv_len, num_kv_heads, head_size]
    scale: float,
) -> torch.Tensor:  # [q_len, num_heads, head_size] float32
    """Queries at the last q_len positions attend causally (query i sees keys 0..kv_len-q_len+i).

    Float32 throughout; query rows are processed in chunks bounded by PREFILL_SCORE_BYTES.
    """
    q_len, num_heads, head_size = query.shape
    kv_len, kv_heads = keys.shape[0], keys.shape[1]
    group = num_heads // kv_heads
    k = keys.float().permute(1, 2, 0)  # [kv_heads, head_size, kv_len]
    v = values.float().transpose(0, 1)  # [kv_heads, kv_len, head_size]
    offset = kv_len - q_len
    rows_per_chunk = max(1, PREFILL_SCORE_BYTES // (4 * num_heads * kv_len))
    out = torch.empty(q_len, num_heads, head_size, dtype=torch.float32, device=query.device)
    key_pos = torch.arange(kv_len, device=query.device)
    for r0 in range(0, q_len, rows_per_chunk):
        r1 = min(q_len, r0 + rows_per_chunk)
        # [kv_heads, group * rows, head_size]: the queries sharing a KV head, row-major by (group, row)
        q = query[r0:r1].float().view(r1 - r0, kv_heads, group, head_size).permute(1, 2, 0, 3)
        q = q.reshape(kv_heads, group * (r1 - r0), head_size)
        logits = torch.bmm(q, k).mul_(scale).view(kv_heads, group, r1 - r0, kv_len)
        query_pos = torch.arange(offset + r0, offset + r1, device=query.device)
        logits.masked_fill_(key_pos[None, :] > query_pos[:, None], float("-inf"))
        probs = torch.softmax(logits, dim=-1).view(kv_heads, group * (r1 - r0), kv_len)
        chunk = torch.bmm(probs, v).view(kv_heads, group, r1 - r0, head_size)
        out[r0:r1] = chunk.permute(2, 0, 1, 3).reshape(r1 - r0, num_heads, head_size)
    return out


def _check_packed(query: torch.Tensor, query_lens: list[int], what: str) -> None:
    if sum(query_lens) != query.shape[0]:
        raise ValueError(
            f"{what} add up to {sum(query_lens)} tokens but query has {query.shape[0]} rows "
            "(rows are the new tokens of all sequences, back to back)"
        )


@REGISTRY.register("prefill_attention", Backend.NATIVE)
def prefill_attention_native(query, key, value, seq_lens, scale):
    lens = [int(n) for n in seq_lens.tolist()]
    dims = KVCacheDims(1, 1, key.shape[1], key.shape[2])
    _check_heads(query, dims)
    _check_packed(query, lens, "seq_lens")
    if key.shape != value.shape or key.shape[0] != query.shape[0]:
        raise ValueError(f"key {tuple(key.shape)} and value {tuple(value.shape)} need one row per query token")
    out = torch.empty_like(query)
    start = 0
    for n in lens:
        rows = slice(start, start + n)
        out[rows] = _causal_attention(query[rows], key[rows], value[rows], scale).to(out.dtype)
        start += n
    return out


def _paged_prefill(
    query: torch.Tensor,
    kv_cache: torch.Tensor,
    block_tables: torch.Tensor,
    query_lens: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """The backend's PrefillCacheHit and ChunkedPrefill: checks, then `attend_paged` on its cache halves."""
    dims = KVCacheDims.of(kv_cache)
    _check_heads(query, dims)
    q_lens = [int(n) for n in query_lens.tolist()]
    s_lens = [int(n) for n in seq_lens.tolist()]
    _check_lengths(s_lens, block_tables, dims, "seq_lens")
    _check_packed(query, q_lens, "query_lens")
    bad = [i for i, (q, s) in enumerate(zip(q_lens, s_lens)) if not 1 <= q <= s]
    if bad:
        raise ValueError(
            f"sequence {bad[0]}: query_len {q_lens[bad[0]]} must be between 1 and seq_len {s_lens[bad[0]]}"
        )
    return attend_paged(query, kv_cache[0], kv_cache[1], block_tables, q_lens, s_lens, scale)


def attend_paged(
    query: torch.Tensor,  # [num_tokens, num_heads, head_size], sequences back to back
    key_cache: torch.Tensor,  # [num_blocks, block_size, kv_heads, head_size], any strides, new K/V written
    value_cache: torch.Tensor,  # same shape as key_cache
    block_tables: torch.Tensor,  # [num_seqs, max_blocks] int32/int64
    query_lens: list[int],  # [num_seqs] new tokens per sequence (the last ones of its context)
    seq_lens: list[int],  # [num_seqs] cached + new tokens per sequence
    scale: float,
    out: torch.Tensor | None = None,  # [num_tokens, num_heads, head_size] to write into, or None
    decode_index: fused_decode.DecodeIndex | None = None,  # locations of the one-token sequences' contexts
) -> torch.Tensor:  # [num_tokens, num_heads, head_size] (`out` when given)
    """New tokens attend causally to cached + new tokens, all read from the paged cache.

    Sequences with one new token go through `decode_paged` together; longer ones one by one through
    `_causal_attention`; sequences with no new token are skipped. Arguments are trusted.
    """
    decodes = [i for i, q in enumerate(query_lens) if q == 1]
    if decodes and len(decodes) == len(query_lens):  # a pure decode step: rows are the sequences, in order
        result = decode_paged(query, key_cache, value_cache, block_tables, seq_lens, scale, decode_index)
        return result if out is None else out.copy_(result)
    if out is None:
        out = torch.empty_like(query)
    starts = [0]
    for q in query_lens:
        starts.append(starts[-1] + q)
    if decodes:
        rows = torch.tensor([starts[i] for i in decodes], dtype=torch.long, device=query.device)
        seqs = torch.tensor(decodes, dtype=torch.long, device=block_tables.device)
        out[rows] = decode_paged(
            query.index_select(0, rows),
            key_cache,
            value_cache,
            block_tables.index_select(0, seqs),
            [seq_lens[i] for i in decodes],
            scale,
            decode_index,
        )
    block_size = key_cache.shape[1]
    for i, (q, s) in enumerate(zip(query_lens, seq_lens)):
        if q <= 1:
            continue
        table = block_tables[i, : -(-s // block_size)].to(torch.long)
        keys = key_cache.index_select(0, table).flatten(0, 1)[:s]  # [s, kv_heads, head_size]
        values = value_cache.index_select(0, table).flatten(0, 1)[:s]
        rows = slice(starts[i], starts[i + 1])
        out[rows] = _causal_attention(query[rows], keys, values, scale).to(out.dtype)
    return out


@REGISTRY.register("prefill_cache_hit_attention", Backend.NATIVE)
def prefill_cache_hit_attention_native(query, kv_cache, block_tables, query_lens, seq_lens, scale):
    return _paged_prefill(query, kv_cache, block_tables, query_lens, seq_lens, scale)


@REGISTRY.register("chunked_prefill_attention", Backend.NATIVE)
def chunked_prefill_attention_native(query, kv_cache, block_tables, query_lens, seq_lens, scale):
    return _paged_prefill(query, kv_cache, block_tables, query_lens, seq_lens, scale)


def default_scale(head_size: int) -> float:
    """1 / sqrt(head_size), the softmax scale of standard attention."""
    return 1.0 / math.sqrt(head_size)
