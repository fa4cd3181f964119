"""Shard layouts read from vLLM 0.32's own layer classes, checked against vLLM's own weight sharding.

Each layer is built once per simulated rank (vLLM's tensor-parallel group replaced by a stand-in holding
the rank and the size), loaded with the same full weights through vLLM's weight loaders, which cut each
rank's shard, and run on the same input. Gathering the rank outputs with the layout the recorder
writes must give the TP=1 layer's output exactly: the layout is right for vLLM's sharding, not for a
sharding we imagined. Row-parallel partial sums add up to the TP=1 output.
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace
from unittest import mock

import pytest
import torch
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.distributed import parallel_state
from vllm.model_executor.layers import linear

from ascend_backend.dump_format import ShardKind, ShardLayout
from ascend_backend.vllm_plugin.shards import layer_layout, parallel_info, tensor_parallel_place
from workbench.accuracy.dump_gather import gather_split

HIDDEN, HEAD = 256, 64


@contextlib.contextmanager
def tp_rank(rank: int, size: int, world: int | None = None):
    """vLLM's TP (and world, PP) groups replaced by stand-ins: what layer constructors and loaders read."""
    group = SimpleNamespace(rank_in_group=rank, world_size=size)
    whole = SimpleNamespace(rank_in_group=rank, world_size=world or size)
    with (
        mock.patch.object(parallel_state, "_TP", group),
        mock.patch.object(parallel_state, "_PP", SimpleNamespace(rank_in_group=0, world_size=1)),
        mock.patch.object(parallel_state, "_WORLD", whole),
    ):
        yield


@pytest.fixture(autouse=True, scope="module")
def vllm_config():
    with set_current_vllm_config(VllmConfig()):
        yield


def build(make, rank: int, size: int, weights: dict) -> torch.nn.Module:
    """One rank's layer: constructed and loaded under that rank, weights cut by vLLM's loader."""
    with tp_rank(rank, size):
        layer = make()
        for shard_id, weight in weights.items():
            if shard_id is None:
                layer.weight_loader(layer.weight, weight)
            else:
                layer.weight_loader(layer.weight, weight, shard_id)
        layer.quant_method.process_weights_after_loading(layer)
    return layer


def rank_outputs(make, size: int, weights: dict, x: torch.Tensor) -> tuple[list[torch.Tensor], torch.nn.Module]:
    layers = [build(make, r, size, weights) for r in range(size)]
    return [layer(x)[0] for layer in layers], layers[0]


@pytest.mark.parametrize(("size", "kv_heads", "replicas"), [(2, 2, 1), (4, 2, 2), (2, 1, 2)])
def test_qkv_gathers_to_the_tp1_layout_with_replicated_kv_heads_taken_once(size, kv_heads, replicas):
    torch.manual_seed(0)
    weights = {
        "q": torch.randn(4 * HEAD, HIDDEN),
        "k": torch.randn(kv_heads * HEAD, HIDDEN),
        "v": torch.randn(kv_heads * HEAD, HIDDEN),
    }
    x = torch.randn(3, HIDDEN)  # [T, H]

    def make():
        return linear.QKVParallelLinear(HIDDEN, HEAD, 4, kv_heads, bias=False, params_dtype=torch.float32)

    whole = build(make, 0, 1, weights)(x)[0]  # [T, (4 + 2 kv) * HEAD]
    outputs, first = rank_outputs(make, size, weights, x)
    (layout,) = layer_layout(first)
    q_width, kv_width = 4 * HEAD // size, max(1, kv_heads // size) * HEAD
    assert layout == ShardLayout(ShardKind.SPLIT, (q_width, kv_width, kv_width), (1, replicas, replicas))
    torch.testing.assert_close(gather_split(outputs, layout), whole, rtol=0, atol=1e-5)
    # concatenating the rank outputs as they come interleaves q, k, v: the naive gather is wrong
    assert not torch.allclose(torch.cat(outputs, dim=-1)[:, : whole.shape[1]], whole)


def test_merged_gate_up_gathers_gate_then_up():
    torch.manual_seed(1)
    weights = {0: torch.randn(96, HIDDEN), 1: torch.randn(96, HIDDEN)}
    x = torch.randn(5, HIDDEN)

    def make():
        return linear.MergedColumnParallelLinear(HIDDEN, [96, 96], bias=False, params_dtype=torch.float32)

    whole = build(make, 0, 1, weights)(x)[0]
    outputs, first = rank_outputs(make, 2, weights, x)
    (layout,) = layer_layout(first)
    assert layout == ShardLayout(ShardKind.SPLIT, (48, 48), (1, 1))
    torch.testing.assert_close(gather_split(outputs, layout), whole, rtol=0, atol=1e-5)


def test_plain_column_parallel_concatenates_and_a_gathered_one_is_replicated():
    torch.manual_seed(2)
    weights = {None: torch.randn(64, HIDDEN)}  # shard id None: a plain column-parallel loader takes none
    x = torch.randn(2, HIDDEN)

    def make(gather: bool = False):
        return linear.ColumnParallelLinear(HIDDEN, 64, bias=False, gather_output=gather, params_dtype=torch.float32)

    whole = build(make, 0, 1, weights)(x)[0]
    layers = [build(make, rank, 2, weights) for rank in range(2)]
    shards = [layer(x)[0] for layer in layers]
    layer = layers[0]
    (layout,) = layer_layout(layer)
    assert layout == ShardLayout(ShardKind.SPLIT, (32,), (1,))
    torch.testing.assert_close(gather_split(shards, layout), whole, rtol=0, atol=1e-5)
    with tp_rank(0, 2):
        assert layer_layout(make(gather=True)) == (ShardLayout(ShardKind.REPLICATED),)


def test_row_parallel_is_partial_before_its_all_reduce_and_replicated_after():
    torch.manual_seed(3)
    weight = torch.randn(HIDDEN, 128)
    x = torch.randn(4, 128)  # the full input; each rank takes its slice as vLLM's column-parallel layer hands it

    def make(reduce: bool):
        return linear.RowParallelLinear(128, HIDDEN, bias=False, reduce_results=reduce, params_dtype=torch.float32)

    whole = build(lambda: make(True), 0, 1, {None: weight})(x)[0]
    layers = [build(lambda: make(False), rank, 2, {None: weight}) for rank in range(2)]
    partial = [layer(x[:, rank * 64 : (rank + 1) * 64])[0] for rank, layer in enumerate(layers)]
    layer = layers[1]
    assert layer_layout(layer) == (ShardLayout(ShardKind.PARTIAL),)
    torch.testing.assert_close(torch.stack(partial).sum(0), whole, rtol=1e-5, atol=1e-4)
    with tp_rank(0, 2):
        assert layer_layout(make(True)) == (ShardLayout(ShardKind.REPLICATED),)


def test_parallel_info_lists_sharded_modules_and_their_neighbours():
    """A Qwen2-shaped attention and MLP block at TP=2: rotary_emb takes q and k from the qkv beside it,
    act_fn one part of gate_up; o_proj and down_proj are reduced, so replicated and left unlisted."""

    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv_proj = linear.QKVParallelLinear(HIDDEN, HEAD, 4, 2, bias=False, params_dtype=torch.float32)
            self.o_proj = linear.RowParallelLinear(HIDDEN, HIDDEN, bias=False, params_dtype=torch.float32)
            self.rotary_emb = torch.nn.Identity()

    class Mlp(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_up_proj = linear.MergedColumnParallelLinear(
                HIDDEN, [96, 96], bias=False, params_dtype=torch.float32
            )
            self.down_proj = linear.RowParallelLinear(96, HIDDEN, bias=False, params_dtype=torch.float32)
            self.act_fn = torch.nn.SiLU()

    with tp_rank(1, 2):
        block = torch.nn.ModuleDict({"self_attn": Attention(), "mlp": Mlp()})
        names = tuple(n for n, _ in block.named_modules() if n)
        info = parallel_info(block, names, "<root>")
        assert tensor_parallel_place() == (1, 2, 2)
    assert (info.tp_rank, info.tp_size, info.world_size) == (1, 2, 2)
    assert set(info.layouts) == {"self_attn.qkv_proj", "self_attn.rotary_emb", "mlp.gate_up_proj", "mlp.act_fn"}
    q, k = info.layouts["self_attn.rotary_emb"]
    assert (q.parts, k.parts, k.replicas) == ((128,), (64,), (1,))
    assert info.layouts["mlp.act_fn"] == (ShardLayout(ShardKind.SPLIT, (48,), (1,)),)
    assert info.layout("self_attn.o_proj", 0).kind is ShardKind.REPLICATED  # unlisted: the default
    assert info.layout("self_attn.rotary_emb", 1) == k and info.layout("self_attn.rotary_emb", 5) == k


def test_a_single_rank_engine_records_no_parallel_info():
    with tp_rank(0, 1):
        assert parallel_info(torch.nn.Linear(2, 2), ("<root>",), "<root>") is None
