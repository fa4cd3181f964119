"""How many KV-cache blocks fit: the memory budget of a serving process, and block-size rules per target.

The budget follows vLLM's (and vllm-ascend's) accounting:

    kv_cache_bytes = device_memory * utilization - weights - activation_peak - runtime_reserve
    num_blocks     = kv_cache_bytes // bytes_per_block
    bytes_per_block = 2 (K and V) * layers * kv_heads * head_size * block_size * dtype_bytes

Worked example — a Qwen2-7B-like model (28 layers, 4 KV heads, head size 128, bf16) at block size
128 on a 64 GiB card, utilization 0.9, 15 GiB of weights, 4 GiB activation peak, 2 GiB reserved:
    bytes_per_block = 2 * 28 * 4 * 128 * 128 * 2      = 7,340,032 (7 MiB)
    kv_cache_bytes  = 64 GiB * 0.9 - 15 - 4 - 2 GiB   = 36.6 GiB = 39,298,950,758 bytes
    num_blocks      = 39,298,950,758 // 7,340,032     = 5354
    at max_model_len 8192 a sequence needs 8192 / 128 = 64 blocks, so (5354 - 1 null) // 64 = 83
    sequences fit at full length at once.

Why a runtime reserve on Ascend: the CANN runtime, HCCL buffers and graph compilation allocate device
memory outside PyTorch's view, so utilization above ~0.95 tends to fail at start-up or on the first
graph capture; `plan_kv_cache` warns about it. When nothing is left for the KV cache, the error names
the knobs that fix it (--max-model-len, --gpu-memory-utilization, --max-num-seqs): the most common
complaint when a GPU configuration is first started on an NPU.

Pure arithmetic, no torch: the numbers come from a model config and a device memory query.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ascend_backend.platform.kinds import DeviceKind

GIB = 1 << 30


class KVDtype(enum.Enum):
    """Element type of the KV cache, valued by its size in bytes."""

    FLOAT32 = ("float32", 4)
    FLOAT16 = ("float16", 2)
    BFLOAT16 = ("bfloat16", 2)
    INT8 = ("int8", 1)
    FP8 = ("fp8", 1)

    def __init__(self, label: str, nbytes: int) -> None:
        self.label = label
        self.nbytes = nbytes

    @classmethod
    def parse(cls, name: str) -> KVDtype:
        """'bf16' / 'bfloat16' / 'torch.bfloat16' -> KVDtype.BFLOAT16."""
        key = name.lower().removeprefix("torch.")
        aliases = {"fp32": "float32", "half": "float16", "fp16": "float16", "bf16": "bfloat16", "float": "float32"}
        key = aliases.get(key, key)
        for member in cls:
            if member.label == key or key.startswith("fp8") and member is cls.FP8:
                return member
        raise ValueError(f"unknown KV-cache dtype {name!r}; use one of {[m.label for m in cls]}")


@dataclass(frozen=True)
class BlockSizeRule:
    """Block sizes a target accepts and why."""

    target: DeviceKind
    multiple_of: int
    allowed: frozenset[int] | None  # None: any positive multiple of `multiple_of`
    recommended: int
    why: str

    def problem(self, block_size: int) -> str | None:
        """None when `block_size` is fine for this target, else the reason and the fix."""
        ok = block_size > 0 and block_size % self.multiple_of == 0
        if ok and self.allowed is not None:
            ok = block_size in self.allowed
        if ok:
            return None
        wanted = sorted(self.allowed) if self.allowed is not None else f"a multiple of {self.multiple_of}"
        return (
            f"--block-size {block_size} does not suit the {self.target.value} target ({self.why}); "
            f"use {wanted} (recommended: --block-size {self.recommended})"
        )


BLOCK_SIZE_RULES: Mapping[DeviceKind, BlockSizeRule] = MappingProxyType(
    {
        DeviceKind.NPU: BlockSizeRule(
            DeviceKind.NPU,
            128,
            frozenset({128}),
            128,
            "vllm-ascend's paged-attention and reshape-and-cache kernels are built for 128-token blocks and "
            "it resets other sizes to 128 when prefix caching or chunked prefill is on",
        ),
        DeviceKind.CPU: BlockSizeRule(
            DeviceKind.CPU,
            32,
            None,
            128,
            "vLLM's CPU attention backend needs multiples of 32; 8 and 16 fail at start-up",
        ),
        DeviceKind.CUDA: BlockSizeRule(
            DeviceKind.CUDA,
            16,
            None,
            16,
            "vLLM's GPU attention kernels (FlashAttention/FlashInfer) take multiples of 16",
        ),
    }
)


@dataclass(frozen=True)
class KVCacheSpec:
    """The model's KV shape per token: what one cached token costs in every layer."""

    num_layers: int
    num_kv_heads: int  # per device, after tensor parallelism splits the heads
    head_size: int
    dtype: KVDtype

    def __post_init__(self) -> None:
        for name in ("num_layers", "num_kv_heads", "head_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"KVCacheSpec.{name} must be >= 1, got {getattr(self, name)}")

    @classmethod
    def from_hf_config(
        cls, config: Mapping[str, Any], kv_dtype: str | None = None, tensor_parallel_size: int = 1
    ) -> KVCacheSpec:
        """Read the KV shape from a Hugging Face `config.json` dict.

        head_size is `head_dim` when given, else hidden_size / num_attention_heads; KV heads default
        to the attention heads (no GQA). With tensor parallelism each device keeps
        kv_heads / tp heads, but at least one (vLLM replicates KV heads when tp > kv_heads). The
        dtype is `kv_dtype` if given (vLLM's --kv-cache-dtype), else the config's `torch_dtype`.
        """

        def need(key: str) -> Any:
            if key not in config:
                raise ValueError(f"model config has no {key!r}; is this a decoder-only HF config.json?")
            return config[key]

        heads = int(need("num_attention_heads"))
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_size = int(config.get("head_dim") or int(need("hidden_size")) // heads)
        dtype_name = kv_dtype or str(config.get("torch_dtype") or config.get("dtype") or "float16")
        return cls(
            num_layers=int(need("num_hidden_layers")),
            num_kv_heads=max(1, kv_heads // tensor_parallel_size),
            head_size=head_size,
            dtype=KVDtype.parse(dtype_name),
        )

    def bytes_per_token(self) -> int:
        return 2 * self.num_layers * self.num_kv_heads * self.head_size * self.dtype.nbytes

    def bytes_per_block(self, block_size: int) -> int:
        """2 (K, V) x layers x kv_heads x head_size x block_size x dtype bytes."""
        return self.bytes_per_token() * block_size


@dataclass(frozen=True)
class MemoryBudget:
    """Device memory and what is spent before the KV cache (all in bytes).

    device_memory: total memory of one device.
    utilization: fraction of it the engine may use (vLLM's --gpu-memory-utilization).
    weights: model weights resident on the device.
    activation_peak: peak activation memory of a forward pass at the planned max_num_batched_tokens
        (vLLM measures it with a profiling run); grows with max_model_len and max_num_seqs.
    runtime_reserve: memory outside PyTorch's allocator (CANN runtime, HCCL buffers, graph capture).
    """

    device_memory: int
    utilization: float
    weights: int
    activation_peak: int = 0
    runtime_reserve: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.utilization <= 1.0:
            raise ValueError(
                f"--gpu-memory-utilization must be in (0, 1], got {self.utilization}; "
                "it is the fraction of device memory the engine may use (try 0.85-0.9)"
            )
        for name in ("device_memory", "weights", "activation_peak", "runtime_reserve"):
            if getattr(self, name) < 0:
                raise ValueError(f"MemoryBudget.{name} must be >= 0 bytes, got {getattr(self, name)}")

    def kv_cache_bytes(self) -> int:
        """Bytes left for the KV cache; may be zero or negative (see `plan_kv_cache`)."""
        usable = int(self.device_memory * self.utilization)
        return usable - self.weights - self.activation_peak - self.runtime_reserve


class KVCacheMemoryError(ValueError):
    """The budget leaves no room (or too little) for the KV cache; the message says which knob to turn."""


@dataclass(frozen=True)
class KVCachePlan:
    """Outcome of `plan_kv_cache`: the numbers to configure the cache with, and any warnings."""

    target: DeviceKind
    block_size: int
    bytes_per_block: int
    kv_cache_bytes: int
    num_blocks: int  # including the reserved null block
    blocks_per_seq: int  # blocks a sequence of max_model_len tokens needs
    max_concurrent_seqs: int  # sequences of max_model_len tokens that fit at once
    warnings: tuple[str, ...]


NPU_UTILIZATION_CEILING = 0.95  # CANN's runtime, HCCL buffers and graph compilation need the rest (docs/METHOD.md §11)


def utilization_warning(target: DeviceKind, utilization: float) -> str | None:
    """The warning for a `--gpu-memory-utilization` that leaves the NPU runtime too little, else None.

    The one statement of this rule: `plan_kv_cache` adds it to a plan, and the workbench's recipe and
    sweep loaders warn with it when a recipe or a sweep point sets such a value.
    """
    if target is DeviceKind.NPU and utilization > NPU_UTILIZATION_CEILING:
        return (
            f"--gpu-memory-utilization {utilization} is above {NPU_UTILIZATION_CEILING} on an NPU: the CANN runtime "
            "and graph compilation allocate outside PyTorch and may run out of memory; use 0.9-0.95"
        )
    return None


def blocks_per_sequence(max_model_len: int, block_size: int) -> int:
    """ceil(max_model_len / block_size): the last block of a sequence is rounded up to a whole block."""
    return -(-max_model_len // block_size)


def plan_kv_cache(
    spec: KVCacheSpec,
    budget: MemoryBudget,
    block_size: int,
    target: DeviceKind,
    max_model_len: int,
    max_num_seqs: int | None = None,
) -> KVCachePlan:
    """Size the KV cache for `spec` under `budget`; raise `KVCacheMemoryError` naming the fix.

    Raises when the block size does not suit `target`, when nothing is left for the KV cache, or
    when not even one sequence of `max_model_len` tokens fits. Warns (in `plan.warnings`) when
    utilization is above 0.95 on an NPU or when fewer than `max_num_seqs` full-length sequences fit.
    """
    if max_model_len < 1:
        raise ValueError(f"--max-model-len must be >= 1, got {max_model_len}")
    rule_problem = BLOCK_SIZE_RULES[target].problem(block_size)
    if rule_problem is not None:
        raise KVCacheMemoryError(rule_problem)
    warnings: list[str] = []
    utilization_problem = utilization_warning(target, budget.utilization)
    if utilization_problem is not None:
        warnings.append(utilization_problem)
    kv_bytes = budget.kv_cache_bytes()
    if kv_bytes <= 0:
        raise KVCacheMemoryError(_no_memory_message(budget, kv_bytes, max_model_len, max_num_seqs))
    per_block = spec.bytes_per_block(block_size)
    num_blocks = kv_bytes // per_block
    per_seq = blocks_per_sequence(max_model_len, block_size)
    concurrent = max(num_blocks - 1, 0) // per_seq  # minus the null block
    if concurrent < 1:
        raise KVCacheMemoryError(
            f"the KV cache ({_gib(kv_bytes)} = {num_blocks} blocks of {block_size} tokens) cannot hold one "
            f"sequence of --max-model-len {max_model_len} ({per_seq} blocks, {_gib(per_seq * per_block)} "
            f"+ 1 null block). Fix: lower --max-model-len to at most "
            f"{max(num_blocks - 1, 0) * block_size}, or raise --gpu-memory-utilization "
            f"(now {budget.utilization})"
        )
    if max_num_seqs is not None and concurrent < max_num_seqs:
        warnings.append(
            f"only {concurrent} sequences of {max_model_len} tokens fit in the KV cache at once, fewer than "
            f"--max-num-seqs {max_num_seqs}: long requests will queue or be preempted; lower --max-num-seqs "
            "or --max-model-len if that is not intended"
        )
    return KVCachePlan(target, block_size, per_block, kv_bytes, num_blocks, per_seq, concurrent, tuple(warnings))


def _no_memory_message(budget: MemoryBudget, kv_bytes: int, max_model_len: int, max_num_seqs: int | None) -> str:
    seqs = f" (now {max_num_seqs})" if max_num_seqs is not None else ""
    return (
        f"no memory left for the KV cache: {_gib(budget.device_memory)} x utilization {budget.utilization} "
        f"- weights {_gib(budget.weights)} - activation peak {_gib(budget.activation_peak)} - runtime "
        f"reserve {_gib(budget.runtime_reserve)} = {_gib(kv_bytes)}. Fix: lower --max-model-len "
        f"(now {max_model_len}) and/or --max-num-seqs{seqs} to shrink the activation peak, raise "
        f"--gpu-memory-utilization (now {budget.utilization}; stay <= 0.95 on Ascend), or use a smaller or "
        "quantized model / more tensor-parallel devices to shrink the weights"
    )


def _gib(nbytes: int) -> str:
    return f"{nbytes / GIB:.2f} GiB"
