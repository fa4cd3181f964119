"""The cells of the audit: for each release and chip, the calls an op is audited with, and the table's answer.

A cell is (op, release, chip, graph mode, call): attention in four graph modes with and without
pa_shape_list and at head sizes 128, 192 and 512; rotary neox and GPT-J, full and partial; M-RoPE
sections; quantized linears per scheme (`variants`, `cells`). `matrix` lists the releases (the verified
matrix, ascend_backend/data/vllm_ascend_releases.json, and main), `chips_known` the chips a tag knows, and
`table_choice` what `ascend_backend.platform.kernels.select()` runs for the cell.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.version import Version

from scripts.kernel_truth.entries import ATTENTION_OPS
from scripts.kernel_truth.facts import Call, Cell
from scripts.kernel_truth.mirror import Mirror, Tree

BACKEND = Path(__import__("ascend_backend").__file__).resolve().parent  # the backend whose table is audited
CHIPS = ("A2", "A3", "A5", "310P")
MAIN_VERSION = "0.25.1rc1.post0"  # what came after the newest tag read (the table's marker for main)


def attention_modes() -> list[tuple[str, bool]]:
    return [
        ("NONE", False),
        ("PIECEWISE", False),
        ("FULL", False),
        ("FULL_DECODE_ONLY", False),
        ("FULL_DECODE_ONLY", True),
    ]


def variants(op: str) -> list[Call]:
    if op in ATTENTION_OPS:
        return [
            Call(),
            Call(head_size=192, rotary_dim=192),
            Call(head_size=512, rotary_dim=512),
            Call(sliding_window=True),
        ]
    if op == "reshape_and_cache":
        return [Call(), Call(head_size=192, rotary_dim=192), Call(head_size=512, rotary_dim=512)]
    if op == "silu_and_mul":
        return [Call(), Call(last_dim=2000)]
    if op == "rotary_embedding":
        return [
            Call(),
            Call(rotary_dim=64),
            Call(neox=False),
            Call(head_size=64, rotary_dim=64),
            Call(architecture="Qwen2VLForConditionalGeneration"),
        ]
    if op == "w8a8_linear":
        return [Call(), Call(dtype="int8")]
    if op == "add_rms_norm_quant":
        return [Call(), Call(architecture="Qwen3ForCausalLM"), Call(architecture="DeepseekV3ForCausalLM")]
    if op == "mrope":
        return [Call(), Call(mrope_section=(24, 20, 20))]
    return [Call()]


@dataclass(frozen=True)
class TagInfo:
    ref: str
    version: Version
    label: str
    torch_npu: str
    chips: dict[str, str]  # chip -> '' when known, else why not
    cann: str | None = None


def matrix(mirror: Mirror, only: list[str] | None = None) -> list[TagInfo]:
    data = json.loads((BACKEND / "data/vllm_ascend_releases.json").read_text())
    out = []
    rows = [r for r in data["releases"] if r["in_matrix"]]
    for row in sorted(rows, key=lambda r: Version(r["release"])):
        ref = f"v{row['release']}"
        if only and ref not in only:
            continue
        out.append(
            TagInfo(ref, Version(row["release"]), ref, row["torch_npu"], chips_known(mirror.tree(ref)), row["cann"])
        )
    if not only or "main" in only:
        out.append(
            TagInfo(
                "main",
                Version(MAIN_VERSION),
                f"main@{mirror.commit('main')[:10]}",
                "main",
                chips_known(mirror.tree("main")),
            )
        )
    return out


def chips_known(tree: Tree) -> dict[str, str]:
    """Which chips vllm-ascend knows at this ref: a device type in its source or the FAQ's supported list.

    '' for a known chip, else the reason it is not: A2 is the default device; A3 needs AscendSocVersion.A3
    or AscendDeviceType.A3/_910_93 (or the FAQ listing Atlas A3); 310P needs is_310p / _310P (and no FAQ line
    calling it unsupported); A5 needs AscendDeviceType._910_95/A5.
    """
    utils = "\n".join(
        tree.text(p) or ""
        for p in sorted(
            {"vllm_ascend/utils.py", *tree.grep("class AscendDeviceType"), *tree.grep("class AscendSocVersion")}
        )
    )
    faqs = tree.text("docs/source/faqs.md") or ""
    section = faqs.split("What devices are currently supported", 1)[-1].split("### 2", 1)[0]
    supported, _, unsupported = section.partition("NOT supported")
    known = {"A2": ""}
    a3_source = bool(re.search(r"^\s+(A3|_910_93)\s*=", utils, re.M))
    known["A3"] = (
        ""
        if a3_source or "A3" in supported
        else "no A3 device type in vllm_ascend/utils.py and the FAQ lists only Atlas A2"
    )
    p310_source = "def is_310p" in utils or re.search(r"^\s+_310P\s*=", utils, re.M) is not None
    if "300I" in supported:
        known["310P"] = ""
    elif p310_source and "300I" not in unsupported:
        known["310P"] = ""
    else:
        known["310P"] = (
            "the FAQ lists Atlas 300I (310P) as not supported"
            if "300I" in unsupported
            else "no 310P device type in vllm_ascend/utils.py"
        )
    a5_source = re.search(r"^\s+(A5|_910_95)\s*=", utils, re.M) is not None
    known["A5"] = "" if a5_source else "no A5 device type (AscendDeviceType A5/_910_95) in vllm_ascend/utils.py"
    return known


def table_choice(tag: TagInfo, cell: Cell):
    from ascend_backend.platform.kernels import CallFacts, ChipFamily, GraphMode, SelectionContext, recipes, select

    if cell.op not in recipes.RECIPES and cell.op not in getattr(recipes, "REFUSED", {}):
        return None
    graph = GraphMode(cell.graph) if cell.graph in GraphMode.__members__ else GraphMode.NONE
    chip = ChipFamily(cell.chip)
    context = SelectionContext(tag.version, "audit", (), chip, chip.value, None, graph, cell.pa_shape)
    extra = {"architecture": cell.call.architecture, "checkpoint": cell.checkpoint}
    context = replace(context, **{k: v for k, v in extra.items() if k in SelectionContext.__dataclass_fields__})
    fields = {
        "head_size": cell.call.head_size,
        "rotary_dim": cell.call.rotary_dim,
        "neox": cell.call.neox,
        "mrope_section": cell.call.mrope_section,
        "sliding_window": cell.call.sliding_window,
        "last_dim": cell.call.last_dim,
        "prequantized": cell.call.dtype == "int8",
        "scheme": cell.quant,
    }
    call = CallFacts(**{k: v for k, v in fields.items() if k in CallFacts.__dataclass_fields__})
    return select(cell.op, context, call)


def ops_to_audit() -> list[str]:
    from ascend_backend.platform.kernels import recipes

    return list(recipes.RECIPES) + [op for op in getattr(recipes, "REFUSED", {}) if op not in recipes.RECIPES]


def cells(op: str, tag: TagInfo, chip: str) -> list[Cell]:
    """Every cell of one op at one tag on one chip: graph modes and calls where they matter."""
    if op in ATTENTION_OPS or op == "reshape_and_cache":
        modes = attention_modes()
    elif op == "add_rms_norm_quant":
        modes = [("NONE", False), ("PIECEWISE", False)]
    else:
        modes = [("NONE", False)]
    quants = ["W8A8", "W8A8_DYNAMIC"] if op == "quant_weight_layout" else [quant_of(op)]
    checkpoints = ["msmodelslim", "compressed-tensors"] if op == "w8a8_linear" else ["msmodelslim"]
    state = ATTENTION_OPS.get(op, "DecodeOnly" if op == "reshape_and_cache" else None)
    return [
        Cell(
            op,
            tag.ref,
            chip,
            graph=graph,
            pa_shape=pa,
            state=state,
            call=call,
            quant=quant,
            checkpoint=checkpoint,
            cann=tag.cann,
        )
        for graph, pa in modes
        for call in variants(op)
        for quant in quants
        for checkpoint in checkpoints
        if not (checkpoint == "compressed-tensors" and call.dtype == "int8")
    ]


def quant_of(op: str) -> str | None:
    return {
        "w8a8_linear": "W8A8",
        "w8a8_dynamic_linear": "W8A8_DYNAMIC",
        "w8a16_linear": "W8A16",
        "w4a8_linear": "W4A8_DYNAMIC",
        "add_rms_norm_quant": "W8A8",  # the norm before a static W8A8 linear
    }.get(op)
