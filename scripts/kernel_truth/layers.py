"""Where vllm-ascend makes a layer's call: the class it registers for vLLM's CustomOp name, or the function it
patches onto vLLM's class.

The class is read from `register_ascend_customop` in vllm_ascend/utils.py at the tag (its 310P overrides
included, branches decided under the cell's facts), or, before v0.10.0rc1, from the module that assigns
`RMSNorm.forward_oot = forward_oot`; the entry is the layer's `forward_oot` (or a `forward` that bypasses
CustomOp's dispatch).
"""

from __future__ import annotations

import ast
from typing import Any

from scripts.kernel_truth.entries import Entry, NoEntry
from scripts.kernel_truth.facts import Cell
from scripts.kernel_truth.paths import Frame
from scripts.kernel_truth.trace import Walker
from scripts.kernel_truth.values import ClassRef, FuncRef, Opaque

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
    return Frame(module, None)


def _registrations(walker: Walker, func: FuncRef, body: list[ast.stmt], frame=None) -> dict[str, tuple[Any, str]]:
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


# vllm-ascend's own model classes that gather cos/sin once per step and hand them to the layer's rotary
# (`self.rotary_emb(..., cos=cos, sin=sin, is_cos_sin_cached=True)`: models/qwen2.py@v0.9.1:94,
# models/qwen3.py@v0.9.1:168, registered in models/__init__.py at v0.9.1rc2-v0.9.1).
OWN_MODEL_ROTARY = {
    "Qwen2ForCausalLM": "vllm_ascend/models/qwen2.py",
    "Qwen3ForCausalLM": "vllm_ascend/models/qwen3.py",
}


def model_rotary_args(walker: Walker, cell: Cell) -> dict:
    """The rotary arguments the cell's model passes where vllm-ascend registers its own model class for it."""
    path = OWN_MODEL_ROTARY.get(cell.call.architecture) if cell.op == "rotary_embedding" else None
    if path is None:
        return {}
    walker.facts.read.add("cell")
    registered = walker.tree.grep(f'"{cell.call.architecture}", "vllm_ascend.models.', "vllm_ascend/models/")
    if not registered or path not in walker.tree.grep("is_cos_sin_cached=True", "vllm_ascend/models/"):
        return {}
    return {"is_cos_sin_cached": True, "cos": Opaque("cos"), "sin": Opaque("sin")}


def layer_entries(walker: Walker, cell: Cell) -> list[Entry] | NoEntry:
    name, args = LAYER_NAMES[cell.op]
    args = {**args, **model_rotary_args(walker, cell)}
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
