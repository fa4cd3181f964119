"""Refresh `data/op_plugin_schemas.json`: the declared schemas of every torch_npu function the backend calls.

Run against a git clone of Ascend/op-plugin (https://github.com/Ascend/op-plugin); each branch is read
with `git show BRANCH:PATH`, so no checkout is changed:

    python tests/unit/ascend_backend/npu/extract_schemas.py --op-plugin /path/to/op-plugin \
        --out tests/unit/ascend_backend/npu/data/op_plugin_schemas.json

Two sources per branch:
- aclnn functions: the `custom:` section of `op_plugin/config/op_plugin_functions.yaml` (the schema string,
  and the torch versions its `op_api` entry covers);
- ATB functions (`torch_npu._npu_*`): the `m.def("...")` strings in `op_plugin/ops/atb/*.cpp`, which is
  where op-plugin declares them to torch.library (they are not in the yaml).

torch_npu's own `npu_format_cast` (the FRACTAL_NZ weight cast) is not op-plugin's: its schema is written
here from Ascend/pytorch (`CORE_FUNCTIONS`), the same for every branch.

The output is test data: the contract tests parse these strings; nothing here is imported by the backend.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

import yaml

BRANCHES = ("7.0.0", "7.1.0", "7.2.0", "7.3.0", "26.0.0", "26.1.0", "master")
ACLNN_FUNCTIONS = (
    "npu_rms_norm",
    "npu_add_rms_norm",
    "npu_swiglu",
    "npu_fast_gelu",
    "npu_mrope",
    "npu_apply_rotary_pos_emb",
    "npu_fused_infer_attention_score",
    "npu_scatter_pa_kv_cache",
    "npu_fusion_attention",
    "npu_quantize",
    "npu_dynamic_quant",
    "npu_quant_matmul",
    "npu_add_rms_norm_quant",
    "npu_weight_quant_batchmatmul",
)
# torch_npu's own functions (not op-plugin's): declared in Ascend/pytorch, the same on every branch.
CORE_FUNCTIONS = {
    "npu_format_cast": {
        "schema": "npu_format_cast(Tensor self, int acl_format) -> Tensor",
        "op_api": "core",
        "origin": "Ascend/pytorch torch_npu/csrc/core/npu/NPUFormat.h: npu_format_cast(const at::Tensor &tensor, "
        "int64_t acl_format)",
    },
}
ATB_FUNCTIONS = (
    "_npu_reshape_and_cache",
    "_npu_paged_attention",
    "_npu_flash_attention",
    "_npu_flash_attention_qlens",
    "_npu_paged_attention_splitfuse",
    "_npu_rotary_embedding",
)
YAML_PATH = "op_plugin/config/op_plugin_functions.yaml"
ATB_DIR = "op_plugin/ops/atb"
_DEF = re.compile(r'm\.def\(\s*"((?:[^"\\]|\\.)*)"', re.S)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def aclnn_schemas(repo: Path, branch: str) -> tuple[dict[str, dict], list[str]]:
    """(functions, the branch's `all_version` list): each function with the torch versions its aclnn
    (`op_api`) and its older aclop (`acl_op`) implementations cover, as the yaml writes them."""
    data = yaml.safe_load(git(repo, "show", f"{branch}:{YAML_PATH}"))
    found: dict[str, dict] = {}
    for entry in data.get("custom", []):
        func = entry.get("func", "")
        name = func.split("(", 1)[0]
        if name in ACLNN_FUNCTIONS and name not in found:
            found[name] = {
                "schema": func,
                "op_api": entry.get("op_api"),
                "acl_op": entry.get("acl_op"),
                "origin": YAML_PATH,
            }
    return found, list(data.get("all_version", []))


def atb_schemas(repo: Path, branch: str) -> dict[str, dict]:
    found: dict[str, dict] = {}
    for path in git(repo, "ls-tree", "--name-only", f"{branch}:{ATB_DIR}").split():
        if not path.endswith(".cpp"):
            continue
        text = git(repo, "show", f"{branch}:{ATB_DIR}/{path}")
        for schema in _DEF.findall(text):
            name = schema.split("(", 1)[0]
            if name in ATB_FUNCTIONS and name not in found:
                found[name] = {"schema": " ".join(schema.split()), "op_api": "atb", "origin": f"{ATB_DIR}/{path}"}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op-plugin", type=Path, required=True, help="git directory of an Ascend/op-plugin clone")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--branches", nargs="*", default=list(BRANCHES))
    args = parser.parse_args()
    existing = json.loads(args.out.read_text()) if args.out.is_file() else {}
    branches = {}
    for branch in args.branches:
        commit = git(args.op_plugin, "rev-parse", f"{branch}^{{commit}}").strip()
        aclnn, all_version = aclnn_schemas(args.op_plugin, branch)
        functions = {**aclnn, **atb_schemas(args.op_plugin, branch), **CORE_FUNCTIONS}
        branches[branch] = {"commit": commit, "all_version": all_version, "functions": dict(sorted(functions.items()))}
    out = {**existing, "source": "https://github.com/Ascend/op-plugin", "branches": branches}
    args.out.write_text(json.dumps(out, indent=1, sort_keys=False) + "\n")


if __name__ == "__main__":
    main()
