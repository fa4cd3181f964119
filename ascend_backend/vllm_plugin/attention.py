"""vLLM's CPU attention backend, with the cache write and the attention routed through the registry.

`CpuPlatform.get_attn_backend_cls` always answers `CPU_ATTN` (it ignores `--attention-backend`), so the
plugin re-points that enum member at `AscendBackendAttentionBackend` with `register_backend`. The
backend subclasses vLLM's CPU backend: same KV-cache shape and metadata, plus the step's inputs as a
`PagedStep`, and an implementation that calls `attention.vllm_cpu_layout` (registry ops `vllm_cpu_kv_write` and
`vllm_cpu_paged_attention`). Which implementation serves those ops is the registry's choice: vLLM's
own C++ kernels when the plugin registered them (`vllm_kernels`, the default in a vLLM CPU engine),
the native PyTorch kernels when forced (`ASCEND_BACKEND_FORCE_NATIVE`) or when vLLM's are absent.

Layers whose features those kernels do not implement (ALiBi, sliding window, logit soft-cap, attention
sinks, an fp8 KV cache, encoder or cross attention) keep vLLM's C++ kernels for both the cache write and
the attention, decided once per layer at construction, so one cache is never written by one kernel and
read by the other. Each such decision is logged once.

On an Ascend NPU this module is not used: vllm-ascend's platform owns attention there.
"""

from __future__ import annotations

import dataclasses
import logging

import torch
from vllm.v1.attention.backend import AttentionType, CommonAttentionMetadata
from vllm.v1.attention.backends.cpu_attn import (
    CPUAttentionBackend,
    CPUAttentionBackendImpl,
    CPUAttentionMetadata,
    CPUAttentionMetadataBuilder,
)

from ascend_backend.attention import vllm_cpu_layout
from ascend_backend.attention.vllm_cpu_layout import PagedStep

logger = logging.getLogger("vllm.ascend_backend.attention")


@dataclasses.dataclass
class AscendBackendAttentionMetadata(CPUAttentionMetadata):
    """vLLM's CPU metadata plus the step's inputs for the registry kernels (None when the builder defers)."""

    step: PagedStep | None = None


class AscendBackendMetadataBuilder(CPUAttentionMetadataBuilder):
    def build(
        self,
        common_prefix_len: int,
        common_attn_metadata: CommonAttentionMetadata,
        fast_build: bool = False,
    ) -> CPUAttentionMetadata:
        base = super().build(common_prefix_len, common_attn_metadata, fast_build)
        if self.is_cross_attention or self.is_encoder_only_attention or base.causal is not True:
            return base
        # On the CPU platform these are CPU tensors already; nothing is copied.
        step = PagedStep(
            query_start_loc=base.query_start_loc,
            seq_lens=base.seq_lens,
            block_table=base.block_table,
            block_size=self.block_size,
            scheduler_metadata=base.scheduler_metadata,
        )
        fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(CPUAttentionMetadata)}
        return AscendBackendAttentionMetadata(**fields, step=step)


def vllm_kernel_reason(impl: CPUAttentionBackendImpl) -> str | None:
    """Why this layer must keep vLLM's C++ kernels, or None when the registry kernels cover it."""
    checks = (
        (impl.attn_type != AttentionType.DECODER, f"attention type {impl.attn_type}"),
        (impl.alibi_slopes is not None, "ALiBi slopes"),
        (impl.sliding_window != -1, f"sliding window {impl.sliding_window}"),
        (bool(impl.logits_soft_cap), f"logit soft-cap {impl.logits_soft_cap}"),
        (impl.sinks is not None, "attention sinks"),
        (impl.is_fp8_kv_cache, f"kv cache dtype {impl.kv_cache_dtype}"),
    )
    reasons = [why for applies, why in checks if applies]
    return ", ".join(reasons) if reasons else None


class AscendBackendAttentionImpl(CPUAttentionBackendImpl):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.vllm_kernel_reason = vllm_kernel_reason(self)
        if self.vllm_kernel_reason is not None:
            logger.info("ascend_backend attention: keeping vLLM's CPU kernel for a layer (%s)", self.vllm_kernel_reason)

    def forward(
        self,
        layer,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        attn_metadata: CPUAttentionMetadata | None,
        output: torch.Tensor,
        output_scale: torch.Tensor | None = None,
        output_block_scale: torch.Tensor | None = None,
    ) -> torch.Tensor:
        # query: [T, Hq, D]; kv_cache: [num_blocks, Hk, block_size, 2D]; output: [T, Hq, D]
        step = getattr(attn_metadata, "step", None)
        if self.vllm_kernel_reason is not None or step is None or output_scale is not None:
            return super().forward(
                layer, query, key, value, kv_cache, attn_metadata, output, output_scale, output_block_scale
            )
        tokens = attn_metadata.num_actual_tokens
        out = output[:tokens]
        result = vllm_cpu_layout.paged_attention(query[:tokens], kv_cache, step, self.scale, out)
        if result is not out:  # an injected fault returned a corrupted copy
            out.copy_(result)
        return output

    def do_kv_cache_update(
        self,
        layer: torch.nn.Module,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        slot_mapping: torch.Tensor,
    ) -> None:
        # key, value: [T, Hk, D]; slot_mapping: [T'] with T' <= T
        if self.vllm_kernel_reason is not None:
            super().do_kv_cache_update(layer, key, value, kv_cache, slot_mapping)
            return
        vllm_cpu_layout.kv_write(key, value, kv_cache, slot_mapping)


class AscendBackendAttentionBackend(CPUAttentionBackend):
    """CPU_ATTN with ascend_backend's kernels; the name stays CPU_ATTN so vLLM's checks still match."""

    @staticmethod
    def get_impl_cls() -> type[AscendBackendAttentionImpl]:
        return AscendBackendAttentionImpl

    @staticmethod
    def get_builder_cls() -> type[AscendBackendMetadataBuilder]:
        return AscendBackendMetadataBuilder


BACKEND_PATH = f"{AscendBackendAttentionBackend.__module__}.{AscendBackendAttentionBackend.__qualname__}"
