"""C8: calibrated at the cache write, fake-quantized there, written in both releases' layouts and read back."""

from __future__ import annotations

import pytest
import torch

from ascend_backend.attention.ops import reshape_and_cache
from ascend_backend.models import Executor, SamplingParams
from ascend_backend.quantization.kv_c8 import (
    KVScales,
    c8_tensors,
    fake_quant_kv_write,
    kv_cache_write,
    layer_finder,
    observe_kv,
    read_c8,
)
from ascend_backend.registry import REGISTRY, Backend

PROMPTS = [[1, 5, 9, 14, 20, 33, 47, 60], list(range(10, 40))]


def test_the_cache_write_hook_wraps_the_registry_op_and_is_removed_after():
    cache = torch.zeros(2, 2, 32, 1, 4)
    key, value = torch.full((1, 1, 4), 0.3), torch.full((1, 1, 4), -0.7)
    slots = torch.tensor([5], dtype=torch.int32)
    with kv_cache_write(lambda k, v, c: (k * 2, v * 2)):
        reshape_and_cache(key, value, cache, slots)
    assert torch.allclose(cache[0, 0, 5], torch.full((1, 4), 0.6)) and torch.allclose(
        cache[1, 0, 5], torch.full((1, 4), -1.4)
    )
    reshape_and_cache(key, value, cache, slots)  # outside the block: the native write again
    assert torch.allclose(cache[0, 0, 5], torch.full((1, 4), 0.3))
    assert REGISTRY.impl("reshape_and_cache", Backend.NATIVE).__name__ == "reshape_and_cache_native"


def test_c8_is_calibrated_and_applied_at_the_cache_write(float_dir):
    executor = Executor.from_pretrained(
        float_dir, dtype=torch.float32, block_size=32, num_blocks=16, enable_prefix_caching=False
    )
    layer_of = layer_finder(executor.kv_caches)
    amax: dict = {}
    with kv_cache_write(observe_kv(layer_of, amax)):
        executor.generate(PROMPTS, SamplingParams(max_tokens=4, stop_at_eos=False))
    assert sorted(amax) == [0, 1] and amax[0][0].shape == (2, 16)  # [kv_heads, head_size] per layer
    scales = {i: KVScales.from_amax(*a) for i, a in amax.items()}
    float_out = executor.generate(PROMPTS, SamplingParams(max_tokens=6, stop_at_eos=False))
    for cache in executor.kv_caches:
        cache.zero_()  # only what the C8 run writes is checked below
    with kv_cache_write(fake_quant_kv_write(layer_of, scales)):
        c8_out = executor.generate(PROMPTS, SamplingParams(max_tokens=6, stop_at_eos=False))
        cache = executor.kv_caches[0]
    assert [len(r.token_ids) for r in c8_out] == [6, 6]
    # the stored keys sit on the int8 grid of their channel's scale
    written = cache[0].reshape(-1, 2, 16)
    written = written[written.abs().sum(dim=(1, 2)) > 0]
    steps = written / scales[0].key
    assert torch.allclose(steps, steps.round(), atol=1e-3) and steps.abs().max() <= 127.001
    assert float_out[0].token_ids[:1] == c8_out[0].token_ids[:1]  # the first token comes from the prefill


@pytest.mark.parametrize("layout", ["antiquant", "cache_scale"])
def test_both_layouts_round_trip(layout):
    g = torch.Generator().manual_seed(0)
    scales = {
        i: KVScales.from_amax(torch.rand(2, 16, generator=g) + 0.5, torch.rand(2, 16, generator=g) + 0.5)
        for i in range(2)
    }
    if layout == "antiquant":  # stored as float16: exact round trip for fp16-representable scales
        scales = {i: KVScales(s.key.half().float(), s.value.half().float()) for i, s in scales.items()}
    tensors, description = c8_tensors(scales, layout)
    assert description == ({"kv_quant_type": "C8"} if layout == "antiquant" else {"kv_cache_type": "C8"})
    if layout == "antiquant":
        assert "model.layers.1.self_attn.attn.value_antiquant_scale" in tensors
    else:
        assert "model.layers.1.self_attn.v_proj.kv_cache_offset" in tensors
    back = read_c8(tensors, 2, 16)
    assert all(torch.equal(back[i].key, scales[i].key) and torch.equal(back[i].value, scales[i].value) for i in scales)
    with pytest.raises(ValueError, match="C8 layout"):
        c8_tensors(scales, "v0.13.0")
