"""A compact executor: prefill and decode a batch of prompts on registry ops and paged attention.

It is the smallest thing that runs a real checkpoint the way vLLM does — KV in fixed blocks owned by a
KVCacheManager (with prefix caching), tokens of all sequences flattened into one step, block tables
and slot mappings handed to the attention kernels — so that layer-level accuracy work and NPU bring-up
do not need a full serving engine. It is not a server: no preemption, no continuous admission.

    executor = Executor.from_pretrained(path, device="cpu", dtype=torch.float32)
    results = executor.generate([[1, 2, 3], [1, 2, 3, 4, 5]], SamplingParams(max_tokens=16))
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ascend_backend.attention import build_attention_metadata
from ascend_backend.attention.layout import allocate_kv_cache
from ascend_backend.kv_cache import KVCacheManager
from ascend_backend.kv_cache.sizing import KVCacheSpec, KVDtype
from ascend_backend.models.layers import CausalLM
from ascend_backend.models.loader import load_model
from ascend_backend.models.rope import model_cos_sin_cache
from ascend_backend.models.sampling import SamplingParams, sample
from ascend_backend.platform.device import kind_of
from ascend_backend.platform.kinds import DeviceKind

# Block size when the caller names none: 128 on an NPU, where vllm-ascend forces it whenever prefix caching
# (or chunked prefill) is on (platform.py@v0.11.0:272-279, utils.py@v0.13.0:1097-1101) because the paged
# prefill kernels take nothing else (the ATB prefix encoder: 128 only; FIA's prefill: multiples of 128,
# data/kernel_limits.json); 32 elsewhere, the smallest block vLLM's CPU engine starts with.
NPU_BLOCK_SIZE = 128
CPU_BLOCK_SIZE = 32


def default_block_size(device: torch.device | str) -> int:
    """128 on an NPU ('npu:0'), 32 elsewhere: the block size an executor on `device` uses unless told."""
    return NPU_BLOCK_SIZE if kind_of(device) is DeviceKind.NPU else CPU_BLOCK_SIZE


class OutOfKVBlocks(RuntimeError):
    """The KV cache is too small for the batch; raise num_blocks / kv_memory_bytes or send fewer prompts."""


@dataclass(frozen=True)
class GenerationResult:
    prompt_token_ids: tuple[int, ...]
    token_ids: tuple[int, ...]  # generated tokens only
    num_cached_prompt_tokens: int  # prompt tokens served from the prefix cache
    finish_reason: str  # "length" | "eos"


@dataclass(frozen=True)
class _Scheduled:
    """One sequence's share of a step: tokens [start, start + len(token_ids)) of its context.

    Their cache slots follow from the block table (build_attention_metadata computes them).
    """

    request_id: str
    token_ids: tuple[int, ...]
    start: int


class Executor:
    def __init__(
        self,
        model: CausalLM,
        *,
        block_size: int | None = None,
        num_blocks: int | None = None,
        kv_memory_bytes: int = 256 * 1024**2,
        enable_prefix_caching: bool = True,
    ) -> None:
        self.model = model
        self.config = config = model.config
        param = next(model.parameters())
        self.device, self.dtype = param.device, param.dtype
        if block_size is None:
            block_size = default_block_size(self.device)
        self.block_size = block_size
        if num_blocks is None:
            spec = KVCacheSpec(config.num_layers, config.num_kv_heads, config.head_size, KVDtype.parse(str(self.dtype)))
            per_block = spec.bytes_per_block(block_size)
            num_blocks = max(kv_memory_bytes // per_block, 2)
        self.num_blocks = int(num_blocks)
        self.kv_caches = [
            allocate_kv_cache(
                self.num_blocks, block_size, config.num_kv_heads, config.head_size, dtype=self.dtype, device=self.device
            )
            for _ in range(config.num_layers)
        ]  # one [2, num_blocks, block_size, kv_heads, head_size] per layer
        self.manager = KVCacheManager(self.num_blocks, block_size, enable_prefix_caching)
        self.cos_sin_cache = model_cos_sin_cache(config).to(self.device)
        self._ids = itertools.count()

    @classmethod
    def from_pretrained(
        cls, path: str | Path, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32, **kwargs
    ) -> Executor:
        return cls(load_model(path, device, dtype), **kwargs)

    # ------------------------------------------------------------------ public
    @torch.inference_mode()
    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        params: SamplingParams = SamplingParams(),  # noqa: B008 - frozen
    ) -> list[GenerationResult]:
        """Prefill every prompt in one step, then decode them together until each stops."""
        if not prompts or any(len(p) == 0 for p in prompts):
            raise ValueError("generate() needs at least one prompt and no empty prompt")
        generator = torch.Generator().manual_seed(params.seed)
        ids = [f"req-{next(self._ids)}" for _ in prompts]
        try:
            scheduled, cached = self._admit(ids, prompts)
            logits = self._step(scheduled, logits_for_all=False)
            outputs: list[list[int]] = [[] for _ in prompts]
            finish = ["length"] * len(prompts)
            active = list(range(len(prompts)))
            next_tokens = sample(logits, params, generator).tolist()
            while active:
                still = []
                for i, tok in zip(active, next_tokens):
                    outputs[i].append(tok)
                    if params.stop_at_eos and tok in self.config.eos_token_ids:
                        finish[i] = "eos"
                    elif len(outputs[i]) < params.max_tokens:
                        still.append(i)
                active = still
                if not active:
                    break
                scheduled = [self._extend(ids[i], outputs[i][-1]) for i in active]
                next_tokens = sample(self._step(scheduled, logits_for_all=False), params, generator).tolist()
        finally:
            for rid in ids:
                if self.manager.has_request(rid):
                    self.manager.free(rid)
        return [GenerationResult(tuple(p), tuple(o), c, f) for p, o, c, f in zip(prompts, outputs, cached, finish)]

    @torch.inference_mode()
    def prompt_logits(self, prompt: Sequence[int]) -> torch.Tensor:
        """[len(prompt), vocab] float32 logits at every prompt position (for comparisons with HF)."""
        rid = f"req-{next(self._ids)}"
        try:
            scheduled, _ = self._admit([rid], [prompt], use_cache_hits=False)
            return self._step(scheduled, logits_for_all=True)
        finally:
            if self.manager.has_request(rid):
                self.manager.free(rid)

    # ------------------------------------------------------------------ steps
    def _admit(
        self, ids: Sequence[str], prompts: Sequence[Sequence[int]], use_cache_hits: bool = True
    ) -> tuple[list[_Scheduled], list[int]]:
        scheduled, cached = [], []
        for rid, prompt in zip(ids, prompts):
            allocation = self.manager.allocate(rid, list(prompt))
            if allocation is None:
                raise OutOfKVBlocks(
                    f"{self.num_blocks} KV blocks of {self.block_size} tokens cannot hold this batch "
                    f"({sum(len(p) for p in prompts)} prompt tokens); raise num_blocks or kv_memory_bytes"
                )
            start = allocation.num_cached_tokens if use_cache_hits else 0
            scheduled.append(_Scheduled(rid, tuple(prompt[start:]), start))
            cached.append(allocation.num_cached_tokens if use_cache_hits else 0)
        return scheduled, cached

    def _extend(self, rid: str, token: int) -> _Scheduled:
        start = self.manager.num_tokens(rid)
        if self.manager.append_slots(rid, [token]) is None:
            raise OutOfKVBlocks(
                f"out of KV blocks while decoding ({self.num_blocks} blocks of {self.block_size}); "
                "raise num_blocks or kv_memory_bytes, or lower max_tokens"
            )
        return _Scheduled(rid, (token,), start)

    def _step(self, scheduled: Sequence[_Scheduled], logits_for_all: bool) -> torch.Tensor:
        device = self.device
        tokens = [t for s in scheduled for t in s.token_ids]
        positions = [p for s in scheduled for p in range(s.start, s.start + len(s.token_ids))]
        # Prefills whose prefix came from the cache are PrefillCacheHit (no chunking in this executor).
        metadata = build_attention_metadata(
            [self.manager.block_table(s.request_id) for s in scheduled],
            seq_lens=[s.start + len(s.token_ids) for s in scheduled],
            query_lens=[len(s.token_ids) for s in scheduled],
            block_size=self.block_size,
            chunked_prefill=False,
            device=device,
        )
        if logits_for_all:
            rows = torch.arange(len(tokens), device=device)
        else:
            ends = list(itertools.accumulate(len(s.token_ids) for s in scheduled))
            rows = torch.tensor([e - 1 for e in ends], device=device)
        return self.model(
            torch.tensor(tokens, device=device),
            torch.tensor(positions, device=device),
            self.cos_sin_cache,
            self.kv_caches,
            metadata,
            rows,
        )
