"""Planted outliers: a float checkpoint whose chosen units see one huge input channel, with the same logits.

The test of a sensitivity proxy is whether it finds outliers we know are there. For each chosen unit, one
input channel c is scaled up by `factor` where the unit's input is made and the unit's own weight column
c is scaled down by the same factor, so the float model computes the same function:

    unit      scaled up (the producer)                            scaled down (the consumer)
    qkv       input_layernorm.weight[c]                           q/k/v_proj.weight[:, c]
    gate_up   post_attention_layernorm.weight[c]                  gate/up_proj.weight[:, c]
    down      up_proj.weight[c, :]  (silu(gate) * up is linear in up)   down_proj.weight[:, c]
    o         v_proj.weight[j, :] (+ bias[j]) for kv channel j    o_proj.weight[:, h * head_size + d] for every
              (kv head g, dim d)                                  query head h that reads kv head g

`factor` is a power of two, so both scalings are exact in any binary float format: the float model's
logits are bit-for-bit those of the source (a test checks |diff| <= 1e-4), while the unit's input range
grows by `factor` in one channel -- what a per-tensor (or per-token) int8 scale cannot absorb.
"""

from __future__ import annotations

import json
import math
import random
import shutil
from collections.abc import Sequence
from pathlib import Path

import torch

from ascend_backend.models.config import ModelConfig
from ascend_backend.quantization import linear_prefixes
from ascend_backend.quantization.files import read_tensors, write_tensors
from ascend_backend.quantization.units import RollbackUnit, rollback_units
from workbench.errors import WorkbenchError

DEFAULT_FACTOR = 64.0


def _check_factor(factor: float) -> None:
    exponent = math.log2(factor) if factor > 0 else 0.5
    if factor <= 1 or exponent != int(exponent):
        raise WorkbenchError(f"planting factor {factor}: a power of two above 1 (exact in every float format)")


def plant(
    state: dict[str, torch.Tensor], config: ModelConfig, unit: RollbackUnit, factor: float, channel_seed: int
) -> int:
    """Scale one channel of `unit`'s input up and its consumer down, in place; returns the channel."""
    _check_factor(factor)
    stem = unit.name.rsplit(".", 1)[0]
    rng = random.Random(channel_seed)
    if unit.kind in ("qkv", "gate_up"):
        norm = "input_layernorm" if unit.kind == "qkv" else "post_attention_layernorm"
        c = rng.randrange(config.hidden_size)
        state[f"{stem}.{norm}.weight"][c] *= factor
        for member in unit.members:
            state[f"{member}.weight"][:, c] /= factor
        return c
    if unit.kind == "down":
        c = rng.randrange(config.intermediate_size)
        state[f"{stem}.mlp.up_proj.weight"][c, :] *= factor
        state[f"{stem}.mlp.down_proj.weight"][:, c] /= factor
        return c
    if unit.kind == "o":
        j = rng.randrange(config.kv_size)
        state[f"{stem}.self_attn.v_proj.weight"][j, :] *= factor
        if f"{stem}.self_attn.v_proj.bias" in state:
            state[f"{stem}.self_attn.v_proj.bias"][j] *= factor
        group, dim = divmod(j, config.head_size)
        per_group = config.num_heads // config.num_kv_heads
        for head in range(group * per_group, (group + 1) * per_group):
            state[f"{stem}.self_attn.o_proj.weight"][:, head * config.head_size + dim] /= factor
        return j
    raise WorkbenchError(f"cannot plant an outlier into unit kind {unit.kind!r}")


def choose_units(units: Sequence[RollbackUnit], count: int, seed: int) -> list[RollbackUnit]:
    """`count` distinct units drawn with `seed` (the planted set of one benchmark seed)."""
    if not 0 < count <= len(units):
        raise WorkbenchError(f"cannot plant {count} outliers into {len(units)} units")
    return sorted(random.Random(seed).sample(list(units), count), key=lambda u: (u.layer, u.name))


def write_planted(
    source: Path, out: Path, unit_names: Sequence[str], *, factor: float = DEFAULT_FACTOR, seed: int = 0
) -> dict[str, int]:
    """Copy the float checkpoint `source` to `out` with outliers planted in `unit_names`; returns unit ->
    channel. Tensors keep their dtype (the scalings are exact), the other files are copied as they are."""
    config = ModelConfig.from_dir(source)
    state = {name: tensor.clone() for name, tensor in read_tensors(source).tensors.items()}
    units = {u.name: u for u in rollback_units(linear_prefixes(list(state)))}
    missing = [name for name in unit_names if name not in units]
    if missing:
        raise WorkbenchError(f"no unit {missing[0]!r} in {source}; units look like {next(iter(units))}")
    out.mkdir(parents=True, exist_ok=True)
    channels = {name: plant(state, config, units[name], factor, seed * 1000 + i) for i, name in enumerate(unit_names)}
    for item in source.iterdir():
        if item.is_file() and item.suffix != ".safetensors" and not item.name.endswith(".index.json"):
            shutil.copy2(item, out / item.name)
    write_tensors(state, out / "model.safetensors", {"format": "pt"})
    (out / "planted.json").write_text(json.dumps({"factor": factor, "channels": channels}, indent=1) + "\n")
    return channels
