"""How each module output of a tensor-parallel vLLM model is spread over the ranks, read from its layer types.

A rank of a TP=N engine records its own part of the model (`dump`, one directory per rank). To compare a
TP=N dump with a TP=1 one, a reader must know, per module output, whether the rank holds all of it, a
slice of it or a partial sum. vLLM 0.32's layer classes say so (vllm/model_executor/layers/linear.py,
vocab_parallel_embedding.py, attention/attention.py, logits_processor.py):

| layer                                   | output on one rank                                 | layout      |
|-----------------------------------------|----------------------------------------------------|-------------|
| ColumnParallelLinear, gather_output off | [T, out / N]                                       | split       |
| MergedColumnParallelLinear (gate_up)    | [T, gate / N  up / N]: its slice of each part      | split, parts|
| QKVParallelLinear (qkv)                 | [T, q / N  k  v]; KV heads replicated when N > KV  | split, parts|
| RowParallelLinear, reduce_results on    | [T, out], all-reduced inside forward               | replicated  |
| RowParallelLinear, reduce_results off   | [T, out], this rank's partial sum                  | partial     |
| VocabParallelEmbedding                  | [T, H], all-reduced inside forward                 | replicated  |
| LogitsProcessor                         | [S, V], all-gathered (or gathered to rank 0 only)  | replicated  |
| Attention (`attn`)                      | [T, heads / N * head_size]                         | split       |
| rotary_emb beside a qkv_proj            | (q [T, q / N], k [T, k / N]), k's KV replicas      | split, split|
| act_fn beside a gate_up_proj            | [T, intermediate / N]                              | split       |
| anything else (norms, decoder layers,   | the whole tensor (it consumes all-reduced values)  | replicated  |
|  mlp, self_attn, the model)             |                                                    |             |

The last row is a claim, not a proof: a model could shard a module this table does not know (per-head
norms on sharded heads), and vllm-ascend's linear layers can swap vLLM's all-reduce for a reduce-scatter
over the *tokens* when its sequence-parallel, MLP or o_proj tensor-parallel options are on (the custom ops
of vllm_ascend/ops/linear_op.py at v0.25.1rc1: MLPRowParallelOp, OProjRowParallelOp, SequenceRowParallelOp),
so each rank then holds some rows of a whole-width tensor. The reader checks every replicated claim
against the ranks' statistics and leaves out, by name, a module whose ranks disagree, rather than compare
it wrongly. Pure inspection of the loaded model; needs vLLM.
"""

from __future__ import annotations

from torch import nn

from ascend_backend.dump_format import ParallelInfo, ShardKind, ShardLayout

_SIBLING_QKV = "qkv_proj"
_SIBLING_GATE_UP = "gate_up_proj"


def tensor_parallel_place() -> tuple[int, int, int]:
    """(tp_rank, tp_size, world_size) of this process; (0, 1, 1) outside a distributed vLLM engine."""
    try:
        from vllm.distributed import parallel_state
    except ImportError:
        return 0, 1, 1
    if not parallel_state.model_parallel_is_initialized():
        return 0, 1, 1
    tp = parallel_state.get_tp_group()
    world = parallel_state.get_world_group()
    return int(tp.rank_in_group), int(tp.world_size), int(world.world_size)


def _split(*parts: int, replicas: tuple[int, ...] | None = None) -> ShardLayout:
    return ShardLayout(ShardKind.SPLIT, tuple(int(p) for p in parts), replicas or (1,) * len(parts))


def _qkv_parts(layer: nn.Module) -> tuple[ShardLayout, ShardLayout]:
    """(the q part, the k part) of a QKVParallelLinear: this rank's widths and the KV replicas."""
    replicas = int(getattr(layer, "num_kv_head_replicas", 1))
    q = _split(layer.num_heads * layer.head_size)
    k = _split(layer.num_kv_heads * layer.head_size, replicas=(replicas,))
    return q, k


def layer_layout(layer: nn.Module) -> tuple[ShardLayout, ...] | None:
    """The layouts of `layer`'s outputs from its own type, or None when its type says nothing."""
    from vllm.model_executor.layers.attention.attention import Attention
    from vllm.model_executor.layers.linear import (
        ColumnParallelLinear,
        MergedColumnParallelLinear,
        QKVParallelLinear,
        RowParallelLinear,
    )
    from vllm.model_executor.layers.logits_processor import LogitsProcessor
    from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding

    if getattr(layer, "tp_size", 1) == 1 and isinstance(layer, ColumnParallelLinear | RowParallelLinear):
        return (ShardLayout(ShardKind.REPLICATED),)  # disable_tp: the layer is whole on every rank
    if isinstance(layer, QKVParallelLinear):
        q, k = _qkv_parts(layer)
        v = layer.num_kv_heads * layer.v_head_size
        return (_split(q.parts[0], k.parts[0], v, replicas=(1, k.replicas[0], k.replicas[0])),)
    if isinstance(layer, ColumnParallelLinear):  # MergedColumnParallelLinear included
        if layer.gather_output:
            return (ShardLayout(ShardKind.REPLICATED),)
        if isinstance(layer, MergedColumnParallelLinear):
            return (_split(*layer.output_partition_sizes),)
        return (_split(layer.output_size_per_partition),)
    if isinstance(layer, RowParallelLinear):
        return (ShardLayout(ShardKind.REPLICATED if layer.reduce_results else ShardKind.PARTIAL),)
    if isinstance(layer, VocabParallelEmbedding | LogitsProcessor):
        return (ShardLayout(ShardKind.REPLICATED),)
    if isinstance(layer, Attention):
        return (_split(layer.num_heads * layer.head_size_v),)
    return None


def _sibling_layout(name: str, modules: dict[str, nn.Module]) -> tuple[ShardLayout, ...] | None:
    """rotary_emb and act_fn take their layout from the projection beside them (see the module table)."""
    from vllm.model_executor.layers.linear import MergedColumnParallelLinear, QKVParallelLinear

    parent, _, leaf = name.rpartition(".")
    prefix = parent + "." if parent else ""
    if leaf == "rotary_emb":
        qkv = modules.get(prefix + _SIBLING_QKV)
        if isinstance(qkv, QKVParallelLinear) and qkv.tp_size > 1:
            return _qkv_parts(qkv)  # (rotated q, rotated k)
    if leaf == "act_fn":
        gate_up = modules.get(prefix + _SIBLING_GATE_UP)
        if isinstance(gate_up, MergedColumnParallelLinear) and gate_up.tp_size > 1 and not gate_up.gather_output:
            return (_split(gate_up.output_partition_sizes[0]),)  # silu(gate) * up: one part's width
    return None


def parallel_info(model: nn.Module, selected: tuple[str, ...], root_name: str) -> ParallelInfo | None:
    """This rank's place and the layout of every selected module, or None for a single-rank engine."""
    tp_rank, tp_size, world_size = tensor_parallel_place()
    if tp_size == 1 and world_size == 1:
        return None
    modules = {n or root_name: m for n, m in model.named_modules()}
    layouts: dict[str, tuple[ShardLayout, ...]] = {}
    for name in selected:
        found = layer_layout(modules[name]) or _sibling_layout(name, modules)
        if found is not None and any(layout.kind is not ShardKind.REPLICATED for layout in found):
            layouts[name] = found  # replicated modules are the default and stay unlisted
    return ParallelInfo(tp_rank, tp_size, world_size, layouts)


__all__ = ["layer_layout", "parallel_info", "tensor_parallel_place"]
