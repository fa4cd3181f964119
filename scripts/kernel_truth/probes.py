"""Where vllm-ascend makes each op's call at a tag, and which of the calls found belong to the op.

A probe turns (tree, cell) into entry points for the walker, read from the source of that tag:

- layers (norms, activations, rotary): the class vllm-ascend registers for vLLM's CustomOp name on
  that chip, and its `forward_oot` (`layers.py`);
- attention and the cache write: the backend class the platform returns
  (`NPUPlatform.get_attn_backend_cls`, evaluated), its `get_impl_cls()`, and the impl's `forward` (here);
- quantized linears: the scheme class the quantization config maps the layer's quant type to, and
  its `apply` (and `process_weights_after_loading` for the weight's layout) (`linears.py`).

`entries(walker, cell)` picks the probe for the cell's op; `entries.family` says which kernels found on
the path count for that op.
"""

from __future__ import annotations

from scripts.kernel_truth.entries import ATTENTION_OPS, Entry, NoEntry
from scripts.kernel_truth.facts import Cell
from scripts.kernel_truth.layers import LAYER_NAMES, layer_entries
from scripts.kernel_truth.linears import fused_norm_quant_entries, linear_entries
from scripts.kernel_truth.paths import State
from scripts.kernel_truth.trace import Walker
from scripts.kernel_truth.values import ClassRef, Opaque


# ------------------------------------------------------------------------------------------- attention
def attention_entries(walker: Walker, cell: Cell) -> list[Entry] | NoEntry:
    platform = walker.function("vllm_ascend/platform.py", "NPUPlatform.get_attn_backend_cls")
    if platform is None:
        return NoEntry("no NPUPlatform.get_attn_backend_cls", native=False)

    frame = walker._frame_for(platform, {}, None, [], [], 0)
    for name in list(frame.locals):
        if name in ("use_v1",):
            frame.locals[name] = True
        elif name.startswith("use_") or name in ("has_sink",):
            frame.locals[name] = False
        elif name == "attn_selector_config":
            frame.locals[name] = Opaque("attn_selector_config")
    states = walker._block(platform.node.body, frame, [State()])
    paths = {s.ret for s in states if isinstance(s.ret, str)}
    if len(paths) != 1:
        return NoEntry(f"attention backend undecided: {sorted(map(str, paths)) or 'none'}", native=False)
    dotted = paths.pop()
    module_name, _, cls_name = dotted.rpartition(".")
    module = walker.tree.module_by_name(module_name)
    if module is None or cls_name not in module.classes:
        return NoEntry(f"backend {dotted} not found", native=False)
    backend = module.classes[cls_name]
    get_impl = walker.method(backend, "get_impl_cls")
    impl = None
    if get_impl is not None:
        impl_states = walker._block(get_impl.node.body, walker._frame_for(get_impl, {}, None, [], [], 0), [State()])
        impls = {id(s.ret.info): s.ret for s in impl_states if isinstance(s.ret, ClassRef)}
        if len(impls) == 1:
            impl = next(iter(impls.values()))
    if impl is None:
        return NoEntry(f"{cls_name}.get_impl_cls undecided", native=False)
    forward = walker.method(impl.info, "forward")
    if forward is None:
        return NoEntry(f"{impl.info.name} has no forward", native=False)
    args = {
        "trace_flag": False,
        "attn_metadata": Opaque("attn_metadata"),
        "kv_cache": Opaque("kv_cache"),
        "output": Opaque("output"),
    }
    return [
        Entry(
            forward, args, f"{impl.info.name}.forward ({forward.module.path}:{forward.node.lineno}); backend {dotted}"
        )
    ]


def entries(walker: Walker, cell: Cell) -> list[Entry] | NoEntry:
    if cell.op == "add_rms_norm_quant":
        return fused_norm_quant_entries(walker, cell)
    if cell.op in LAYER_NAMES:
        return layer_entries(walker, cell)
    if cell.op in ATTENTION_OPS or cell.op == "reshape_and_cache":
        return attention_entries(walker, cell)
    return linear_entries(walker, cell)
