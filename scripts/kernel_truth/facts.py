"""What one audit cell knows: release tag, chip, attention state, graph mode, the call, and the defaults.

`CellFacts.lookup(text, ...)` answers the walker (`trace.py`) for the names, attributes, calls and
comparisons whose meaning is a fact of the cell rather than of the source:

- the chip: `is_310p()`, `get_ascend_device_type()`, `get_ascend_soc_version()`;
- the attention state and type: `attn_metadata.attn_state`, `self.attn_type`, `use_mla`;
- the graph mode: `forward_context.capturing`, `compilation_config.cudagraph_mode`, torchair's switch,
  `runtime_shape in get_ascend_config().pa_shape_list`;
- the call: head size, rotary width, neox style, M-RoPE sections, the model architecture;
- the linears: the quantization scheme and checkpoint format.

Anything else that a serving stack decides but the kernel table does not model is a `Default`: a value
assumed for every cell (custom ops built, triton-ascend installed when the release requires it, the
VLLM_ASCEND_* variables at their defaults as the tag's envs.py writes them, no sliding window, no
speculative decoding, no context parallelism, bfloat16 activations). The audit records which defaults
a cell consulted and flips each one to see whether it changes the kernel: that is how it finds
conditions the table lacks.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from scripts.kernel_truth.mirror import Tree
from scripts.kernel_truth.values import NOTHING, Default, Member, OneOf, Opaque, Unknown

# vllm-ascend's names for each chip, across tags: AscendSocVersion (v0.9.1-v0.11.0: A2, A3, UNDEFINED/MAX),
# AscendDeviceType (v0.12.0rc1: _910B, _910_93, _310P, _910_95; v0.13.0rc1 on: A2, A3, _310P, A5).
DEVICE_NAMES = {
    "A2": frozenset({"_910B", "A2"}),
    "A3": frozenset({"_910_93", "A3"}),
    "A5": frozenset({"_910_95", "A5"}),
    "310P": frozenset({"_310P"}),
}
SOC_NAMES = {
    "A2": frozenset({"A2"}),
    "A3": frozenset({"A3"}),
    "A5": frozenset({"UNDEFINED", "MAX"}),
    "310P": frozenset({"UNDEFINED", "MAX"}),
}
FUSION_ARCHITECTURES_V011 = ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM")
GRAPH_MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE", "TORCHAIR")


@dataclass(frozen=True)
class Call:
    """The layer and the model the call belongs to (what table `when` keys may test)."""

    head_size: int = 128
    rotary_dim: int = 128
    neox: bool = True
    mrope_section: tuple[int, ...] = (16, 24, 24)
    architecture: str = "Qwen2ForCausalLM"
    dtype: str = "bfloat16"
    last_dim: int = 37888  # the input's last dimension (Qwen2-7B's gate_up width for silu_and_mul)
    sliding_window: bool = False

    @property
    def label(self) -> str:
        parts = [f"head {self.head_size}"]
        if self.rotary_dim != self.head_size:
            parts.append(f"rotary {self.rotary_dim}")
        if not self.neox:
            parts.append("gpt-j")
        if self.architecture != "Qwen2ForCausalLM":
            parts.append(self.architecture)
        if self.dtype != "bfloat16":
            parts.append(self.dtype)
        if self.last_dim != 37888:
            parts.append(f"last dim {self.last_dim}")
        if self.sliding_window:
            parts.append("sliding window")
        if self.mrope_section != (16, 24, 24):
            parts.append(f"M-RoPE {list(self.mrope_section)}")
        return ", ".join(parts)


@dataclass(frozen=True)
class Cell:
    """One audit cell: an op at a tag on a chip, in a graph mode, for one call."""

    op: str
    ref: str  # git ref read: 'v0.13.0' or 'main'
    chip: str  # A2 | A3 | A5 | 310P
    graph: str = "NONE"
    pa_shape: bool = False
    state: str | None = None  # AscendAttentionState member for attention ops
    call: Call = field(default_factory=Call)
    quant: str | None = None  # W8A8 | W8A8_DYNAMIC | W8A16 | W4A8_DYNAMIC for the linears
    checkpoint: str = "msmodelslim"  # msmodelslim | compressed-tensors
    flips: frozenset[str] = frozenset()  # default labels to invert (sensitivity runs)
    cann: str | None = None  # the CANN the release was verified with (matrix row)

    def capturing(self) -> bool:
        """Whether the kernels of this state are the ones captured in a full ACL graph (replayed as captured)."""
        if self.graph == "FULL":
            return True
        return self.graph in ("FULL_DECODE_ONLY", "FULL_AND_PIECEWISE") and self.state == "DecodeOnly"

    def flipped(self, label: str) -> Cell:
        return replace(self, flips=self.flips | {label})


Rule = Callable[["CellFacts", re.Match, Any, Any], Any]


class CellFacts:
    """The walker's oracle for one cell at one tree (see the module docstring)."""

    def __init__(self, cell: Cell, tree: Tree, requires_triton: bool, env_defaults: dict[str, Any]) -> None:
        self.cell = cell
        self.tree = tree
        self.requires_triton = requires_triton
        self.env_defaults = env_defaults
        self.read: set[str] = set()  # which parts of the cell the walk asked about (memo keys)

    def default(self, value: Any, label: str) -> Default:
        if label in self.cell.flips:
            value = (not value) if isinstance(value, bool) else (None if value is not None else Opaque(label))
        return Default(value, label)

    def lookup(self, text: str, node: ast.AST, frame: Any, walker: Any) -> Any:
        for rule, match in _matches(text):
            if True:
                value = rule(self, match, node, frame)
                if value is not NOTHING:
                    self.read.add(DIMENSIONS.get(rule) or getattr(rule, "dimension", "cell"))
                    return value
        return NOTHING


_MATCHES: dict[str, list[tuple[Any, re.Match]]] = {}


def _matches(text: str) -> list[tuple[Any, re.Match]]:
    """The rules whose pattern matches `text` (spaces removed), in order; cached per text."""
    hit = _MATCHES.get(text)
    if hit is None:
        compact = re.sub(r"\s+", "", text)
        hit = [(rule, m) for pattern, rule in RULES if (m := pattern.search(compact))]
        _MATCHES[text] = hit
    return hit


def _chip(facts: CellFacts, *_: Any) -> Any:
    return OneOf("AscendDeviceType", DEVICE_NAMES[facts.cell.chip])


def _soc(facts: CellFacts, *_: Any) -> Any:
    return OneOf("AscendSocVersion", SOC_NAMES[facts.cell.chip])


def _mode(facts: CellFacts, *_: Any) -> Any:
    graph = facts.cell.graph
    return Member(f"CUDAGraphMode.{'NONE' if graph == 'TORCHAIR' else graph}")


def _env(facts: CellFacts, match: re.Match, *_: Any) -> Any:
    name = match[1]
    if name not in facts.env_defaults:
        return NOTHING
    return facts.default(facts.env_defaults[name], f"{name}={facts.env_defaults[name]!r} (envs.py default)")


# v0.8.4rc2-v0.8.5rc1 name the no-cache prefill PrefillOnly (and have no PrefillCacheHit: such a batch is
# ChunkedPrefill there, which the comparisons with the other members reach by themselves).
STATE_NAMES = {"PrefillNoCache": frozenset({"PrefillNoCache", "PrefillOnly"})}


def _attn_state(facts: CellFacts, *_: Any) -> Any:
    state = facts.cell.state
    if not state:
        return NOTHING
    return OneOf("AscendAttentionState", STATE_NAMES.get(state, frozenset({state})))


def _is_enable_nz(facts: CellFacts, *_: Any) -> Any:
    if "VLLM_ASCEND_ENABLE_NZ" not in facts.env_defaults:
        return NOTHING
    value = facts.env_defaults["VLLM_ASCEND_ENABLE_NZ"]
    return facts.default(bool(value), f"VLLM_ASCEND_ENABLE_NZ={value!r} (envs.py default)")


_DTYPE_ALIASES = {"float": "float32", "half": "float16", "bfloat16": "bfloat16"}


def _weight_dtype(facts: CellFacts, match: re.Match, *_: Any) -> Any:
    """A quantized weight is int8: `weight.dtype == torch.float32`, `weight.dtype in {...}`."""
    listed = [_DTYPE_ALIASES.get(d, d) for d in re.findall(r"torch\.(\w+)", match["rest"])]
    inside = "int8" in listed
    return (not inside) if match["op"] in ("!=", "notin") else inside


def _weight_nz_mode(facts: CellFacts, *_: Any) -> Any:
    # ascend_config.py@v0.20.2rc1: additional_config weight_nz_mode, else VLLM_ASCEND_ENABLE_NZ's value
    if "VLLM_ASCEND_ENABLE_NZ" not in facts.env_defaults:
        return NOTHING
    value = facts.env_defaults["VLLM_ASCEND_ENABLE_NZ"]
    return facts.default(value, f"weight_nz_mode={value!r} (additional_config absent, VLLM_ASCEND_ENABLE_NZ default)")


def _quant_type(facts: CellFacts, *_: Any) -> Any:
    return facts.cell.quant or NOTHING


def _const(value: Any) -> Rule:
    return _dim("fixed", lambda *_: value)


def _assumed(value: Any, label: str) -> Rule:
    return _dim("fixed", lambda facts, *_: facts.default(value, label))


def _dim(dimension: str, rule: Rule) -> Rule:
    """Tag a rule with the part of the cell it reads (see DIMENSIONS)."""
    rule.dimension = dimension  # type: ignore[attr-defined]
    return rule


def _head(facts: CellFacts, *_: Any) -> Any:
    return facts.cell.call.head_size


def _rotary(facts: CellFacts, *_: Any) -> Any:
    return facts.cell.call.rotary_dim


def _neox(facts: CellFacts, *_: Any) -> Any:
    return facts.cell.call.neox


def _dtype_is(facts: CellFacts, match: re.Match, *_: Any) -> Any:
    want = match["dtype"]
    equal = facts.cell.call.dtype == want
    return equal if match["op"] == "==" else not equal


def _dtype_in(facts: CellFacts, match: re.Match, *_: Any) -> Any:
    listed = re.findall(r"torch\.(\w+)", match["items"])
    inside = facts.cell.call.dtype in listed
    return inside if match["op"] == "in" else not inside


def _mrope(facts: CellFacts, match: re.Match, *_: Any) -> Any:
    section = list(facts.cell.call.mrope_section)
    wanted = [int(x) for x in re.findall(r"\d+", match["list"])]
    equal = section == wanted
    return equal if match["op"] == "==" else not equal


def _architecture_in(facts: CellFacts, match: re.Match, *_: Any) -> Any:
    names = re.findall(r"['\"]([\w.-]+)['\"]", match["items"])
    inside = facts.cell.call.architecture in names or facts.cell.call.architecture.lower() in [n.lower() for n in names]
    return inside


def _capturing(facts: CellFacts, *_: Any) -> Any:
    return facts.cell.capturing()


def _torchair(facts: CellFacts, *_: Any) -> Any:
    return facts.cell.graph == "TORCHAIR"


def _enforce_eager(facts: CellFacts, *_: Any) -> Any:
    return facts.cell.graph == "NONE"


def _compressed(facts: CellFacts, *_: Any) -> Any:
    return facts.cell.checkpoint == "compressed-tensors"


_S = r"(?:self\.|layer\.|impl\.)?"
# The activation's dtype as vllm-ascend's code names it (never a weight's or the KV cache's).
_ACT_DTYPE = r"(?:(?:x|query|key|q|k|hidden_states|input|inputs|input_)\.dtype|original_dtype|(?:layer\.|self\.)?params_dtype|dtype)"
RULES: list[tuple[re.Pattern, Rule]] = [
    # ---- chip
    (re.compile(r"^is_310p\(\)$"), _dim("chip", lambda f, *_: f.cell.chip == "310P")),
    (re.compile(r"^(?:\w+\.)?get_ascend_device_type\(\)$"), _chip),
    (re.compile(r"^(?:\w+\.)?get_ascend_soc_version\(\)$"), _soc),
    (re.compile(r"^(?:self\.)?device_type$"), _chip),
    (re.compile(r"^is_A5\(\)$|^is_a5\(\)$"), _dim("chip", lambda f, *_: f.cell.chip == "A5")),
    # ---- attention
    (re.compile(r"^(?:\w+\.)*attn_metadata\.attn_state$|^attn_state$|^metadata\.attn_state$"), _attn_state),
    (re.compile(rf"^{_S}head_size$|^{_S}head_dim$|^self\.head_size_v$"), _head),
    (re.compile(rf"^{_S}attn_type$|^attn_type$"), _const(Member("AttentionType.DECODER"))),
    (re.compile(r"^(?:\w+\.)?use_mla$|^(?:\w+\.)?use_sparse$|^(?:\w+\.)?use_compress$"), _const(False)),
    (re.compile(r"^use_v1$|^(?:\w+\.)?use_v1$"), _const(True)),
    (re.compile(r"^(?:\w+\.)*model_config\.use_mla$|^(?:\w+\.)*is_deepseek_mla$"), _const(False)),
    (
        re.compile(rf"^{_S}sliding_window$"),
        _dim("call", lambda f, *_: Opaque("sliding_window") if f.cell.call.sliding_window else None),
    ),
    (re.compile(rf"^{_S}(?:alibi_slopes|sinks|kv_sharing_target_layer_name)$"), _const(None)),
    (re.compile(r"^(?:\w+\.)*speculative_config$"), _assumed(None, "no speculative decoding")),
    (re.compile(r"^(?:\w+\.)*is_draft_model$"), _const(False)),
    (re.compile(r"^trace_flag$"), _const(False)),
    (re.compile(r"^selected_backend$"), _const(None)),
    (
        re.compile(r"^(?:\w+\.)?get_cpu_architecture\(\)==(?:\w+\.)?CpuArchEnum\.X86$"),
        _assumed(False, "host CPU is not x86"),
    ),
    (re.compile(r"^isinstance\((?:\w+\.)*is_causal_pooling,bool\)$"), _const(False)),  # a generation model, not pooling
    (re.compile(r"^(?:\w+\.)*use_batch_invariant$"), _const(False)),
    (
        re.compile(r"^(?:self\.)?enable_hamming_sparse$"),
        _assumed(False, "no KV-cache compression (hamming sparse attention)"),
    ),
    (re.compile(r"^use_kv_cache_int8$"), _assumed(False, "KV cache not int8")),
    (re.compile(r"^(?:self\.)?enable_c8_quant$"), _assumed(False, "KV cache not C8-quantized (no kv_quant_type)")),
    (re.compile(r"^(?:self\.)?is_kv_producer$|^(?:self\.)?is_kv_consumer$"), _const(False)),
    (
        re.compile(r"^(?:enable_cp|enable_pcp|enable_dcp|is_enable_cp|enable_dsa_cp)\(\)$"),
        _assumed(False, "no context parallelism"),
    ),
    (re.compile(r"^(?:self\.)?(?:pcp_size|dcp_size|pcp_world_size|dcp_world_size)(?:>1)$"), _const(False)),
    (re.compile(r"^(?:\w+\.)*(?:prefill|decode)_context_parallel_size>1$"), _assumed(False, "no context parallelism")),
    (re.compile(r"^len\(kv_cache\)>1$|^len\(kv_cache\)>0$"), _const(True)),
    (re.compile(r"^attn_metadata(?:isNone)$"), _const(False)),
    (re.compile(r"^(?:\w+\.)*model_runner_type==['\"]pooling['\"]$"), _const(False)),
    (re.compile(r"^output_scaleisnotNoneoroutput_block_scaleisnotNone$"), _const(False)),
    (re.compile(r"^(?:\w+\.)*causal$"), _const(True)),
    (
        re.compile(r"^hasattr\(layer,['\"]quant_method['\"]\)$"),
        _assumed(False, "attention layer not quantized (no KV-cache quantization)"),
    ),
    (re.compile(r"^kv_cache\.numel\(\)>0$|^kv_cache\[0\]\.numel\(\)>0$"), _const(True)),
    (re.compile(r"^(?:\w+\.)*rl_config\.enabled$"), _assumed(False, "no RL training-consistency mode")),
    # ---- graph mode
    (re.compile(r"^(?:getattr\((?:\w+\.)*\w+,['\"]capturing['\"],False\)|(?:\w+(?:\(\))?\.)*capturing)$"), _capturing),
    (re.compile(r"^(?:\w+\.)*compilation_config\.cudagraph_mode$|^cudagraph_mode$"), _mode),
    (re.compile(r"^(?:\w+\.)*CUDAGraphMode\.(\w+)$"), _dim("fixed", lambda f, m, *_: Member(f"CUDAGraphMode.{m[1]}"))),
    (re.compile(r"^(?:\w+(?:\(\))?\.)*torchair_graph_config\.enabled$|^use_torchair$"), _torchair),
    (re.compile(r"^(?:\w+\.)*enforce_eager$"), _enforce_eager),
    (re.compile(r"\w+in(?:get_ascend_config\(\)|\w+)\.pa_shape_list$"), _dim("graph", lambda f, *_: f.cell.pa_shape)),
    (re.compile(r"^(?:\w+(?:\(\))?\.)*xlite_graph_config\.enabled$"), _assumed(False, "xlite graph off")),
    # ---- switches whose default is the release's install
    (
        re.compile(r"^(?:\w+\.)?enable_custom_op\(\)$|^_?CUSTOM_OP_ENABLED$"),
        _assumed(True, "custom ops built (_C_ascend ships in the wheel)"),
    ),
    (
        re.compile(r"^HAS_TRITON$"),
        _dim(
            "fixed",
            lambda f, *_: f.default(f.requires_triton, "triton-ascend installed (a requirement of the release)"),
        ),
    ),
    (re.compile(r"^(?:\w+\.)?(VLLM_ASCEND_\w+|COMPILE_CUSTOM_KERNELS|USE_OPTIMIZED_MODEL)$"), _env),
    # ---- the call
    (re.compile(r"^(?:self\.)?rotary_dim$"), _rotary),
    (re.compile(r"^(?:self\.)?is_neox_style$|^neox_style$"), _neox),
    (
        re.compile(r"^(?:self\.)?rotary_dim<(?:self\.)?head_size$"),
        _dim("call", lambda f, *_: f.cell.call.rotary_dim < f.cell.call.head_size),
    ),
    (
        re.compile(r"^(?:self\.)?rotary_dim!=(?:self\.)?head_size$"),
        _dim("call", lambda f, *_: f.cell.call.rotary_dim != f.cell.call.head_size),
    ),
    (
        re.compile(
            r"^(?:self\.)?cos_sin_cache\.shape\[-1\]!=(?:self\.)?head_size$|^cos_sin_cache\.shape\[-1\]==(?:self\.)?head_size$"
        ),
        _dim(
            "call",
            lambda f, m, *_: (
                (f.cell.call.rotary_dim != f.cell.call.head_size)
                if "!=" in m[0]
                else (f.cell.call.rotary_dim == f.cell.call.head_size)
            ),
        ),
    ),
    (re.compile(r"^(?:self\.)?mrope_section(?P<op>==|!=)(?P<list>\[[\d,]+\])$"), _mrope),
    (re.compile(rf"^{_ACT_DTYPE}(?P<op>==|!=)torch\.(?P<dtype>\w+)$"), _dtype_is),
    (re.compile(rf"^{_ACT_DTYPE}(?P<op>in|notin)(?P<items>[\[\(\{{].*[\]\)\}}])$"), _dtype_in),
    (
        re.compile(r"(?:\w+\.)*(?:architectures\[0\]|model_type|architecture)in(?P<items>[\[\(\{].*[\]\)\}])$"),
        _architecture_in,
    ),
    (re.compile(r"^(?:self\.)?cos_sin_cache\.shape\[-1\]$|^(?:self\.)?cos_sin_cache\.size\(-1\)$"), _rotary),
    (
        re.compile(r"^positions\.ndim$|^positions\.dim\(\)$"),
        _dim("fixed", lambda f, *_: 2 if f.cell.op == "mrope" else 1),
    ),
    (
        re.compile(r"^(?:self\.)?mrope_interleaved$"),
        _assumed(False, "M-RoPE sections not interleaved (Qwen2-VL style)"),
    ),
    (re.compile(r"prefetch_mlp_enabled"), _assumed(False, "no MLP weight prefetch")),
    (re.compile(r"^(?:\w+\.)*addrmsnorm_quant_fusion_enabled$"), _dim("quant", lambda f, *_: f.cell.quant == "W8A8")),
    (
        re.compile(r"^(?:x|input|hidden_states)\.(?:shape\[-1\]|size\(-1\))$"),
        _dim("call", lambda f, *_: f.cell.call.last_dim),
    ),
    (re.compile(r"^(?:\w+\.)?is_vl_model\([^)]*\)$"), _dim("call", lambda f, *_: "VL" in f.cell.call.architecture)),
    (
        re.compile(r"^get_cos_and_sin_slice\(\)$"),
        _dim(
            "call", lambda f, *_: (None, None) if "VL" in f.cell.call.architecture else (Opaque("cos"), Opaque("sin"))
        ),
    ),
    (re.compile(r"^attn_metadata\.seq_lens\.shape\[0\]==query\.size\(0\)$"), _const(True)),
    # the batch's composition by state: a ChunkedPrefill batch mixes decodes and prefills
    (
        re.compile(r"^(?:\w+\.)*num_prefills>0$|^num_prefill_tokens>0$"),
        _dim("state", lambda f, *_: f.cell.state != "DecodeOnly"),
    ),
    (
        re.compile(r"^(?:\w+\.)*num_decodes>0$|^num_decode_tokens>0$"),
        _dim("state", lambda f, *_: f.cell.state in ("DecodeOnly", "ChunkedPrefill")),
    ),
    (
        re.compile(r"^torch\.version\.cann\.startswith\(['\"]([\w.]+)['\"]\)$"),
        _dim("cell", lambda f, m, *_: bool(f.cell.cann) and f.cell.cann.startswith(m[1])),
    ),
    (re.compile(r"^isinstance\(x,tuple\)$"), _dim("call", lambda f, *_: f.cell.call.dtype == "int8")),
    (re.compile(r"^(?:\w+\.)?is_enable_nz\([^)]*\)$"), _is_enable_nz),
    (re.compile(r"^(?:layer\.)?weight(?:\.data)?\.is_meta$"), _const(False)),
    # ascend_forward_context.py@v0.11.0:164: the norm-quant fusion for model_type in llama/qwen2/qwen3/qwen3_moe
    (
        re.compile(r"^self\.next_need_quant_fusion_linear$"),
        _dim(
            "cell",
            lambda f, *_: (
                Opaque("next_linear")
                if f.cell.quant == "W8A8" and f.cell.call.architecture in FUSION_ARCHITECTURES_V011
                else None
            ),
        ),
    ),
    (re.compile(r"^(?:\w+(?:\(\))?\.)*weight_nz_mode$|^nz_mode$"), _weight_nz_mode),
    (
        re.compile(r"^(?:self\.|ascend_config\.|get_ascend_config\(\)\.)?enable_weight_nz_layout$"),
        _assumed(False, "additional_config enable_weight_nz_layout off (its default)"),
    ),
    (re.compile(r"^(?:layer\.)?weight(?:\.data)?\.dtype(?P<op>==|!=|in|notin)(?P<rest>.+)$"), _weight_dtype),
    # ---- the linears
    (re.compile(r"^(?:\w+\.)*quant_type$|^quant_type$"), _quant_type),
    (re.compile(r"^(?:\w+\.)*is_compressed_tensors$"), _compressed),
    (
        re.compile(
            r"^(?:layer\.ascend_quant_method|getattr\(layer,['\"]ascend_quant_method['\"],['\"]['\"]\)|ascend_quant_method)$"
        ),
        _dim("quant", lambda f, *_: "compressed-tensors" if f.cell.checkpoint == "compressed-tensors" else ""),
    ),
    (re.compile(r"^(?:self\.)?tp_rank$|^tp_rank$"), _const(0)),
]


# Which part of the cell each rule reads (a walk that never read the graph mode is the same for every mode).
DIMENSIONS: dict[Any, str] = {
    _chip: "chip",
    _soc: "chip",
    _mode: "graph",
    _capturing: "graph",
    _torchair: "graph",
    _enforce_eager: "graph",
    _attn_state: "state",
    _head: "call",
    _rotary: "call",
    _neox: "call",
    _mrope: "call",
    _dtype_is: "call",
    _dtype_in: "call",
    _architecture_in: "call",
    _quant_type: "quant",
    _weight_dtype: "fixed",
    _is_enable_nz: "fixed",
    _weight_nz_mode: "fixed",
    _compressed: "quant",
}


def env_defaults(tree: Tree) -> dict[str, Any]:
    """VLLM_ASCEND_* defaults as the tag's envs.py writes them: `os.getenv("NAME", "1")` inside int()/bool()."""
    text = tree.text("vllm_ascend/envs.py")
    if text is None:
        return {}
    out: dict[str, Any] = {}
    module = ast.parse(text)
    for node in ast.walk(module):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values):
            if not (isinstance(key, ast.Constant) and isinstance(value, ast.Lambda)):
                continue
            out[key.value] = _default_of(value.body)
    return out


def _default_of(body: ast.expr) -> Any:
    """Evaluate a lambda body with every os.getenv/os.environ.get returning its default."""

    class Env(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> Any:
            self.generic_visit(node)
            name = ast.unparse(node.func)
            if name in ("os.getenv", "os.environ.get", "getenv"):
                return node.args[1] if len(node.args) > 1 else ast.Constant(None)
            return node

    try:
        tree = ast.fix_missing_locations(Env().visit(ast.Expression(body)))
        return eval(compile(tree, "envs.py", "eval"), {"int": int, "bool": bool, "float": float, "str": str})  # noqa: S307
    except Exception:
        return Unknown("env")


def requires_triton(tree: Tree) -> bool:
    """Whether the release lists triton-ascend as a requirement (requirements.txt or pyproject.toml)."""
    for path in ("requirements.txt", "pyproject.toml"):
        text = tree.text(path) or ""
        if re.search(r"^\s*\"?triton-ascend", text, re.M):
            return True
    return False
