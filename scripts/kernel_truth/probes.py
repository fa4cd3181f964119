"""Where vllm-ascend makes each op's call at a tag, and which of the calls found belong to the op.

A probe turns (tree, cell) into entry points for the walker, read from the source of that tag:

- layers (norms, activations, rotary): the class vllm-ascend registers for vLLM's CustomOp name on
  that chip (`register_ascend_customop` in vllm_ascend/utils.py, its 310P overrides included), or the
  function it patches onto vLLM's class (`RMSNorm.forward_oot = forward_oot`, before v0.10.0rc1); the
  entry is the layer's `forward_oot`;
- attention and the cache write: the backend class the platform returns
  (`NPUPlatform.get_attn_backend_cls`, evaluated), its `get_impl_cls()`, and the impl's `forward`;
- quantized linears: the scheme class the quantization config maps the layer's quant type to, and
  its `apply` (and `process_weights_after_loading` for the weight's layout).

`FAMILIES` says which kernels found on the path count for an op (an attention walk also passes the
cache write; a norm walk passes prefetch helpers).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from scripts.kernel_truth.facts import Cell
from scripts.kernel_truth.trace import ClassRef, Ext, FuncRef, ModuleRef, Opaque, Walker, is_unknown

ATTENTION_OPS = {
    "prefill_attention": "PrefillNoCache",
    "prefill_cache_hit_attention": "PrefillCacheHit",
    "paged_decode_attention": "DecodeOnly",
    "chunked_prefill_attention": "ChunkedPrefill",
}
# Functions that appear on a path without being the op's compute kernel.
AUXILIARY = frozenset(
    {
        "npu_format_cast",
        "_npu_paged_attention_get_workspace",
        "_npu_fused_infer_attention_score_get_max_workspace",
        "_npu_fused_infer_attention_score_v2_get_max_workspace",
        "npu_prefetch",
        "get_npu_format",
        "npu_dtype_cast",
    }
)
CACHE_WRITE = ("reshape_and_cache", "scatter_pa_kv_cache", "npu_kv_rmsnorm_rope_cache")


def family(op: str, name: str, kind: str) -> bool:
    """Whether a call found on `op`'s path is the op's own kernel (or vllm-ascend's refusal / native path)."""
    if kind in ("raise", "native"):
        return True
    base = name.split(":", 1)[-1].split(".")[-1]
    if kind == "torch_npu" and base.removesuffix(".out") in AUXILIARY and op != "quant_weight_layout":
        return False
    if op == "reshape_and_cache":
        return any(k in name for k in CACHE_WRITE)
    if op in ATTENTION_OPS:
        return ("attention" in name or "flash" in name or "attn" in name) and not any(k in name for k in CACHE_WRITE)
    if op in ("rms_norm", "add_rms_norm", "gemma_rms_norm", "gemma_add_rms_norm"):
        return "norm" in name
    if op == "silu_and_mul":
        return "swiglu" in name or "silu" in name
    if op in ("quick_gelu", "gelu", "gelu_tanh"):
        return "gelu" in name
    if op in ("rotary_embedding", "mrope"):
        return "rope" in name or "rotary" in name or "rot" in name
    if op.endswith("_linear"):
        return "quant" in name or "matmul" in name or "mm" in name
    if op == "quant_weight_layout":
        return "format_cast" in name
    if op == "add_rms_norm_quant":
        return "norm" in name or "quantize" in name
    return True


@dataclass(frozen=True)
class Entry:
    func: FuncRef
    args: dict[str, Any]
    label: str  # 'AscendRMSNorm.forward_oot (vllm_ascend/ops/layernorm.py:72)'


@dataclass(frozen=True)
class NoEntry:
    """vllm-ascend has no implementation of its own here: vLLM's native layer runs (`native`) or none."""

    reason: str
    native: bool = True


# ------------------------------------------------------------------------------------------- layers
LAYER_NAMES = {
    "rms_norm": ("RMSNorm", {"residual": None}),
    "add_rms_norm": ("RMSNorm", {"residual": Opaque("residual")}),
    "gemma_rms_norm": ("GemmaRMSNorm", {"residual": None}),
    "gemma_add_rms_norm": ("GemmaRMSNorm", {"residual": Opaque("residual")}),
    "silu_and_mul": ("SiluAndMul", {}),
    "quick_gelu": ("QuickGELU", {}),
    "gelu": ("GELU", {}),
    "gelu_tanh": ("GELUTanh", {}),
    "rotary_embedding": ("RotaryEmbedding", {"offsets": None}),
    "mrope": ("MRotaryEmbedding", {"offsets": None}),
    "add_rms_norm_quant": ("RMSNorm", {"residual": Opaque("residual")}),
}


def registered_layer(walker: Walker, name: str) -> tuple[Any, str] | None:
    """(ClassRef or FuncRef, where) vllm-ascend installs for vLLM's CustomOp `name` at this tag, on this chip."""
    module = walker.tree.module("vllm_ascend/utils.py")
    if module is not None and "register_ascend_customop" in module.functions:
        func = module.functions["register_ascend_customop"]
        found = _registrations(walker, FuncRef(module, func), func.body)
        if name in found:
            return found[name]
    for path in walker.tree.grep(f"{name}.forward", "vllm_ascend/ops/"):
        patched = walker.tree.module(path)
        if patched is None:
            continue
        for stmt in patched.node.body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and ast.unparse(stmt.targets[0]) in (f"{name}.forward_oot", f"{name}.forward")
            ):
                value = walker.value(stmt.value, _module_frame(patched))
                if isinstance(value, FuncRef):
                    return value, f"{path}:{stmt.lineno}"
    return None


def _module_frame(module):
    from scripts.kernel_truth.trace import Frame

    return Frame(module, None)


def _registrations(walker: Walker, func: FuncRef, body: list[ast.stmt], frame=None) -> dict[str, tuple[Any, str]]:
    from scripts.kernel_truth.trace import Frame

    frame = frame or Frame(func.module, func)
    path = func.module.path
    found: dict[str, tuple[Any, str]] = {}

    def record(key: ast.expr, value: ast.expr, line: int) -> None:
        if isinstance(key, ast.Constant):
            target = walker.value(value, frame)
            if isinstance(target, ClassRef):
                found[key.value] = (target, f"{path}:{line}")

    for stmt in body:
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                frame.locals[alias.asname or alias.name] = walker._import((stmt.module or "", alias.name))
        elif isinstance(stmt, ast.If):
            verdict = walker.truth(stmt.test, frame)
            if verdict is not False:
                found.update(_registrations(walker, func, stmt.body, frame))
            if verdict is not True:
                found.update(_registrations(walker, func, stmt.orelse, frame))
        elif isinstance(stmt, (ast.Assign, ast.Expr)):
            value = stmt.value
            if isinstance(stmt, ast.Assign) and isinstance(value, ast.Dict):
                target = stmt.targets[0]
                if isinstance(target, ast.Name) and target.id == "REGISTERED_ASCEND_OPS":
                    for k, v in zip(value.keys, value.values):
                        record(k, v, v.lineno)
            if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Subscript):
                target = stmt.targets[0]
                if ast.unparse(target.value) == "REGISTERED_ASCEND_OPS":
                    record(target.slice, value, stmt.lineno)
            if isinstance(value, ast.Call):
                callee = ast.unparse(value.func)
                if (
                    callee.endswith("REGISTERED_ASCEND_OPS.update")
                    and value.args
                    and isinstance(value.args[0], ast.Dict)
                ):
                    for k, v in zip(value.args[0].keys, value.args[0].values):
                        record(k, v, v.lineno)
                if callee.endswith("register_oot"):
                    kwargs = {k.arg: k.value for k in value.keywords}
                    if "name" in kwargs and "_decorated_op_cls" in kwargs:
                        record(kwargs["name"], kwargs["_decorated_op_cls"], value.lineno)
    return found


def layer_entries(walker: Walker, cell: Cell) -> list[Entry] | NoEntry:
    name, args = LAYER_NAMES[cell.op]
    found = registered_layer(walker, name)
    if found is None:
        return NoEntry(f"vllm-ascend registers no {name} override: vLLM's {name}.forward_native runs")
    target, where = found
    if isinstance(target, ClassRef):
        method = None
        for klass in walker.mro(target.info):
            # A class that overrides `forward` itself bypasses CustomOp's dispatch to forward_oot.
            if "forward" in klass.methods:
                method = walker.method(target.info, "forward")
                break
            if "forward_oot" in klass.methods:
                method = walker.method(target.info, "forward_oot")
                break
        if method is None:
            return NoEntry(f"{target.info.name} ({where}) has no forward_oot: vLLM's forward_native runs")
        return [
            Entry(method, args, f"{method.qualname} ({method.module.path}:{method.node.lineno}); registered {where}")
        ]
    func: FuncRef = target
    return [
        Entry(
            func,
            {"self": Opaque("self"), **args},
            f"{func.qualname} ({func.module.path}:{func.node.lineno}); patched {where}",
        )
    ]


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
    states = walker._block(
        platform.node.body, frame, [__import__("scripts.kernel_truth.trace", fromlist=["State"]).State()]
    )
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
        impl_states = walker._block(get_impl.node.body, walker._frame_for(get_impl, {}, None, [], [], 0), [_state()])
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


def _state():
    from scripts.kernel_truth.trace import State

    return State()


def entries(walker: Walker, cell: Cell) -> list[Entry] | NoEntry:
    if cell.op == "add_rms_norm_quant":
        from scripts.kernel_truth.linears import fused_norm_quant_entries

        return fused_norm_quant_entries(walker, cell)
    if cell.op in LAYER_NAMES:
        return layer_entries(walker, cell)
    if cell.op in ATTENTION_OPS or cell.op == "reshape_and_cache":
        return attention_entries(walker, cell)
    from scripts.kernel_truth.linears import linear_entries

    return linear_entries(walker, cell)


__all__ = ["ATTENTION_OPS", "Entry", "NoEntry", "entries", "family", "is_unknown", "Ext", "ModuleRef"]
