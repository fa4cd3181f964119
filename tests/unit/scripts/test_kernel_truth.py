"""scripts/kernel_truth: the reader of vllm-ascend's source, on small repositories built here, and the audit's verdicts.

The synthetic sources copy the shapes vllm-ascend's code takes (a layer registered through
register_ascend_customop with 310P overrides, a kernel behind `enable_custom_op()`, a platform that picks
the attention backend, a monkeypatched forward_oot), written for these tests; the last test reads the
real mirror when this machine has it and checks the checked-in audit against a fresh run of one tag.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from scripts.kernel_truth import audit, cells, report, vllm_side
from scripts.kernel_truth import compare as comparing
from scripts.kernel_truth.facts import Call, Cell, CellFacts, env_defaults, requires_triton
from scripts.kernel_truth.layers import registered_layer
from scripts.kernel_truth.mirror import Mirror, MirrorError
from scripts.kernel_truth.probes import entries
from scripts.kernel_truth.trace import Walker

ROOT = Path(__file__).resolve().parents[3]
REAL_MIRROR = Path("/work/.mirror/vllm-project+vllm-ascend/repo")

UTILS = """
from enum import Enum

_IS_310P = None

def is_310p():
    return _IS_310P

def enable_custom_op():
    return True

class AscendDeviceType(Enum):
    A2 = 0
    A3 = 1
    _310P = 2
    A5 = 3

def get_ascend_device_type():
    return AscendDeviceType.A2

REGISTERED_ASCEND_OPS = {}

def register_ascend_customop(vllm_config=None):
    from vllm_ascend.ops.layernorm import AscendRMSNorm
    from vllm_ascend.ops.activation import AscendSiluAndMul
    global REGISTERED_ASCEND_OPS
    REGISTERED_ASCEND_OPS = {"RMSNorm": AscendRMSNorm, "SiluAndMul": AscendSiluAndMul}
    if is_310p():
        from vllm_ascend._310p.layernorm import AscendRMSNorm310
        REGISTERED_ASCEND_OPS.update({"RMSNorm": AscendRMSNorm310})
"""
LAYERNORM = """
import torch
import torch_npu
from vllm.model_executor.layers.layernorm import RMSNorm
from vllm_ascend.utils import enable_custom_op, get_ascend_device_type, AscendDeviceType


class AscendRMSNorm(RMSNorm):
    def forward_oot(self, x, residual=None):
        if residual is not None:
            return self._add(x, residual)
        if get_ascend_device_type() == AscendDeviceType.A5:
            return torch_npu.npu_rms_norm(x, self.weight, 1e-6, layout="A5")
        return torch_npu.npu_rms_norm(x, self.weight, self.variance_epsilon)

    def _add(self, x, residual):
        if enable_custom_op():
            return torch.ops._C_ascend.npu_add_rms_norm_bias(x, residual, self.weight, None, 1e-6)
        return torch_npu.npu_add_rms_norm(x, residual, self.weight, 1e-6)
"""
LAYERNORM_310 = """
import torch_npu
from vllm_ascend.ops.layernorm import AscendRMSNorm


class AscendRMSNorm310(AscendRMSNorm):
    def forward_oot(self, x, residual=None):
        if residual is not None:
            x = x + residual
        return torch_npu.npu_rms_norm(x, self.weight, None or 1e-6)
"""
ACTIVATION = """
import torch_npu
from vllm.model_executor.layers.activation import SiluAndMul


class AscendSiluAndMul(SiluAndMul):
    def forward_oot(self, x):
        if x.shape[-1] % 32 == 0:
            return torch_npu.npu_swiglu(x)
        return self.forward_native(x)
"""
ENVS = """
import os
env_variables = {
    "VLLM_ASCEND_ENABLE_NZ": lambda: int(os.getenv("VLLM_ASCEND_ENABLE_NZ", 1)),
    "VLLM_ASCEND_FLAG": lambda: bool(int(os.getenv("VLLM_ASCEND_FLAG", "0"))),
}
"""
FAQS = """### 1. What devices are currently supported?

Currently, **ONLY** Atlas A2 series and Atlas 300I series are supported:

- Atlas 800I A2 Inference series
- Atlas 300I Inference series (Atlas 300I Duo)

Below series are NOT supported yet:
- Atlas 200I A2 (Ascend-cann-kernels-310b) unplanned yet

### 2. Next
"""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def mirror(tmp_path_factory) -> Mirror:
    repo = tmp_path_factory.mktemp("vllm_ascend_src")
    _git(repo, "init", "-q")
    files = {
        "vllm_ascend/__init__.py": "",
        "vllm_ascend/utils.py": UTILS,
        "vllm_ascend/envs.py": ENVS,
        "vllm_ascend/ops/__init__.py": "",
        "vllm_ascend/ops/layernorm.py": LAYERNORM,
        "vllm_ascend/ops/activation.py": ACTIVATION,
        "vllm_ascend/_310p/__init__.py": "",
        "vllm_ascend/_310p/layernorm.py": LAYERNORM_310,
        "docs/source/faqs.md": FAQS,
        "requirements.txt": "torch==2.9.0\ntriton-ascend==3.2.0\n",
    }
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    _git(repo, "add", ".")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "v1")
    _git(repo, "tag", "v1.0.0")
    return Mirror(repo)


def _walk(mirror: Mirror, op: str, chip: str, **cell_args) -> tuple[list[list[str]], Walker]:
    tree = mirror.tree("v1.0.0")
    cell = Cell(op, "v1.0.0", chip, **cell_args)
    walker = Walker(tree, CellFacts(cell, tree, requires_triton(tree), env_defaults(tree)))
    found = entries(walker, cell)
    assert isinstance(found, list), found
    paths = [[c.name for c in state.calls] for e in found for state in walker.run(e.func, e.args)]
    return paths, walker


def test_a_missing_mirror_is_one_clear_error(tmp_path):
    with pytest.raises(MirrorError, match="not a git directory"):
        Mirror(tmp_path / "nowhere")


def test_the_registered_class_and_its_310p_override_are_found(mirror):
    tree = mirror.tree("v1.0.0")
    for chip, cls in (("A2", "AscendRMSNorm"), ("310P", "AscendRMSNorm310")):
        cell = Cell("rms_norm", "v1.0.0", chip)
        walker = Walker(tree, CellFacts(cell, tree, False, {}))
        target, where = registered_layer(walker, "RMSNorm")
        assert target.info.name == cls and where.startswith("vllm_ascend/utils.py:")


def test_chip_branches_and_methods_are_followed(mirror):
    assert _walk(mirror, "rms_norm", "A2")[0] == [["torch_npu.npu_rms_norm"]]
    paths, _ = _walk(mirror, "rms_norm", "A5")
    assert paths == [["torch_npu.npu_rms_norm"]]
    tree = mirror.tree("v1.0.0")
    cell = Cell("rms_norm", "v1.0.0", "A5")
    walker = Walker(tree, CellFacts(cell, tree, False, {}))
    (entry,) = entries(walker, cell)
    (state,) = walker.run(entry.func, entry.args)
    assert dict(state.calls[0].literals)["layout"] == "'A5'"  # the A5 branch's call, with its literal argument


def test_an_or_expression_is_its_operand_not_its_truth(mirror):
    tree = mirror.tree("v1.0.0")
    cell = Cell("rms_norm", "v1.0.0", "310P")
    walker = Walker(tree, CellFacts(cell, tree, False, {}))
    (entry,) = entries(walker, cell)
    (state,) = walker.run(entry.func, entry.args)
    assert dict(state.calls[0].literals)["2"] == "1e-06"  # `None or 1e-6` is 1e-6 (vllm-ascend's `w or SWA_INT_MAX`)


def test_a_compilation_pass_call_is_read_with_its_arguments(mirror):
    tree = mirror.tree("v1.0.0")
    line = 1 + LAYERNORM.splitlines().index(
        "            return torch.ops._C_ascend.npu_add_rms_norm_bias(x, residual, self.weight, None, 1e-6)"
    )
    call = vllm_side.call_at(tree, "vllm_ascend/ops/layernorm.py", line, "npu_add_rms_norm_bias")
    assert call.positional == 5 and dict(call.literals) == {"3": "None", "4": "1e-06"} and not call.keywords


def test_an_own_kernel_default_is_consulted_and_its_flip_gives_the_torch_npu_path(mirror):
    paths, walker = _walk(mirror, "add_rms_norm", "A2")
    assert paths == [["_C_ascend.npu_add_rms_norm_bias"]]
    label = next(iter(walker.consulted))
    assert "custom ops" in label
    flipped, _ = _walk(mirror, "add_rms_norm", "A2", flips=frozenset({label}))
    assert flipped == [["torch_npu.npu_add_rms_norm"]]


def test_a_call_fact_decides_an_alignment_branch(mirror):
    aligned, _ = _walk(mirror, "silu_and_mul", "A2", call=Call(last_dim=4096))
    unaligned, _ = _walk(mirror, "silu_and_mul", "A2", call=Call(last_dim=2000))
    assert aligned == [["torch_npu.npu_swiglu"]] and unaligned == [["native:forward_native"]]


def test_env_defaults_and_requirements_are_read_from_the_tag(mirror):
    tree = mirror.tree("v1.0.0")
    assert env_defaults(tree) == {"VLLM_ASCEND_ENABLE_NZ": 1, "VLLM_ASCEND_FLAG": False}
    assert requires_triton(tree)


def test_chips_known_come_from_the_source_and_the_faq(mirror):
    known = cells.chips_known(mirror.tree("v1.0.0"))
    assert known["A2"] == "" and known["310P"] == "" and known["A5"] == "" and known["A3"] == ""
    # A3: the enum names it even though the FAQ does not; the rule says so in its reason when neither does
    assert "A3" in UTILS


class _Choice:
    def __init__(self, kernel, recipe, row=None, reason=""):
        self.kernel, self.recipe, self.row, self.reason = kernel, recipe, row, reason
        self.native = kernel == "native"


class _Row:
    id = "x.row"
    vllm_default = "torch.ops._C_ascend.npu_add_rms_norm_bias when its custom ops are built"
    differs = ""


def _tag() -> cells.TagInfo:
    from packaging.version import Version

    return cells.TagInfo("v0.18.0", Version("0.18.0"), "v0.18.0", "2.9.0", {"A2": ""})


def test_compare_names_each_kind():
    cell = Cell("add_rms_norm", "v0.18.0", "A2")
    same = vllm_side.VllmSide("calls", ("npu_add_rms_norm",), ("npu_add_rms_norm",))
    assert comparing.compare(_tag(), cell, same, _Choice("npu_add_rms_norm", "npu_add_rms_norm", _Row())).kinds == []
    other = vllm_side.VllmSide("calls", ("npu_rms_norm",), ("npu_rms_norm",))
    assert comparing.compare(_tag(), cell, other, _Choice("npu_add_rms_norm", "x", _Row())).kinds == [
        "different kernel"
    ]
    own = vllm_side.VllmSide(
        "calls", ("_C_ascend.npu_gemma_rms_norm",), ("npu_add_rms_norm",), own=("_C_ascend.npu_gemma_rms_norm",)
    )
    assert (
        "own kernel undeclared" in comparing.compare(_tag(), cell, own, _Choice("npu_add_rms_norm", "x", _Row())).kinds
    )
    undecided = vllm_side.VllmSide("undecided", reason="paths: a | b", conditions=("x > 1 (f.py:3)",))
    assert comparing.compare(_tag(), cell, undecided, _Choice("a", "x", _Row())).kinds == ["missing condition"]
    unknown_chip = vllm_side.VllmSide("unsupported", reason="vllm-ascend v0.18.0 does not know A9")
    assert comparing.compare(_tag(), cell, unknown_chip, _Choice("native", "native")).kinds == []
    assert comparing.compare(_tag(), cell, unknown_chip, _Choice("a", "x", _Row())).kinds == ["different kernel"]


def test_a_kernel_change_at_a_neighbouring_tag_is_a_different_tag():
    cell = Cell("rms_norm", "v0.18.0", "A2")
    before = comparing.compare(_tag(), cell, vllm_side.VllmSide("calls", ("a",), ("a",)), _Choice("a", "r", _Row()))
    moved = comparing.compare(_tag(), cell, vllm_side.VllmSide("calls", ("b",), ("b",)), _Choice("a", "r", _Row()))
    comparing.reclassify_tags([before, moved])
    assert moved.kinds == ["different tag"]


@pytest.mark.skipif(not REAL_MIRROR.is_dir(), reason="the vllm-ascend mirror is not on this machine")
def test_the_checked_in_audit_matches_a_fresh_run_of_one_tag():
    mirror = Mirror(REAL_MIRROR)
    tags = cells.matrix(mirror, ["v0.13.0"])
    ops = ["rms_norm", "add_rms_norm", "silu_and_mul", "w8a8_linear"]
    findings, _ = audit.audit(mirror, tags, ops)
    fresh = {(r["op"], r["chip"], r["call"]): (r["vllm_ascend"], r["table"], r["kinds"]) for r in report.runs(findings)}
    stored = json.loads((ROOT / "docs" / "kernel_truth" / "audit.json").read_text())
    checked = 0
    for record in stored["runs"]:
        key = (record["op"], record["chip"], record["call"])
        spans = stored["mirror"]["tags"]
        if key in fresh and spans.index(record["first"]) <= spans.index("v0.13.0") <= spans.index(record["last"]):
            assert fresh[key] == (record["vllm_ascend"], record["table"], record["kinds"]), key
            checked += 1
    assert checked >= 8


def test_the_stored_form_merges_graph_modes_and_keeps_each_reason_once(tmp_path):
    run = {
        "op": "paged_decode_attention",
        "chip": "310P",
        "call": "head 128",
        "first": "v0.9.2rc1",
        "last": "main",
        "vllm_ascend": "_npu_paged_attention",
        "where": [],
        "entry": "forward (attention_v1.py:1)",
        "table": "native",
        "recipe": "native",
        "row": "decode.310p_nz",
        "kinds": ["different kernel"],
        "details": [],
        "scoped": [],
        "acknowledged": "310P keeps the cache in FRACTAL_NZ",
    }
    data = {
        "mirror": {"main": "0" * 40, "tags": ["v0.9.2rc1", "main"]},
        "seconds": 1,
        "chips_known": {},
        "counts": report.counts([]),
        "out_of_scope": {},
        "runs": [{**run, "graph": "NONE"}, {**run, "graph": "FULL"}],
    }
    report.render(tmp_path, data)
    stored = json.loads((tmp_path / "audit.json").read_text())
    (record,) = stored["runs"]
    assert record["graph"] == ["NONE", "FULL"] and record["entry"] == 0
    assert stored["reasons"] == {"decode.310p_nz": "310P keeps the cache in FRACTAL_NZ"}
    text = (tmp_path / "audit.md").read_text()
    assert "acknowledged by the row: 310P keeps the cache in FRACTAL_NZ" in text
    assert "| paged_decode_attention | 310P | any | head 128 | v0.9.2rc1 … main |" in text
    report.render(tmp_path, stored)  # --render on the stored form leaves it as it is
    assert json.loads((tmp_path / "audit.json").read_text()) == stored
