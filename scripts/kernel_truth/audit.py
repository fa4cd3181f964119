"""Re-derive every cell of the kernel-selection table from vllm-ascend's source and compare.

    python -m scripts.kernel_truth --mirror /work/.mirror/vllm-project+vllm-ascend/repo \
        --out docs/kernel_truth            # writes audit.json and audit.md, prints the counts

For every release of the verified matrix (ascend_backend/data/vllm_ascend_releases.json) and main, every
chip family vllm-ascend knows at that tag, every op of the table, the graph modes and calls that matter
(attention: NONE / PIECEWISE / FULL / FULL_DECODE_ONLY with and without pa_shape_list, head sizes 128,
192 and 512; rotary: neox / GPT-J, full / partial; M-RoPE sections), the audit

1. walks vllm-ascend's code at that tag from the layer or backend vllm-ascend registers (`probes.py`)
   and collects the calls the op makes (`trace.py`, under the cell's facts, `facts.py`);
2. asks `ascend_backend.npu.kernels.select()` what the table runs for the same cell;
3. compares: the kernel (vllm-ascend's own `_C_ascend` / Triton default compared through its torch_npu
   fallback, which the row must name), the arguments (both calls bound to op-plugin's declared schema
   for the release's torch_npu), the conditions (a default of the cell that, flipped, changes the
   kernel, or a condition nothing decides), and chips vllm-ascend does not know at that tag.

Disagreements are counted by kind: different kernel, different arguments, different tag (the table has
vllm-ascend's kernels but changes at another release), missing condition, own kernel undeclared. A row's
`differs` field acknowledges a deliberate difference; the report lists those with the reason.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.version import Version

from scripts.kernel_truth.facts import Call, Cell, CellFacts, env_defaults, requires_triton
from scripts.kernel_truth.mirror import Mirror, Tree
from scripts.kernel_truth.probes import ATTENTION_OPS, NoEntry, entries, family
from scripts.kernel_truth.trace import KernelCall, State, Walker, _literal, unparse

ROOT = Path(__file__).resolve().parents[2]
BACKEND = Path(__import__("ascend_backend").__file__).resolve().parent  # the backend whose table is audited
CHIPS = ("A2", "A3", "A5", "310P")
MAIN_VERSION = "0.25.1rc1.post0"  # what came after the newest tag read (the table's marker for main)
OWN_LABELS = (
    "custom ops built (_C_ascend ships in the wheel)",
    "triton-ascend installed (a requirement of the release)",
)

# Defaults whose flip changes a kernel but which describe a serving feature or a model family the
# table deliberately does not cover (one reason each). A flip outside this list is a missing condition.
OUT_OF_SCOPE = {
    "no speculative decoding": "speculative decoding (MTP / eagle) changes the decode batch shape and "
    "vllm-ascend's graph paths; the workbench's ops serve decoder-only serving without a drafter",
    "no context parallelism": "prefill/decode context parallelism runs its own attention implementation "
    "(attention_cp.py); out of the ops' scope",
    "KV cache not int8": "an int8 (C8) KV cache runs the quant method's attention; the ops keep the cache "
    "in the model dtype",
    "attention layer not quantized (no KV-cache quantization)": "a quantized attention layer hands the "
    "whole call to its quant method; the ops keep the cache in the model dtype",
    "no RL training-consistency mode": "RL training-consistency mode swaps in the FA3 backend "
    "(flash_attn_npu_v3, not torch_npu)",
    "no MLP weight prefetch": "weight prefetch adds npu_prefetch calls around the same kernel",
    "M-RoPE sections not interleaved (Qwen2-VL style)": "interleaved M-RoPE sections (Qwen3-VL) run vLLM's Triton "
    "mrope (triton_mrope) when triton-ascend is installed; the table's M-RoPE rows are for Qwen2-VL-style sections",
    "host CPU is not x86": "vllm-ascend v0.11.0rc2-v0.11.0rc3 send M-RoPE to vLLM's native path on x86 hosts "
    "(NPUPlatform.get_cpu_architecture); the table assumes Ascend's aarch64 (Kunpeng) hosts; on an x86 host pin "
    "mrope=native with ASCEND_BACKEND_KERNELS",
    "xlite graph off": "xlite runs the whole model in its own runtime (xlite_model_runner.py)",
    "VLLM_ASCEND_* / additional_config settings": "a serving setting at its default (e.g. VLLM_ASCEND_ENABLE_NZ=1, "
    "weight_nz_mode): the rows follow the defaults and their notes name the setting; the lead's config table "
    "(workbench/truth/data/vllm_ascend_config.json) holds every setting per tag",
    "no KV-cache compression (hamming sparse attention)": "KV-cache compression adds vllm-ascend's own "
    "hashing kernels (_C_ascend.npu_reshape_and_cache_bnsd, npu_hamming_dist_top_k) before the same attention",
}


# ------------------------------------------------------------------------------------------- cells
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


# ------------------------------------------------------------------------------------------- walking
@dataclass
class VllmSide:
    status: str  # calls | native | refuses | unsupported | undecided
    kernels: tuple[str, ...] = ()  # what the cell runs by default (own / triton kernels included)
    fallback: tuple[str, ...] = ()  # the torch_npu path when vllm-ascend's own kernels are not built
    calls: tuple[KernelCall, ...] = ()  # the calls behind `fallback` (for arguments and citations)
    own: tuple[str, ...] = ()  # own / Triton kernels on the default path
    where: tuple[str, ...] = ()  # 'TAG:path:line' of each kernel
    entry: str = ""
    reason: str = ""
    conditions: tuple[str, ...] = ()  # conditions that change the kernel and the table does not model
    scoped: tuple[str, ...] = ()  # out-of-scope conditions that change the kernel (with OUT_OF_SCOPE reasons)


def _name(call: KernelCall) -> str:
    if call.kind == "torch_npu":
        return call.function
    if call.kind == "native":
        return "native"
    if call.kind == "raise":
        return "refuses"
    return call.name


def _kernels(op: str, states: list[State]) -> tuple[list[tuple[tuple[KernelCall, ...], State]], list[State]]:
    """(distinct kernel sequences with one path each, all paths kept); raise paths under undecided
    conditions are dropped when another path gets through (they are guards, not the op)."""
    passing = [s for s in states if not s.raised]
    kept = [s for s in states if not (s.raised and s.assumptions and passing)]
    seen: dict[tuple[str, ...], tuple[tuple[KernelCall, ...], State]] = {}
    for state in kept:
        calls = []
        for call in state.calls:
            if family(op, call.name, call.kind) and all(_name(c) != _name(call) for c in calls):
                calls.append(call)
        key = tuple(_name(c) for c in calls)
        if key not in seen:
            seen[key] = (tuple(calls), state)
    return list(seen.values()), kept


class Auditor:
    def __init__(self, mirror: Mirror, tags: list[TagInfo]) -> None:
        self.mirror = mirror
        self.tags = tags
        self._memo: dict[tuple, list[tuple[dict[str, str], frozenset[str], Cell, Any]]] = defaultdict(list)
        self._env: dict[str, tuple[dict, bool]] = {}
        self.walks = 0

    def _tag_facts(self, tree: Tree) -> tuple[dict, bool]:
        if tree.ref not in self._env:
            self._env[tree.ref] = (env_defaults(tree), requires_triton(tree))
        return self._env[tree.ref]

    def walk(self, tree: Tree, cell: Cell) -> tuple[list[State] | NoEntry, str, set[str]]:
        """The paths of one cell (memoized on the files and the parts of the cell the walk read)."""
        key = (cell.op, cell.flips)
        for blobs, read, old, result in self._memo[key]:
            if all(tree.blobs.get(p) == b for p, b in blobs.items()) and _same_on(read, old, cell):
                return result
        env, triton = self._tag_facts(tree)
        facts = CellFacts(cell, tree, triton, env)
        walker = Walker(tree, facts)
        tree.touched.clear()
        found = entries(walker, cell)
        if isinstance(found, NoEntry):
            result: Any = (found, "", set(walker.consulted))
        else:
            states: list[State] = []
            for entry in found:
                states += walker.run(entry.func, entry.args)
            result = (states, "; ".join(e.label for e in found), set(walker.consulted))
        self.walks += 1
        blobs = {p: tree.blobs.get(p, "") for p in tree.touched}
        self._memo[key].append((blobs, frozenset(facts.read), cell, result))
        return result

    def vllm(self, tag: TagInfo, cell: Cell) -> VllmSide:
        why = tag.chips.get(cell.chip, "")
        if why:
            return VllmSide("unsupported", reason=f"vllm-ascend {tag.label} does not know {cell.chip}: {why}")
        tree = self.mirror.tree(tag.ref)
        side = self._side(tree, tag, cell)
        typical = cell.call == Call() and cell.graph == "NONE"
        if typical and side.status in ("calls", "native", "refuses"):
            side = self._sensitivity(tree, tag, cell, side)
        return side

    def _side(self, tree: Tree, tag: TagInfo, cell: Cell) -> VllmSide:
        paths, entry, consulted = self.walk(tree, cell)
        if isinstance(paths, NoEntry):
            if paths.reason.startswith("FUSED:"):  # a compilation pass makes the call (see linears.py)
                where = paths.reason.removeprefix("FUSED:").split(" ", 1)[0]
                fused = _call_at(
                    tree, where.rsplit(":", 1)[0], int(where.rsplit(":", 1)[1] or 0), "npu_add_rms_norm_quant"
                )
                return VllmSide(
                    "calls",
                    ("npu_add_rms_norm_quant",),
                    ("npu_add_rms_norm_quant",),
                    (fused,),
                    (),
                    (f"{tag.ref}:{where}",),
                    paths.reason[6:],
                )
            if paths.native and cell.op == "add_rms_norm_quant" and "eager run" in paths.reason:
                return VllmSide(
                    "calls",
                    ("npu_add_rms_norm", "npu_quantize"),
                    ("npu_add_rms_norm", "npu_quantize"),
                    (),
                    (),
                    (),
                    paths.reason,
                )
            return VllmSide("native" if paths.native else "undecided", reason=paths.reason)
        distinct, _kept = _kernels(cell.op, paths)
        if len(distinct) != 1:
            conditions = _separating([state for _, state in distinct])
            options = " | ".join(" + ".join(_name(c) for c in calls) or "(none)" for calls, _ in distinct)
            return VllmSide("undecided", entry=entry, reason=f"paths: {options}", conditions=tuple(conditions))
        calls, _state = distinct[0]
        if cell.op == "add_rms_norm_quant" and not any("quant" in _name(c) for c in calls) and calls:
            # Unfused: the norm layer stops at the norm; the static W8A8 linear after it quantizes
            # (w8a8.py / w8a8_static.py apply -> npu_quantize), which is the rest of this op.
            calls = (*calls, KernelCall("torch_npu.npu_quantize", "torch_npu", "(the next W8A8 linear's apply)", 0))
        kernels = tuple(_name(c) for c in calls)
        own = tuple(k for k, c in zip(kernels, calls) if c.kind in ("own", "triton", "vllm_op"))
        fallback, fallback_calls = kernels, calls
        if own:
            flipped = cell
            for label in OWN_LABELS:
                if label in consulted:
                    flipped = flipped.flipped(label)
            if flipped != cell:
                other, _, _ = self.walk(tree, flipped)
                if not isinstance(other, NoEntry):
                    alt, _ = _kernels(cell.op, other)
                    if len(alt) == 1:
                        fallback_calls = alt[0][0]
                        fallback = tuple(_name(c) for c in fallback_calls)
        status = "calls"
        if fallback in (("native",), ()):
            status = "native"
        if fallback and fallback[-1] == "refuses":
            status = "refuses"
        where = tuple(c.where(tag.ref) for c in fallback_calls)
        return VllmSide(status, kernels, fallback, fallback_calls, own, where, entry, reason=_refusal(fallback_calls))

    def _sensitivity(self, tree: Tree, tag: TagInfo, cell: Cell, side: VllmSide) -> VllmSide:
        """Flip each default the walk consulted; a flip that changes the kernel is a condition."""
        _, _, consulted = self.walk(tree, cell)
        missing, scoped = [], []
        for label in sorted(consulted):
            if label in OWN_LABELS:
                continue
            other, _, _ = self.walk(tree, cell.flipped(label))
            if isinstance(other, NoEntry):
                continue
            alt, _ = _kernels(cell.op, other)
            kernels = sorted({" + ".join(_name(c) for c in calls) for calls, _ in alt})
            if kernels != [" + ".join(side.kernels)]:
                text = f"not {label}: {' | '.join(k or '(none)' for k in kernels)}"
                (scoped if _out_of_scope(label) else missing).append(text)
        return replace(side, conditions=side.conditions + tuple(missing), scoped=tuple(scoped))


def _out_of_scope(label: str) -> bool:
    """A default the table deliberately does not key on: a feature listed in OUT_OF_SCOPE, or a serving
    setting (VLLM_ASCEND_* variables, additional_config) at its default, which the row's note names."""
    return (
        label in OUT_OF_SCOPE
        or "(envs.py default)" in label
        or label.startswith(("weight_nz_mode", "additional_config"))
    )


def _same_on(read: frozenset[str], old: Cell, new: Cell) -> bool:
    if "cell" in read:
        return replace(old, ref=new.ref) == new
    checks = {
        "chip": old.chip == new.chip,
        "graph": (old.graph, old.pa_shape, old.capturing()) == (new.graph, new.pa_shape, new.capturing()),
        "state": old.state == new.state,
        "call": old.call == new.call,
        "quant": (old.quant, old.checkpoint) == (new.quant, new.checkpoint),
    }
    return all(checks.get(part, True) for part in read) and old.op == new.op


def _separating(states: list[State]) -> list[str]:
    """The undecided conditions that differ between paths with different kernels."""
    texts: dict[str, set[bool]] = defaultdict(set)
    for state in states:
        for a in state.assumptions:
            texts[f"{a.text} ({a.path}:{a.line})"].add(a.value)
    return sorted(t for t, values in texts.items() if len(values) > 1 or len(states) > 1)[:6]


def _call_at(tree: Tree, path: str, line: int, function: str) -> KernelCall:
    """The torch_npu call to `function` at path:line of the tree, with its arguments as written."""
    found = KernelCall(f"torch_npu.{function}", "torch_npu", path, line)
    text = tree.text(path) if line else None
    if text is None:
        return found
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and node.lineno == line and unparse(node.func).endswith(function):
            literals = [(str(i), t) for i, a in enumerate(node.args) if (t := _literal(a)) is not None]
            literals += [(k.arg, t) for k in node.keywords if k.arg and (t := _literal(k.value)) is not None]
            return replace(
                found,
                positional=len([a for a in node.args if not isinstance(a, ast.Starred)]),
                keywords=tuple(k.arg for k in node.keywords if k.arg),
                literals=tuple(literals),
                open_kwargs=any(k.arg is None for k in node.keywords),
            )
    return found


def _refusal(calls: tuple[KernelCall, ...]) -> str:
    raised = [c for c in calls if c.kind == "raise"]
    return raised[0].name if raised else ""


# ------------------------------------------------------------------------------------------- the table
def table_choice(tag: TagInfo, cell: Cell):
    from ascend_backend.npu.kernels import CallFacts, ChipFamily, GraphMode, SelectionContext, recipes, select

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
    from ascend_backend.npu.kernels import recipes

    return list(recipes.RECIPES) + [op for op in getattr(recipes, "REFUSED", {}) if op not in recipes.RECIPES]


def cells(op: str, tag: TagInfo, chip: str) -> list[Cell]:
    """Every cell of one op at one tag on one chip: graph modes and calls where they matter."""
    if op in ATTENTION_OPS or op == "reshape_and_cache":
        modes = attention_modes()
    elif op == "add_rms_norm_quant":
        modes = [("NONE", False), ("PIECEWISE", False)]
    else:
        modes = [("NONE", False)]
    quants = ["W8A8", "W8A8_DYNAMIC"] if op == "quant_weight_layout" else [_quant_of(op)]
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


# ------------------------------------------------------------------------------------------- arguments
def _schemas(torch_npu: str) -> tuple[str, dict[str, Any]] | None:
    try:
        from tests.unit.ascend_backend.npu import schema
    except ImportError:
        return None
    try:
        branch = "master" if torch_npu == "main" else schema.branch_for(torch_npu)
    except KeyError:
        return None
    return branch, schema.signatures(branch)


def _defaults(branch: str, function: str) -> dict[str, str]:
    """param -> default text, from the schema string of `function` in op-plugin `branch`."""
    from tests.unit.ascend_backend.npu.schema import schema_data

    entry = schema_data()["branches"][branch]["functions"].get(function)
    if entry is None:
        return {}
    return {name: value.strip() for name, value in re.findall(r"(\w+)\s*=\s*([^,)]+)", entry["schema"].split("->")[0])}


def _bound(call: KernelCall, signature) -> dict[str, str | None]:
    """param -> literal text or None (passed, not a literal); unknown names kept as they are."""
    positional = [p.name for p in signature.params if not p.kw_only]
    literals = dict(call.literals)
    out: dict[str, str | None] = {}
    for i in range(call.positional):
        name = positional[i] if i < len(positional) else f"#{i}"
        out[name] = literals.get(str(i))
    for keyword in call.keywords:
        out[keyword] = literals.get(keyword)
    return out


def _norm(text: str | None) -> str | None:
    if text is None:
        return None
    return text.strip().strip("'\"").replace("torch.", "")


def argument_differences(tag: TagInfo, op: str, recipe: str, theirs: tuple[KernelCall, ...]) -> list[str]:
    from scripts.kernel_truth.ours import recipe_calls

    found = _schemas(tag.torch_npu)
    if found is None:
        return []
    branch, signatures = found
    ours_paths = recipe_calls(op, recipe)
    diffs = []
    for call in theirs:
        if call.kind != "torch_npu" or call.line == 0:  # line 0: a call the audit infers, not a call site
            continue
        fn = call.function
        signature = signatures.get(fn)
        if signature is None:
            continue
        mine = [c for path in ours_paths for c in path if c.function == fn]
        if not mine:
            continue
        defaults = _defaults(branch, fn)
        their_args = _bound(call, signature)
        our_args: dict[str, set[str | None]] = defaultdict(set)
        for c in mine:
            for k, v in _bound(c, signature).items():
                our_args[k].add(v)
        for name, value in their_args.items():
            if name in ("out", "workspace") and call.name.endswith(".out"):
                continue
            if name not in our_args:
                if value is not None and _norm(value) == _norm(defaults.get(name)):
                    continue
                diffs.append(f"{fn}: vllm-ascend passes {name}{'=' + value if value else ''}, the recipe does not")
            elif value is not None and all(v is not None for v in our_args[name]):
                ours = {_norm(v) for v in our_args[name]}
                if _norm(value) not in ours:
                    diffs.append(
                        f"{fn}: {name}={value} in vllm-ascend, {'/'.join(sorted(str(v) for v in ours))} in the recipe"
                    )
        for name, values in our_args.items():
            if name not in their_args and not call.open_kwargs:
                if all(v is not None and _norm(v) == _norm(defaults.get(name)) for v in values):
                    continue
                shown = "/".join(sorted(str(v) for v in values if v is not None))
                diffs.append(f"{fn}: the recipe passes {name}{'=' + shown if shown else ''}, vllm-ascend does not")
    return diffs


# ------------------------------------------------------------------------------------------- comparing
@dataclass
class Finding:
    op: str
    tag: str
    chip: str
    graph: str
    pa_shape: bool
    call: str
    vllm: VllmSide
    table_kernel: str
    table_recipe: str
    table_row: str
    table_reason: str
    kinds: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    acknowledged: str = ""

    @property
    def series(self) -> tuple:
        return (self.op, self.chip, self.graph, self.pa_shape, self.call)

    def vllm_text(self) -> str:
        v = self.vllm
        if v.status == "calls":
            text = " + ".join(v.fallback)
            if v.own:
                text = f"{' + '.join(v.kernels)} (torch_npu path: {text})"
            return text
        if v.status == "undecided":
            return f"undecided ({v.reason})"
        if v.status == "unsupported":
            return "chip unknown"
        if v.status == "refuses":
            return f"refuses ({v.reason[:60]})"
        return "native"


def cell_label(cell: Cell) -> str:
    """The call and the quantization facts of a cell, as the report shows them."""
    parts = [cell.call.label]
    if cell.op == "quant_weight_layout" and cell.quant:
        parts.append(cell.quant)
    if cell.checkpoint != "msmodelslim":
        parts.append(cell.checkpoint)
    return ", ".join(parts)


def compare(tag: TagInfo, cell: Cell, side: VllmSide, choice) -> Finding:
    row = choice.row
    finding = Finding(
        cell.op,
        tag.ref,
        cell.chip,
        cell.graph,
        cell.pa_shape,
        cell_label(cell),
        side,
        choice.kernel,
        choice.recipe,
        row.id if row else "",
        choice.reason if choice.native else "",
    )
    ack = getattr(row, "differs", "") if row is not None else ""
    if row is None and choice.reason.startswith("refused:"):
        ack = choice.reason  # an op ascend_backend declines (recipes.REFUSED), with its reason
    table_calls = tuple(choice.kernel.split(" + ")) if choice.kernel != "native" else ("native",)
    if side.status == "unsupported":
        if row is not None:
            finding.kinds.append("different kernel")
            finding.details.append(f"row {row.id} lists {cell.chip}; {side.reason}")
    elif side.status == "undecided":
        finding.kinds.append("missing condition")
        finding.details.append(f"{side.reason}; decided by: {'; '.join(side.conditions) or 'nothing the audit knows'}")
    elif side.status in ("native", "refuses"):
        if table_calls != ("native",):
            finding.kinds.append("different kernel")
            finding.details.append(
                f"vllm-ascend runs no torch_npu kernel here ({side.reason or side.status}); the table runs {choice.kernel}"
            )
    else:
        if table_calls != side.fallback:
            finding.kinds.append("different kernel")
            finding.details.append(
                f"vllm-ascend {' + '.join(side.fallback)} ({', '.join(side.where)}); table {choice.kernel}"
            )
        else:
            diffs = argument_differences(tag, cell.op, choice.recipe, side.calls)
            if diffs:
                finding.kinds.append("different arguments")
                finding.details += diffs
        if side.own and row is not None and not all(_declared(k, row) for k in side.own):
            finding.kinds.append("own kernel undeclared")
            finding.details.append(f"vllm-ascend's default is {', '.join(side.own)}; row {row.id} does not name it")
        if side.own and row is None and table_calls == ("native",):
            pass
    if side.conditions and side.status != "undecided":
        finding.kinds.append("missing condition")
        finding.details += [f"condition: {c}" for c in side.conditions]
    if finding.kinds and ack:
        finding.acknowledged = ack
    return finding


def _declared(kernel: str, row) -> bool:
    declared = getattr(row, "vllm_default", "") or ""
    short = kernel.split(":", 1)[-1].split(".")[-1]
    return short in declared or kernel in declared


def reclassify_tags(findings: list[Finding]) -> None:
    """A kernel disagreement where the table has vllm-ascend's kernel of the neighbouring tag: a different tag."""
    series: dict[tuple, list[Finding]] = defaultdict(list)
    for f in findings:
        series[f.series].append(f)
    for items in series.values():
        for i, f in enumerate(items):
            if "different kernel" not in f.kinds or f.vllm.status != "calls":
                continue
            table = f.table_kernel
            neighbours = [items[j] for j in (i - 1, i + 1) if 0 <= j < len(items)]
            if f.acknowledged:
                continue  # a deliberate difference stays what it is
            if any(n.vllm.status == "calls" and " + ".join(n.vllm.fallback) == table for n in neighbours):
                f.kinds[f.kinds.index("different kernel")] = "different tag"


# ------------------------------------------------------------------------------------------- driver
def audit(
    mirror: Mirror, tags: list[TagInfo], ops: list[str], chips: tuple[str, ...] = CHIPS, progress=None
) -> tuple[list[Finding], Auditor]:
    auditor = Auditor(mirror, tags)
    findings = []
    for n, tag in enumerate(tags):
        started = time.time()
        for op in ops:
            for chip in chips:
                for cell in cells(op, tag, chip):
                    side = auditor.vllm(tag, cell)
                    choice = table_choice(tag, cell)
                    if choice is None:
                        continue
                    findings.append(compare(tag, cell, side, choice))
        if progress:
            progress(f"[{n + 1}/{len(tags)}] {tag.label}: {time.time() - started:.1f}s, {auditor.walks} walks so far")
    reclassify_tags(findings)
    return findings, auditor


def _quant_of(op: str) -> str | None:
    return {
        "w8a8_linear": "W8A8",
        "w8a8_dynamic_linear": "W8A8_DYNAMIC",
        "w8a16_linear": "W8A16",
        "w4a8_linear": "W4A8_DYNAMIC",
        "add_rms_norm_quant": "W8A8",  # the norm before a static W8A8 linear
    }.get(op)


KINDS = ("different kernel", "different arguments", "different tag", "missing condition", "own kernel undeclared")


def counts(findings: list[Finding]) -> dict[str, dict[str, int]]:
    total: Counter = Counter()
    acknowledged: Counter = Counter()
    for f in findings:
        for kind in set(f.kinds):
            total[kind] += 1
            if f.acknowledged:
                acknowledged[kind] += 1
    return {
        "cells": {"total": len(findings), "agree": sum(1 for f in findings if not f.kinds)},
        "disagreements": {k: total.get(k, 0) for k in KINDS},
        "acknowledged": {k: acknowledged.get(k, 0) for k in KINDS},
    }


def runs(findings: list[Finding]) -> list[dict[str, Any]]:
    """Consecutive tags of one series with the same answer on both sides, as one record."""
    out: list[dict[str, Any]] = []
    by_series: dict[tuple, list[Finding]] = defaultdict(list)
    for f in findings:
        by_series[f.series].append(f)
    for _key, items in by_series.items():
        current: dict[str, Any] | None = None
        for f in items:
            signature = (
                f.vllm_text(),
                f.table_kernel,
                f.table_recipe,
                f.table_row,
                tuple(sorted(set(f.kinds))),
                tuple(f.details),
            )
            if current is not None and current["_sig"] == signature:
                current["last"] = f.tag
                continue
            current = {
                "op": f.op,
                "chip": f.chip,
                "graph": f.graph + (" + pa_shape_list" if f.pa_shape else ""),
                "call": f.call,
                "first": f.tag,
                "last": f.tag,
                "vllm_ascend": f.vllm_text(),
                "where": list(f.vllm.where),
                "entry": f.vllm.entry,
                "table": f.table_kernel,
                "recipe": f.table_recipe,
                "row": f.table_row,
                "kinds": sorted(set(f.kinds)),
                "details": list(f.details),
                "scoped": list(f.vllm.scoped),
                "acknowledged": f.acknowledged,
                "_sig": signature,
            }
            out.append(current)
    for record in out:
        record.pop("_sig")
    return out


def write(out_dir: Path, findings: list[Finding], tags: list[TagInfo], mirror: Mirror, elapsed: float) -> dict:
    summary = counts(findings)
    data = {
        "about": "Kernel-table audit: each cell's calls in vllm-ascend's source next to ascend_backend.npu.kernels.select(); "
        "written by scripts/kernel_truth (python -m scripts.kernel_truth).",
        "mirror": {"main": mirror.commit("main"), "tags": [t.ref for t in tags]},
        "seconds": round(elapsed),
        "chips_known": {t.ref: {c: why or "known" for c, why in t.chips.items()} for t in tags},
        "counts": summary,
        "out_of_scope": OUT_OF_SCOPE,
        "runs": runs(findings),
    }
    render(out_dir, data)
    return summary


def compact(data: dict) -> dict:
    """The stored form: each walk's entry point and each acknowledgement's reason once, runs pointing at them."""
    if "entries" in data:
        return data
    entries: list[str] = []
    reasons: dict[str, str] = {}
    runs_out = []
    for r in data["runs"]:
        r = dict(r)
        if r["entry"] not in entries:
            entries.append(r["entry"])
        r["entry"] = entries.index(r["entry"])
        if r["acknowledged"]:
            key = r["row"] or f"{r['op']} (refused)"
            reasons.setdefault(key, r["acknowledged"])
            r["acknowledged"] = key
        runs_out.append(r)
    merged: dict[str, dict] = {}  # graph modes with the same answer share a record ("graph" lists them)
    for r in runs_out:
        key = json.dumps({k: v for k, v in r.items() if k != "graph"}, sort_keys=True)
        if key in merged:
            merged[key]["graph"].append(r["graph"])
        else:
            merged[key] = {**r, "graph": [r["graph"]]}
    rest = {k: v for k, v in data.items() if k != "runs"}
    return {**rest, "entries": entries, "reasons": reasons, "runs": list(merged.values())}


def _graphs(record: dict) -> list[str]:
    return record["graph"] if isinstance(record["graph"], list) else [record["graph"]]


def render(out_dir: Path, data: dict) -> None:
    """audit.json (one run per line, so a rerun's diff shows the runs that changed) and audit.md."""
    data = compact(data)
    out_dir.mkdir(parents=True, exist_ok=True)
    head = {k: v for k, v in data.items() if k != "runs"}
    text = json.dumps(head, indent=1)[:-2] + ',\n "runs": [\n'
    text += ",\n".join("  " + json.dumps(r, ensure_ascii=False) for r in data["runs"]) + "\n ]\n}\n"
    (out_dir / "audit.json").write_text(text)
    (out_dir / "audit.md").write_text(markdown(data, data.get("seconds", 0)))


def markdown(data: dict, elapsed: float) -> str:
    c = data["counts"]
    lines = [
        "# Kernel truth: the selection table against vllm-ascend's source",
        "",
        "Written by `python -m scripts.kernel_truth` (scripts/kernel_truth/); do not edit by hand. Every cell is an op at a",
        "tag on a chip (and, for attention and the cache write, a graph mode and a head size): the calls vllm-ascend's",
        "code makes there, found by walking it from the layer or backend it registers, next to what",
        "`ascend_backend.npu.kernels.select()` returns. Where vllm-ascend's default is its own `_C_ascend` or Triton",
        "kernel, the comparison is with its torch_npu path and the row must name the default.",
        "",
        f"Mirror: main at `{data['mirror']['main'][:12]}`; {len(data['mirror']['tags'])} refs; {c['cells']['total']} cells, "
        f"{c['cells']['agree']} agree.",
        "",
        "| kind | cells | of which acknowledged by the row (`differs`) |",
        "|---|---|---|",
    ]
    for kind in KINDS:
        lines.append(f"| {kind} | {c['disagreements'][kind]} | {c['acknowledged'][kind]} |")
    lines += ["", "## Chips vllm-ascend knows per tag", "", "| ref | A2 | A3 | A5 | 310P |", "|---|---|---|---|---|"]
    for ref, chips in data["chips_known"].items():
        lines.append(f"| {ref} | " + " | ".join("yes" if chips[ch] == "known" else "no" for ch in CHIPS) + " |")
    lines += [
        "",
        "## Disagreements",
        "",
        "Grouped by op, chip and answer; each group lists the refs, graph modes and calls it covers.",
        "",
    ]
    groups: dict[tuple, list[dict]] = defaultdict(list)
    reasons = data.get("reasons", {})
    for r in data["runs"]:
        if r["kinds"]:
            ack = reasons.get(r["acknowledged"], r["acknowledged"])
            key = (r["op"], r["chip"], tuple(r["kinds"]), r["vllm_ascend"], r["table"], r["row"], ack)
            groups[key].append(r)
    if not groups:
        lines.append("None.")
    for (op, chip, kinds, vllm, table, row, ack), items in groups.items():
        spans = sorted(
            {r["first"] if r["first"] == r["last"] else f"{r['first']} … {r['last']}" for r in items}, key=_ref_order
        )
        graphs = sorted({g for r in items for g in _graphs(r)})
        calls = sorted({r["call"] for r in items})
        lines.append(
            f"- **{op}** {chip}: {', '.join(kinds)}. vllm-ascend: {vllm}; table: {table} (`{row or 'no row'}`). "
            f"Refs {', '.join(spans)}; graph {', '.join(graphs)}; call {'; '.join(calls)}."
        )
        details = []
        for r in items:
            for detail in r["details"]:
                if detail not in details:
                    details.append(detail)
        for detail in details[:5]:
            lines.append(f"  - {detail}")
        if len(details) > 5:
            lines.append(f"  - … {len(details) - 5} more in audit.json")
        if ack:
            lines.append(f"  - acknowledged by the row: {ack}")
    lines += ["", "## Out-of-scope conditions (found, not table keys)", ""]
    for label, why in data["out_of_scope"].items():
        lines.append(f"- `{label}`: {why}")
    lines += [
        "",
        "## Every series",
        "",
        "Per op, chip, call and span of refs: vllm-ascend's calls, the table's kernel and row (✗: a disagreement,",
        "listed above); graph modes with the same answer share a line (any: all five modes the audit tries).",
        "",
        "| op | chip | graph | call | refs | vllm-ascend | table | row |",
        "|---|---|---|---|---|---|---|---|",
    ]
    series: dict[tuple, list[str]] = defaultdict(list)
    for r in data["runs"]:
        span = r["first"] if r["first"] == r["last"] else f"{r['first']} … {r['last']}"
        mark = "" if not r["kinds"] else " ✗"
        key = (r["op"], r["chip"], r["call"], span, f"{r['vllm_ascend']}{mark}", r["table"], r["row"])
        series[key] += _graphs(r)
    modes = {g for r in data["runs"] for g in _graphs(r)}
    for (op, chip, call, span, vllm, table, row), graphs in series.items():
        graph = "any" if len(modes) > 1 and set(graphs) == modes else ", ".join(graphs)
        lines.append(f"| {op} | {chip} | {graph} | {call} | {span} | {vllm} | {table} | {row} |")
    lines += ["", f"(audit took {elapsed:.0f} s)", ""]
    return "\n".join(lines)


def _ref_order(span: str) -> tuple:
    """'v0.13.0rc1 … main' -> by its first ref, then its last (spans sharing a first ref came out in set order)."""
    return tuple((1, Version("0")) if ref == "main" else (0, Version(ref.lstrip("v"))) for ref in span.split(" … "))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.kernel_truth", description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, help="git directory of a vllm-ascend clone (bare or not)")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "docs" / "kernel_truth", help="where audit.json / audit.md go"
    )
    parser.add_argument("--tags", nargs="*", help="only these refs (v0.13.0 ... main); default: the matrix and main")
    parser.add_argument("--ops", nargs="*", help="only these ops; default: every op of the table")
    parser.add_argument(
        "--render",
        action="store_true",
        help="rewrite audit.md (and the stored form of audit.json) from --out's audit.json",
    )
    args = parser.parse_args(argv)
    if args.render:
        render(args.out, json.loads((args.out / "audit.json").read_text()))
        print(f"rewrote {args.out / 'audit.md'} and {args.out / 'audit.json'}")
        return 0
    if args.mirror is None:
        parser.error("--mirror is required (except with --render)")
    started = time.time()
    mirror = Mirror(args.mirror)
    tags = matrix(mirror, args.tags)
    findings, auditor = audit(
        mirror, tags, args.ops or ops_to_audit(), progress=lambda m: print(m, file=sys.stderr, flush=True)
    )
    summary = write(args.out, findings, tags, mirror, time.time() - started)
    print(json.dumps(summary, indent=1))
    print(
        f"wrote {args.out / 'audit.md'} and {args.out / 'audit.json'} ({auditor.walks} walks, {time.time() - started:.0f} s)"
    )
    return 0
