"""vllm-ascend's side of a cell: walk its source at the tag from the op's entry points and read off the kernels.

`Auditor.vllm(tag, cell)` runs the walker (`trace.py`) from every entry the probe names (`probes.py`),
keeps the calls that belong to the op (`entries.family`), and records which defaults of the cell the walk
consulted and whether flipping one changes the kernel: a condition the table must key on, unless it is a
feature the table leaves out of scope (`OUT_OF_SCOPE`, one reason each). Walks are cached per tag and per
the facts they read, so cells that differ only in facts the code never asked share one walk.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any

from scripts.kernel_truth.cells import TagInfo
from scripts.kernel_truth.entries import NoEntry, family
from scripts.kernel_truth.facts import Call, Cell, CellFacts, env_defaults, requires_triton
from scripts.kernel_truth.mirror import Mirror, Tree
from scripts.kernel_truth.paths import KernelCall, State, literal, unparse
from scripts.kernel_truth.probes import entries
from scripts.kernel_truth.trace import Walker

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
                fused = call_at(
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
        return VllmSide(status, kernels, fallback, fallback_calls, own, where, entry, reason=refusal(fallback_calls))

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
                (scoped if out_of_scope(label) else missing).append(text)
        return replace(side, conditions=side.conditions + tuple(missing), scoped=tuple(scoped))


def out_of_scope(label: str) -> bool:
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


def call_at(tree: Tree, path: str, line: int, function: str) -> KernelCall:
    """The torch_npu call to `function` at path:line of the tree, with its arguments as written."""
    found = KernelCall(f"torch_npu.{function}", "torch_npu", path, line)
    text = tree.text(path) if line else None
    if text is None:
        return found
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and node.lineno == line and unparse(node.func).endswith(function):
            literals = [(str(i), t) for i, a in enumerate(node.args) if (t := literal(a)) is not None]
            literals += [(k.arg, t) for k in node.keywords if k.arg and (t := literal(k.value)) is not None]
            return replace(
                found,
                positional=len([a for a in node.args if not isinstance(a, ast.Starred)]),
                keywords=tuple(k.arg for k in node.keywords if k.arg),
                literals=tuple(literals),
                open_kwargs=any(k.arg is None for k in node.keywords),
            )
    return found


def refusal(calls: tuple[KernelCall, ...]) -> str:
    raised = [c for c in calls if c.kind == "raise"]
    return raised[0].name if raised else ""
