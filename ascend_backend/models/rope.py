"""cos/sin cache for a model's RoPE, including linear and Llama-3 frequency scaling."""

from __future__ import annotations

import math

import torch

from ascend_backend.models.config import ModelConfig


def inverse_frequencies(config: ModelConfig) -> torch.Tensor:
    """[head_size/2] float64 inverse frequencies after the config's scaling rule."""
    dim = config.head_size
    inv = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    scaling = config.rope_scaling
    if scaling.kind == "linear":
        return inv / scaling.factor
    if scaling.kind == "llama3":
        # Long wavelengths are slowed by `factor`, short ones kept, the band between interpolated.
        low_wavelen = scaling.original_max_position / scaling.low_freq_factor
        high_wavelen = scaling.original_max_position / scaling.high_freq_factor
        wavelen = 2 * math.pi / inv
        smooth = (scaling.original_max_position / wavelen - scaling.low_freq_factor) / (
            scaling.high_freq_factor - scaling.low_freq_factor
        )
        scaled = torch.where(wavelen > low_wavelen, inv / scaling.factor, inv)
        middle = (wavelen <= low_wavelen) & (wavelen >= high_wavelen)
        return torch.where(middle, (1 - smooth) * inv / scaling.factor + smooth * inv, scaled)
    return inv


def model_cos_sin_cache(config: ModelConfig, max_position: int | None = None) -> torch.Tensor:
    """[max_position, head_size] float32 = [cos | sin], the layout ops.rotary_embedding takes."""
    positions = torch.arange(max_position or config.max_position, dtype=torch.float64)
    angles = torch.outer(positions, inverse_frequencies(config))
    return torch.cat([angles.cos(), angles.sin()], dim=-1).float()
