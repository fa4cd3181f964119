"""The inputs a self-test item runs on: the op suite's builders, shaped by the row's call conditions.

Token-wise ops take the op suite's own builders (`workbench.accuracy.op_inputs`) at a model-like size.
Attention runs with 128-wide heads (or the row's head size), 8 query over 2 KV heads and block size 128,
the block vllm-ascend forces with prefix caching, and cached prefixes in whole blocks: the shape a
serving engine hands these kernels (kernel_limits.json: the ATB prefix encoder needs block 128 and
128-aligned prefixes). Rotary takes the row's head size, rotary width and style. Every input is float32 on
the CPU; the runner rounds it to the dtype under test.
"""

from __future__ import annotations

import torch

from ascend_backend.ops.rotary import build_cos_sin_cache
from ascend_backend.quantization.arithmetic import quantize_static
from workbench.accuracy.op_inputs import OpInputs, make_inputs
from workbench.selftest.plan import PREQUANTIZED, KernelItem

HEADS, KV_HEADS, BLOCK = 8, 2, 128
PREFIXES, QUERIES = (256, 0, 128), (40, 130, 1)  # per sequence: cached tokens (whole blocks), new tokens
TOKENS, HIDDEN = 16, 1024
ATTENTION_OPS = frozenset(
    {
        "reshape_and_cache",
        "prefill_attention",
        "prefill_cache_hit_attention",
        "chunked_prefill_attention",
        "paged_decode_attention",
    }
)


def _when(item: KernelItem, key: str, default: object) -> object:
    value = dict(item.when).get(key, default)
    return value[0] if isinstance(value, tuple) and value and key in ("head_size", "rotary_dim", "scheme") else value


def _int32(values) -> torch.Tensor:
    return torch.tensor(list(values), dtype=torch.int32)


def _paged(head: int, g: torch.Generator, prefixes, queries) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """A filled cache [2, blocks, 128, kv, head], a block table per sequence (block 0 unused), the context lens."""
    contexts = [p + q for p, q in zip(prefixes, queries)]
    per_seq = [-(-n // BLOCK) for n in contexts]
    ids = (torch.randperm(sum(per_seq), generator=g) + 1).tolist()
    rows, start = [], 0
    for n in per_seq:
        rows.append(ids[start : start + n] + [0] * (max(per_seq) - n))
        start += n
    cache = torch.randn(2, sum(per_seq) + 1, BLOCK, KV_HEADS, head, generator=g)
    return cache, _int32(sum(rows, [])).view(len(contexts), -1), contexts


def _attention(item: KernelItem, g: torch.Generator) -> OpInputs:
    head = int(_when(item, "head_size", 128))
    scale = head**-0.5
    if item.op == "prefill_attention":
        lens = [q + p for p, q in zip(PREFIXES, QUERIES)]
        q = torch.randn(sum(lens), HEADS, head, generator=g)
        k, v = (torch.randn(sum(lens), KV_HEADS, head, generator=g) for _ in range(2))
        return OpInputs((q, k, v, _int32(lens), scale), host_args=frozenset({3}))
    if item.op == "paged_decode_attention":
        cache, tables, contexts = _paged(head, g, PREFIXES, (1, 1, 1))
        query = torch.randn(len(contexts), HEADS, head, generator=g)
        return OpInputs((query, cache, tables, _int32(contexts), scale), host_args=frozenset({3}))
    if item.op == "reshape_and_cache":
        cache, _, contexts = _paged(head, g, PREFIXES, QUERIES)
        slots = torch.randperm((cache.shape[1] - 1) * BLOCK, generator=g)[: sum(QUERIES)] + BLOCK
        key, value = (torch.randn(sum(QUERIES), KV_HEADS, head, generator=g) for _ in range(2))
        return OpInputs((key, value, torch.zeros_like(cache), slots.to(torch.int32)), written_args=(2,))
    queries = QUERIES if item.op == "prefill_cache_hit_attention" else (1, 130, 1)  # chunked: decodes among prompts
    cache, tables, contexts = _paged(head, g, PREFIXES, queries)
    query = torch.randn(sum(queries), HEADS, head, generator=g)
    args = (query, cache, tables, _int32(queries), _int32(contexts), scale)
    return OpInputs(args, host_args=frozenset({3, 4}))


def _rotary(item: KernelItem, g: torch.Generator) -> OpInputs:
    head = int(_when(item, "head_size", 128))
    rotary = head // 2 if _when(item, "partial_rotary", False) else int(_when(item, "rotary_dim", head))
    neox = bool(_when(item, "neox", True))
    positions = torch.randint(0, 4096, (TOKENS,), generator=g)
    query, key = torch.randn(TOKENS, HEADS * head, generator=g), torch.randn(TOKENS, KV_HEADS * head, generator=g)
    return OpInputs((positions, query, key, head, build_cos_sin_cache(rotary, 4096), neox))


def _linear(item: KernelItem, g: torch.Generator) -> OpInputs:
    inputs = make_inputs(item.op, {"tokens": TOKENS, "hidden": HIDDEN}, int(g.initial_seed()))
    if not _when(item, PREQUANTIZED, False):
        return inputs
    x, weight, input_scale, input_offset, deq_scale, quant_bias = inputs.args
    x_q = quantize_static(x, 1 / input_scale.float(), input_offset.float())  # what the fused norm-quant hands over
    return OpInputs((x_q, weight, input_scale, input_offset, deq_scale, quant_bias))


def item_inputs(item: KernelItem, seed: int = 0) -> OpInputs:
    """float32 CPU inputs for `item` (integer ones as they go to the kernel)."""
    g = torch.Generator().manual_seed(seed)
    if item.op in ATTENTION_OPS:
        return _attention(item, g)
    if item.op == "rotary_embedding":
        return _rotary(item, g)
    if item.op in ("w8a8_linear", "w8a8_dynamic_linear"):
        return _linear(item, g)
    if item.op == "quant_weight_layout":
        weight = torch.randint(-128, 128, (HIDDEN, HIDDEN // 2), generator=g, dtype=torch.int8)
        return OpInputs((weight, str(_when(item, "scheme", "W8A8"))))
    if item.op == "add_rms_norm_quant":
        x, residual, weight, eps = make_inputs("add_rms_norm", {"tokens": TOKENS, "hidden": HIDDEN}, seed).args
        return OpInputs((x, residual, weight, eps, torch.tensor([0.02]), torch.tensor([3], dtype=torch.int8)))
    if item.op == "silu_and_mul":
        return make_inputs(item.op, {"tokens": TOKENS, "hidden": 1536}, seed)  # 3072 wide: a multiple of 32
    if item.op == "mrope":
        return make_inputs(item.op, {"tokens": TOKENS, "hidden": HIDDEN}, seed)  # 128-wide heads, [16, 24, 24]
    return make_inputs(item.op, {"tokens": TOKENS, "hidden": HIDDEN}, seed)


__all__ = ["item_inputs"]
