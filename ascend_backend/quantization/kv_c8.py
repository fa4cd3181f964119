"""KV cache int8 ("C8"): per-channel static scales, fake-quantized at the cache write, written per release.

At the registry's cache-write op (`reshape_and_cache`) each new key and value is rounded to int8 with one
static scale per channel (kv head x head dim) and dequantized before it is stored, so every later
attention read sees what an int8 cache would hold (`fakequant.fake_quant_kv`; accuracy labelled
fake-quant). Scales come from calibration: the same write, in observing mode, records max |k| and |v| per
channel (`fakequant.kv_channel_scale`: s = max / 127).

    with kv_cache_write(observe_kv(layer_of, amax)):       # calibrate: amax[layer] = (key [H, D], value [H, D])
        model.prefill(...)
    scales = {i: KVScales.from_amax(*amax[i]) for i in amax}
    with kv_cache_write(fake_quant_kv_write(layer_of, scales)):
        model.prefill(...)                                   # scored with an int8 KV cache

vllm-ascend reads C8 under different names per release (the capability table's kv rows):

    layout "antiquant"   v0.11.0: description "kv_quant_type": "C8"; tensors
                         model.layers.N.self_attn.attn.{key,value}_antiquant_scale [H * D] float16
                         (w8a8.py AscendC8KVCacheMethod.create_weights, v0.11.0:363)
    (none)               v0.13.0: no C8 method
    layout "cache_scale" v0.18.0 on: description "kv_cache_type": "C8"; tensors
                         model.layers.N.self_attn.{k,v}_proj.kv_cache_{scale,offset} (float32, any shape: the
                         loader squeezes and keeps the stored shape; kv_c8.py `_c8_kv_scale_weight_loader`, v0.18.0)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import torch

from ascend_backend.quantization.fakequant import fake_quant_kv, kv_channel_scale
from ascend_backend.registry import REGISTRY, Backend

LAYOUTS = ("antiquant", "cache_scale")
KVWrite = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class KVScales:
    key: torch.Tensor  # [kv_heads, head_size] float32
    value: torch.Tensor  # [kv_heads, head_size] float32

    @classmethod
    def from_amax(cls, key_amax: torch.Tensor, value_amax: torch.Tensor) -> KVScales:
        return cls(kv_channel_scale(key_amax), kv_channel_scale(value_amax))


@contextlib.contextmanager
def kv_cache_write(hook: KVWrite) -> Iterator[None]:
    """Inside the block, the registry's `reshape_and_cache` runs its native implementation on
    `hook(key, value, kv_cache)` instead of (key, value).

    The registry keeps the native implementation as the reference and has no scoped way to wrap it, so this
    swaps the entry's native function for the block, inside `forced_native` (which pins the op to native and
    drops the cached routes on entry and on exit, so no route keeps the wrapper). The original is put back
    on exit, errors included. One process, one thread: the executor's, never a live vLLM engine.
    """
    entry = REGISTRY.entry("reshape_and_cache")
    original = entry.impls[Backend.NATIVE]

    def through_hook(key, value, kv_cache, slot_mapping):
        key, value = hook(key, value, kv_cache)
        return original(key, value, kv_cache, slot_mapping)

    with REGISTRY.forced_native("reshape_and_cache"):
        entry.impls[Backend.NATIVE] = through_hook
        try:
            yield
        finally:
            entry.impls[Backend.NATIVE] = original


def layer_finder(kv_caches: list[torch.Tensor]) -> Callable[[torch.Tensor], int]:
    """The decoder layer a cache tensor belongs to (each layer owns one [2, blocks, block, H, D] cache)."""
    by_pointer = {cache.data_ptr(): index for index, cache in enumerate(kv_caches)}

    def find(kv_cache: torch.Tensor) -> int:
        try:
            return by_pointer[kv_cache.data_ptr()]
        except KeyError:
            raise ValueError("a KV cache write to a cache this C8 hook was not given") from None

    return find


def observe_kv(layer_of: Callable[[torch.Tensor], int], amax: dict[int, tuple[torch.Tensor, torch.Tensor]]) -> KVWrite:
    """A hook that widens amax[layer] = (max |key|, max |value|) per channel and writes unchanged."""

    def hook(key, value, kv_cache):
        layer = layer_of(kv_cache)
        k, v = key.detach().abs().amax(dim=0).float(), value.detach().abs().amax(dim=0).float()  # [H, D]
        if layer in amax:
            k, v = torch.maximum(k, amax[layer][0]), torch.maximum(v, amax[layer][1])
        amax[layer] = (k, v)
        return key, value

    return hook


def fake_quant_kv_write(layer_of: Callable[[torch.Tensor], int], scales: Mapping[int, KVScales]) -> KVWrite:
    """A hook that rounds key and value to int8 with their layer's per-channel scales."""

    def hook(key, value, kv_cache):
        s = scales[layer_of(kv_cache)]
        return fake_quant_kv(key, s.key), fake_quant_kv(value, s.value)

    return hook


def c8_tensors(scales: Mapping[int, KVScales], layout: str, stem: str = "model.layers") -> tuple[dict, dict]:
    """(tensors, description keys) of the C8 scales in `layout` (see the module docstring)."""
    tensors: dict[str, torch.Tensor] = {}
    if layout == "antiquant":
        for i, s in scales.items():
            tensors[f"{stem}.{i}.self_attn.attn.key_antiquant_scale"] = s.key.flatten().to(torch.float16)
            tensors[f"{stem}.{i}.self_attn.attn.value_antiquant_scale"] = s.value.flatten().to(torch.float16)
        return tensors, {"kv_quant_type": "C8"}
    if layout == "cache_scale":
        for i, s in scales.items():
            for proj, scale in (("k_proj", s.key), ("v_proj", s.value)):
                tensors[f"{stem}.{i}.self_attn.{proj}.kv_cache_scale"] = scale.flatten().float()
                tensors[f"{stem}.{i}.self_attn.{proj}.kv_cache_offset"] = torch.zeros(scale.numel())
        return tensors, {"kv_cache_type": "C8"}
    raise ValueError(f"C8 layout {layout!r}: one of {', '.join(LAYOUTS)}")


def read_c8(tensors: Mapping[str, torch.Tensor], kv_heads: int, head_size: int) -> dict[int, KVScales]:
    """Scales back from either layout's tensors (per layer), shaped [kv_heads, head_size]."""
    found: dict[int, dict[str, torch.Tensor]] = {}
    names = {
        "key_antiquant_scale": "key",
        "value_antiquant_scale": "value",
        "k_proj.kv_cache_scale": "key",
        "v_proj.kv_cache_scale": "value",
    }
    for name, tensor in tensors.items():
        for suffix, which in names.items():
            if name.endswith(suffix):
                layer = int(name.split(".layers.", 1)[1].split(".", 1)[0])
                found.setdefault(layer, {})[which] = tensor.float().reshape(kv_heads, head_size)
    return {i: KVScales(parts["key"], parts["value"]) for i, parts in sorted(found.items())}
