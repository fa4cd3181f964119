"""Inputs for single-op runs: one builder per registry op, seeded and shape-driven.

Shared by the overview notebook's op comparison and the accuracy op suite, so "the same inputs" means
the same thing everywhere. A case is a mapping of named sizes: `{tokens, hidden}` for token-wise ops
(the builders derive weights, positions and head layout from it), and the attention layout
(`num_seqs`, `num_heads`, `num_kv_heads`, `head_size`, `context_len`, `block_size`, ...) for attention ops. Inputs are made in float32 on the CPU and then cast, so the
low-precision run and the float32 reference see the same values up to rounding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ascend_backend.ops import build_cos_sin_cache
from ascend_backend.quantization import ActivationRange, QuantType, quantize_linear
from workbench.errors import WorkbenchError


@dataclass(frozen=True)
class OpInputs:
    """Positional arguments of one op call.

    host_args: indices of integer tensors that stay on the host wherever the op runs (sequence
        lengths: CANN attention kernels take them as host tensors, and the native kernels plan on them);
    written_args: indices of arguments the op writes in place (reshape_and_cache's KV cache); after the
        call they are part of the op's output.
    """

    args: tuple[Any, ...]
    host_args: frozenset[int] = frozenset()
    written_args: tuple[int, ...] = ()

    def to(self, device: torch.device | str, dtype: torch.dtype) -> OpInputs:
        """Floating tensors -> (device, dtype), as copies; integer tensors -> device (host args stay)."""

        def move(index: int, value: Any) -> Any:
            if not isinstance(value, torch.Tensor):
                return value
            if value.is_floating_point():
                return value.to(device=device, dtype=dtype, copy=True)
            return value if index in self.host_args else value.to(device)

        return OpInputs(tuple(move(i, a) for i, a in enumerate(self.args)), self.host_args, self.written_args)

    def outputs(self, returned: Any) -> list[torch.Tensor]:
        """The tensors an op call produced: what it returned, then what it wrote in place."""
        items = returned if isinstance(returned, (tuple, list)) else (returned,)
        return [t for t in items if isinstance(t, torch.Tensor)] + [self.args[i] for i in self.written_args]


Params = Mapping[str, int]


def _tokens_hidden(p: Params) -> tuple[int, int]:
    return int(p["tokens"]), int(p["hidden"])


def _norm(p: Params, g: torch.Generator) -> OpInputs:
    tokens, hidden = _tokens_hidden(p)
    weight = 1.0 + 0.1 * torch.randn(hidden, generator=g)
    return OpInputs((torch.randn(tokens, hidden, generator=g), weight, 1e-6))


def _add_norm(p: Params, g: torch.Generator) -> OpInputs:
    tokens, hidden = _tokens_hidden(p)
    x, weight, eps = _norm(p, g).args
    return OpInputs((x, torch.randn(tokens, hidden, generator=g), weight, eps))


def _unary(p: Params, g: torch.Generator) -> OpInputs:
    return OpInputs((3.0 * torch.randn(*_tokens_hidden(p), generator=g),))


def _gated(p: Params, g: torch.Generator) -> OpInputs:
    tokens, hidden = _tokens_hidden(p)
    return OpInputs((2.0 * torch.randn(tokens, 2 * hidden, generator=g),))


def _linear(p: Params, g: torch.Generator) -> OpInputs:
    tokens, hidden = _tokens_hidden(p)
    out_features = max(hidden // 2, 1)
    weight = torch.randn(out_features, hidden, generator=g) / hidden**0.5
    return OpInputs((torch.randn(tokens, hidden, generator=g), weight, 0.1 * torch.randn(out_features, generator=g)))


def _w8a8(p: Params, g: torch.Generator, quant_type: QuantType) -> OpInputs:
    """A linear of the `linear` builder's shape quantized to W8A8, as the checkpoint loader hands it to the op.

    Static: (x, weight [K, N] int8, input_scale [1], input_offset [1] int8, deq_scale [N], quant_bias [N]
    int32); dynamic: (x, weight [K, N] int8, weight_scale [N], bias [N]). Scales are exact in bf16, and
    the static range comes from x itself (calibrated on the data it runs). Asymmetric on purpose: the
    kernel takes a zero point (msmodelslim's input_offset), and a nonzero one is the case a wrong offset
    argument would get wrong; the symmetric default would hand it 0.
    """
    x, weight, bias = _linear(p, g).args
    activation = ActivationRange(float(x.min()), float(x.max()), x.shape[0])
    layer = quantize_linear(weight, bias, quant_type, torch.bfloat16, activation, symmetric_inputs=False)
    weight_t = layer.weight.t().contiguous()
    if quant_type is QuantType.W8A8_DYNAMIC:
        return OpInputs((x, weight_t, layer.weight_scale, layer.bias))
    offset = torch.tensor([layer.input_offset], dtype=torch.int8)
    return OpInputs(
        (x, weight_t, layer.input_scale.reshape(1), offset, layer.static_deq_scale(), layer.static_quant_bias())
    )


def _rotary(p: Params, g: torch.Generator) -> OpInputs:
    tokens, hidden = _tokens_hidden(p)
    head_size = 64 if hidden % 64 == 0 else hidden
    positions = torch.randint(0, 4096, (tokens,), generator=g)
    query = torch.randn(tokens, hidden, generator=g)
    key = torch.randn(tokens, max(hidden // 2 // head_size, 1) * head_size, generator=g)
    return OpInputs((positions, query, key, head_size, build_cos_sin_cache(head_size, 4096), True))


def _gemma_norm(p: Params, g: torch.Generator) -> OpInputs:
    # Gemma checkpoints store the norm scale minus one, so real weights sit around 0, not 1.
    tokens, hidden = _tokens_hidden(p)
    return OpInputs((torch.randn(tokens, hidden, generator=g), 0.1 * torch.randn(hidden, generator=g), 1e-6))


def _gemma_add_norm(p: Params, g: torch.Generator) -> OpInputs:
    tokens, hidden = _tokens_hidden(p)
    x, weight, eps = _gemma_norm(p, g).args
    return OpInputs((x, torch.randn(tokens, hidden, generator=g), weight, eps))


# M-RoPE sections (t, h, w) per head size: Qwen2-VL's [16, 24, 24] for 128-wide heads (the one vllm-ascend
# runs on npu_mrope), the same proportions for 64.
MROPE_SECTIONS = {128: (16, 24, 24), 64: (8, 12, 12)}


def _mrope(p: Params, g: torch.Generator) -> OpInputs:
    tokens, hidden = _tokens_hidden(p)
    head_size = 128 if hidden % 128 == 0 else 64
    if hidden % head_size:
        raise WorkbenchError(f"mrope case {dict(p)}: hidden {hidden} must be a multiple of 64 (the head size)")
    positions = torch.randint(0, 4096, (3, tokens), generator=g)  # [3, T]: temporal, height, width
    query = torch.randn(tokens, hidden, generator=g)
    key = torch.randn(tokens, max(hidden // 2 // head_size, 1) * head_size, generator=g)
    cache = build_cos_sin_cache(head_size, 4096)
    return OpInputs((positions, query, key, head_size, cache, MROPE_SECTIONS[head_size], True))


ATTENTION_PARAMS = ("num_seqs", "num_heads", "num_kv_heads", "head_size", "context_len", "block_size")


def _int32(values: Sequence[int]) -> torch.Tensor:
    return torch.tensor(list(values), dtype=torch.int32)


def _paged_context(p: Params, g: torch.Generator) -> tuple[list[int], torch.Tensor, torch.Tensor]:
    """Per-sequence lengths (varied, some off block boundaries), shuffled block tables, a filled cache.

    Block 0 is never handed out (it is the allocator's null block), and table padding points at it.
    """
    seqs, ctx, bs = int(p["num_seqs"]), int(p["context_len"]), int(p["block_size"])
    lens = [max(1, ctx - (i * 37) % max(ctx // 2, 1)) for i in range(seqs)]
    per_seq = [-(-n // bs) for n in lens]
    num_blocks = sum(per_seq) + 1
    ids = (torch.randperm(num_blocks - 1, generator=g) + 1).tolist()
    rows, start = [], 0
    for n in per_seq:
        rows.append(ids[start : start + n] + [0] * (max(per_seq) - n))
        start += n
    cache = torch.randn(2, num_blocks, bs, int(p["num_kv_heads"]), int(p["head_size"]), generator=g)
    return lens, _int32(sum(rows, [])).view(seqs, -1), cache


def _scale(p: Params) -> float:
    return float(p["head_size"]) ** -0.5


def _decode(p: Params, g: torch.Generator) -> OpInputs:
    lens, tables, cache = _paged_context(p, g)
    query = torch.randn(len(lens), int(p["num_heads"]), int(p["head_size"]), generator=g)
    return OpInputs((query, cache, tables, _int32(lens), _scale(p)), host_args=frozenset({3}))


def _prefill(p: Params, g: torch.Generator) -> OpInputs:
    lens, _, _ = _paged_context(p, g)
    tokens, heads, kv_heads, d = sum(lens), int(p["num_heads"]), int(p["num_kv_heads"]), int(p["head_size"])
    q = torch.randn(tokens, heads, d, generator=g)
    k, v = torch.randn(tokens, kv_heads, d, generator=g), torch.randn(tokens, kv_heads, d, generator=g)
    return OpInputs((q, k, v, _int32(lens), _scale(p)), host_args=frozenset({3}))


def _paged_prefill(p: Params, g: torch.Generator, mixed: bool) -> OpInputs:
    lens, tables, cache = _paged_context(p, g)
    q_len = int(p.get("query_len", 8))
    # Chunked prefill mixes decodes (one token) and prompt chunks; a cache hit has only chunks.
    query_lens = [1 if mixed and i % 2 else min(q_len, n) for i, n in enumerate(lens)]
    query = torch.randn(sum(query_lens), int(p["num_heads"]), int(p["head_size"]), generator=g)
    return OpInputs((query, cache, tables, _int32(query_lens), _int32(lens), _scale(p)), host_args=frozenset({3, 4}))


def _reshape_and_cache(p: Params, g: torch.Generator) -> OpInputs:
    lens, _, cache = _paged_context(p, g)
    tokens = sum(lens)
    slots = torch.randperm(cache.shape[1] * cache.shape[2] - cache.shape[2], generator=g)[:tokens] + cache.shape[2]
    key = torch.randn(tokens, cache.shape[3], cache.shape[4], generator=g)
    value = torch.randn(tokens, cache.shape[3], cache.shape[4], generator=g)
    return OpInputs((key, value, torch.zeros_like(cache), slots.to(torch.int32)), written_args=(2,))


TOKEN_PARAMS = ("tokens", "hidden")

# op -> (builder, the size names a case must give)
BUILDERS: dict[str, tuple[Callable[[Params, torch.Generator], OpInputs], tuple[str, ...]]] = {
    "rms_norm": (_norm, TOKEN_PARAMS),
    "add_rms_norm": (_add_norm, TOKEN_PARAMS),
    "silu_and_mul": (_gated, TOKEN_PARAMS),
    "gelu": (_unary, TOKEN_PARAMS),
    "gelu_tanh": (_unary, TOKEN_PARAMS),
    "linear": (_linear, TOKEN_PARAMS),
    "w8a8_linear": (lambda p, g: _w8a8(p, g, QuantType.W8A8), TOKEN_PARAMS),
    "w8a8_dynamic_linear": (lambda p, g: _w8a8(p, g, QuantType.W8A8_DYNAMIC), TOKEN_PARAMS),
    "rotary_embedding": (_rotary, TOKEN_PARAMS),
    "quick_gelu": (_unary, TOKEN_PARAMS),
    "gemma_rms_norm": (_gemma_norm, TOKEN_PARAMS),
    "gemma_add_rms_norm": (_gemma_add_norm, TOKEN_PARAMS),
    "mrope": (_mrope, TOKEN_PARAMS),
    "reshape_and_cache": (_reshape_and_cache, ATTENTION_PARAMS),
    "paged_decode_attention": (_decode, ATTENTION_PARAMS),
    "prefill_attention": (_prefill, ATTENTION_PARAMS),
    "prefill_cache_hit_attention": (lambda p, g: _paged_prefill(p, g, mixed=False), ATTENTION_PARAMS),
    "chunked_prefill_attention": (lambda p, g: _paged_prefill(p, g, mixed=True), ATTENTION_PARAMS),
}


def as_params(op: str, case: Params | Sequence[int]) -> dict[str, int]:
    """A case as a dict; a 2-sequence is read as (tokens, hidden) for token-wise ops."""
    if isinstance(case, Mapping):
        return {str(k): int(v) for k, v in case.items()}
    values = [int(v) for v in case]
    if len(values) != 2:
        raise WorkbenchError(f"shape {values} for op {op!r}: expected (tokens, hidden) or a mapping of sizes")
    return dict(zip(TOKEN_PARAMS, values))


def make_inputs(op: str, case: Params | Sequence[int], seed: int = 0) -> OpInputs:
    """Float32 CPU inputs for `op`; unknown ops and missing or non-positive sizes get a clear error."""
    if op not in BUILDERS:
        raise WorkbenchError(f"no input builder for op {op!r}; ops with builders: {', '.join(sorted(BUILDERS))}")
    builder, required = BUILDERS[op]
    params = as_params(op, case)
    missing = [name for name in required if name not in params]
    if missing:
        raise WorkbenchError(f"op {op!r} case {params}: missing sizes {missing} (needs {list(required)})")
    bad = {k: v for k, v in params.items() if v < 1}
    if bad:
        raise WorkbenchError(f"op {op!r} case {params}: sizes must be >= 1, got {bad}")
    return builder(params, torch.Generator().manual_seed(seed))
