"""Where vllm-ascend runs a quantized linear at a tag: the scheme class for the layer's quant type.

The mapping from a checkpoint's quant type ("W8A8", "W8A8_DYNAMIC", "W8A16", "W4A8_DYNAMIC") to the
linear method class moved three times; each form is read from the source, newest first:

- `@register_scheme("W8A8", "linear")` on a class under vllm_ascend/quantization/methods/ (v0.14.0rc1 on),
  or under vllm_ascend/_310p/quantization/methods/ on 310P where that registry exists (v0.15.0rc1 on:
  the 310P config asks only its own registry);
- `ASCEND_QUANTIZATION_METHOD_MAP[type]["linear"]` in vllm_ascend/quantization/utils.py (v0.10.1rc1-v0.13.0);
- `SUPPORT_ASCEND_QUANTIZER_TYPE[type]` in vllm_ascend/quantization/quantizer.py, whose
  `build_linear_method()` returns the method (v0.8.4rc2-v0.10.0rc1);
- v0.7.3 hands every quantized layer to the external MindIE Turbo package (not read here).

Two entries per linear: `process_weights_after_loading` (what happens to the weight once, e.g. the
FRACTAL_NZ cast) and `apply` (the calls per forward).
"""

from __future__ import annotations

import ast

from scripts.kernel_truth.entries import Entry, NoEntry
from scripts.kernel_truth.facts import Cell
from scripts.kernel_truth.layers import layer_entries
from scripts.kernel_truth.paths import Frame
from scripts.kernel_truth.trace import Walker
from scripts.kernel_truth.values import ClassRef, Opaque, SelfRef

QUANT_TYPES = {
    "w8a8_linear": "W8A8",
    "w8a8_dynamic_linear": "W8A8_DYNAMIC",
    "w8a16_linear": "W8A16",
    "w4a8_linear": "W4A8_DYNAMIC",
}
# The weight-preparation op: the walk runs process_weights_after_loading of the cell's scheme.
LOAD_OPS = ("quant_weight_layout",)


def _registered(walker: Walker, folder: str, quant_type: str) -> tuple[ClassRef, str] | None:
    for path in walker.tree.grep(f'register_scheme("{quant_type}"', folder):
        module = walker.tree.module(path)
        if module is None:
            continue
        for info in module.classes.values():
            for decorator in info.node.decorator_list:
                if (
                    isinstance(decorator, ast.Call)
                    and ast.unparse(decorator.func).endswith("register_scheme")
                    and len(decorator.args) >= 2
                    and isinstance(decorator.args[0], ast.Constant)
                    and decorator.args[0].value == quant_type
                    and isinstance(decorator.args[1], ast.Constant)
                    and decorator.args[1].value == "linear"
                ):
                    return ClassRef(info), f"{path}:{decorator.lineno}"
    return None


def scheme_class(walker: Walker, cell: Cell, quant_type: str) -> tuple[ClassRef, str] | NoEntry:
    tree = walker.tree
    walker.facts.read.update({"chip", "quant"})  # the registry depends on both
    if cell.chip == "310P" and tree.exists("vllm_ascend/_310p/quantization/methods/registry.py"):
        found = _registered(walker, "vllm_ascend/_310p/quantization/methods/", quant_type)
        if found is None:
            return NoEntry(
                f"the 310P scheme registry (vllm_ascend/_310p/quantization/methods/) has no {quant_type} linear: "
                "vllm-ascend raises NotImplementedError",
                native=True,
            )
        return found
    if tree.exists("vllm_ascend/quantization/methods/registry.py"):
        found = _registered(walker, "vllm_ascend/quantization/methods/", quant_type)
        if found is None:
            return NoEntry(f"no {quant_type} linear scheme is registered (vllm_ascend/quantization/methods/)")
        return found
    utils = tree.module("vllm_ascend/quantization/utils.py")
    if utils is not None and "ASCEND_QUANTIZATION_METHOD_MAP" in utils.assigns:
        table = walker.value(utils.assigns["ASCEND_QUANTIZATION_METHOD_MAP"], Frame(utils, None))
        if isinstance(table, dict):
            entry = walker._lookup(table, quant_type, quant_type, 0)
            if isinstance(entry, dict):
                linear = walker._lookup(entry, "linear", "linear", 0)
                if isinstance(linear, ClassRef):
                    line = utils.assigns["ASCEND_QUANTIZATION_METHOD_MAP"].lineno
                    return linear, f"vllm_ascend/quantization/utils.py:{line}"
        return NoEntry(f"ASCEND_QUANTIZATION_METHOD_MAP has no {quant_type} linear")
    quantizer = tree.module("vllm_ascend/quantization/quantizer.py")
    if quantizer is not None and "SUPPORT_ASCEND_QUANTIZER_TYPE" in quantizer.assigns:
        frame = Frame(quantizer, None)
        table = walker.value(quantizer.assigns["SUPPORT_ASCEND_QUANTIZER_TYPE"], frame)
        if isinstance(table, dict):
            builder = walker._lookup(table, quant_type, quant_type, 0)
            if isinstance(builder, ClassRef):
                method = walker.method(builder.info, "build_linear_method")
                if method is not None:
                    call = ast.parse(f"{builder.info.name}.build_linear_method()", mode="eval").body
                    value = walker._function_value(method, call, frame)
                    if isinstance(value, SelfRef):
                        line = quantizer.assigns["SUPPORT_ASCEND_QUANTIZER_TYPE"].lineno
                        return ClassRef(value.cls), f"vllm_ascend/quantization/quantizer.py:{line}"
        return NoEntry(f"SUPPORT_ASCEND_QUANTIZER_TYPE has no {quant_type}")
    if quantizer is not None and "mindie_turbo" in (tree.text("vllm_ascend/quantization/quantizer.py") or ""):
        return NoEntry("vllm-ascend hands quantized layers to the external MindIE Turbo package (not read here)")
    return NoEntry("no quantization support found")


def linear_entries(walker: Walker, cell: Cell) -> list[Entry] | NoEntry:
    if cell.op == "add_rms_norm_quant":
        return fused_norm_quant_entries(walker, cell)
    load = cell.op in LOAD_OPS
    quant_type = cell.quant if load else QUANT_TYPES.get(cell.op)
    if quant_type is None:
        return NoEntry(f"no probe for op {cell.op}", native=False)
    found = scheme_class(walker, cell, quant_type)
    if isinstance(found, NoEntry):
        return found
    cls, where = found
    name = "process_weights_after_loading" if load else "apply"
    method = walker.method(cls.info, name)
    if method is None:
        return NoEntry(f"{cls.info.name} ({where}) has no {name}")
    layer = Opaque("layer")
    args = {"layer": layer, "x": Opaque("x"), "bias": None}
    return [
        Entry(
            method, args, f"{method.qualname} ({method.module.path}:{method.node.lineno}); {quant_type} scheme {where}"
        )
    ]


def fused_norm_quant_entries(walker: Walker, cell: Cell) -> list[Entry] | NoEntry:
    """Where vllm-ascend fuses the norm before a static W8A8 linear into npu_add_rms_norm_quant.

    From v0.12.0rc1 the fusion is a compilation pass (AddRMSNormQuantFusionPass, appended by the graph
    fusion pass manager when ascend_compilation_config fuse_norm_quant, default True): it rewrites the
    compiled graph, so an eager run (graph mode NONE) keeps npu_add_rms_norm + npu_quantize. Before that
    the norm layer itself calls it when the next linear is W8A8 static (the layer walk).
    """
    walker.facts.read.update({"graph", "chip"})
    passes = walker.tree.grep("npu_add_rms_norm_quant", "vllm_ascend/compilation/")
    if passes:
        if cell.graph == "NONE":
            return NoEntry(
                f"the fusion is a compilation pass ({passes[0]}): an eager run keeps npu_add_rms_norm, then the "
                "linear's npu_quantize",
                native=True,
            )
        manager = walker.tree.grep("fuse_norm_quant", "vllm_ascend/compilation/")
        text = walker.tree.text(passes[0]) or ""
        line = next(
            (i + 1 for i, text_line in enumerate(text.splitlines()) if "npu_add_rms_norm_quant" in text_line), 0
        )
        return NoEntry(
            f"FUSED:{passes[0]}:{line} (enabled by fuse_norm_quant in {manager[0] if manager else 'the pass manager'})",
            native=False,
        )
    # v0.9.1rc2-v0.10.2rc1: vllm-ascend's own Qwen3 model builds its norms as AddRMSNormW8A8Quant
    # (models/qwen3.py) for W8A8 checkpoints; every other model keeps the registered RMSNorm.
    if cell.call.architecture == "Qwen3ForCausalLM" and walker.tree.grep("AddRMSNormW8A8Quant", "vllm_ascend/models/"):
        walker.facts.read.add("cell")
        fused = walker.function("vllm_ascend/ops/layernorm.py", "AddRMSNormW8A8Quant.forward")
        if fused is not None:
            return [
                Entry(
                    fused, {"residual": Opaque("residual")}, "AddRMSNormW8A8Quant.forward (models/qwen3.py builds it)"
                )
            ]
    walker.facts.read.add("cell")
    return layer_entries(walker, cell)
