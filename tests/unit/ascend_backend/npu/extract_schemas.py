"""Refresh `data/op_plugin_schemas.json`: what each pinned torch_npu wheel declares for the functions the backend calls.

A torch_npu wheel is built from one Ascend/pytorch commit, whose `third_party/op-plugin` submodule pins one
op-plugin commit; that commit's `op_plugin/config/op_plugin_functions.yaml` (aclnn functions) and
`op_plugin/ops/atb/*.cpp` `m.def(...)` strings (ATB functions) are the schemas the wheel binds. Run against
git clones of both repositories (read with `git show`, nothing checked out):

    python tests/unit/ascend_backend/npu/extract_schemas.py --op-plugin /path/op-plugin --pytorch /path/pytorch \
        --out tests/unit/ascend_backend/npu/data/op_plugin_schemas.json

Which Ascend/pytorch commit built a wheel (`built_from`):
- a release (2.7.1, 2.8.0.post2): the release tag `v<X.Y.Z>-pytorch<torch>` whose version.txt is that
  version (checked on the PyPI wheel of 2.7.1: its torch_npu/version.py `git_version` is the tag's commit);
- a dev wheel (2.7.1.dev20250724): a nightly of the branch `v<torch>` (and of a release branch
  `v<torch>-<release>` carrying the same version.txt); every op-plugin pointer those branches had during
  that UTC day is a candidate, since the build hour is not recorded;
- a local build (2.9.0.post1+git4c901a4): its commit is not in Ascend/pytorch's public history; the
  release of the same public version and the version vllm-ascend's pyproject pins are its candidates;
- `main` (releases after the newest tag read): op-plugin `master`.

The contract tests bind every call to every candidate. torch_npu's own `npu_format_cast` (not op-plugin's)
is written from Ascend/pytorch, the same everywhere. `implicit` records what op-plugin passes to the kernel
when an argument is absent and the schema cannot say so (7.2.0/7.3.0 hard-code cache_mode "PA_NZ" in
npu_scatter_pa_kv_cache). The output is test data: extracted signatures with their source commit, never
op-plugin's code.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import subprocess
from pathlib import Path

import yaml

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
SCATTER_CPP = "op_plugin/ops/opapi/ScatterPaKvCacheNpuOpApi.cpp"
RELEASES = Path(__file__).resolve().parents[4] / "ascend_backend" / "data" / "vllm_ascend_releases.json"
_DEF = re.compile(r'm\.def\(\s*"((?:[^"\\]|\\.)*)"', re.S)
_DEV = re.compile(r"^(?P<base>.+)\.dev(?P<date>\d{8})$")
_HARDCODED_MODE = re.compile(r'char\*\s*cache_mode\s*=\s*"(\w+)"')
# Wheels whose built-from commit was checked on the wheel itself (PyPI), with what was seen.
CHECKED = {
    "2.7.1": "torch_npu-2.7.1-cp311-cp311-manylinux_2_28_x86_64.whl (PyPI): torch_npu/version.py git_version "
    "9ae698c458d932dcdcaeba27828a14f67dcb863b = tag v7.2.0-pytorch2.7.1; its "
    "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml declares npu_add_rms_norm_quant(..., Tensor? beta=None, ...)",
}
RULE = (
    "a release wheel is built from the Ascend/pytorch release tag whose version.txt is its version; a dev wheel "
    "(X.devYYYYMMDD) is a nightly of the branch carrying version X, so every op-plugin pointer of such a branch "
    "during that UTC day is a candidate; a local build (+gitHASH) not in the public history takes the same public "
    "version's release and vllm-ascend's pyproject pin as candidates; main is op-plugin master. The wheel's schema "
    "is op_plugin/config/op_plugin_functions.yaml and op_plugin/ops/atb/*.cpp at the submodule commit."
)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def aclnn_schemas(repo: Path, rev: str) -> tuple[dict[str, dict], list[str]]:
    """(functions, the commit's `all_version` list) from the yaml's `custom:` section."""
    data = yaml.safe_load(git(repo, "show", f"{rev}:{YAML_PATH}"))
    found: dict[str, dict] = {}
    for entry in data.get("custom", []):
        name = entry.get("func", "").split("(", 1)[0]
        if name in ACLNN_FUNCTIONS and name not in found:
            found[name] = {
                "schema": entry["func"],
                "op_api": entry.get("op_api"),
                "acl_op": entry.get("acl_op"),
                "origin": YAML_PATH,
            }
    return found, list(data.get("all_version", []))


def atb_schemas(repo: Path, rev: str) -> dict[str, dict]:
    found: dict[str, dict] = {}
    for path in git(repo, "ls-tree", "--name-only", f"{rev}:{ATB_DIR}").split():
        if not path.endswith(".cpp"):
            continue
        for schema in _DEF.findall(git(repo, "show", f"{rev}:{ATB_DIR}/{path}")):
            name = schema.split("(", 1)[0]
            if name in ATB_FUNCTIONS and name not in found:
                found[name] = {"schema": " ".join(schema.split()), "op_api": "atb", "origin": f"{ATB_DIR}/{path}"}
    return found


def implicit_arguments(repo: Path, rev: str) -> dict[str, dict]:
    """What op-plugin passes the kernel for an argument the schema does not declare (cache_mode before 26.0.0)."""
    try:
        text = git(repo, "show", f"{rev}:{SCATTER_CPP}")
    except subprocess.CalledProcessError:
        return {}
    for number, line in enumerate(text.splitlines(), 1):
        if match := _HARDCODED_MODE.search(line):
            origin = f"{SCATTER_CPP}:{number}"
            return {"npu_scatter_pa_kv_cache": {"cache_mode": {"value": match[1], "origin": origin}}}
    return {}


def commit_record(repo: Path, rev: str) -> dict:
    aclnn, all_version = aclnn_schemas(repo, rev)
    functions = {**aclnn, **atb_schemas(repo, rev), **CORE_FUNCTIONS}
    return {
        "date": git(repo, "log", "-1", "--format=%cs", rev).strip(),
        "all_version": all_version,
        "functions": dict(sorted(functions.items())),
        "implicit": implicit_arguments(repo, rev),
    }


def _submodule(pytorch: Path, commit: str) -> str:
    return git(pytorch, "ls-tree", commit, "third_party/op-plugin").split()[2]


def _version_at(pytorch: Path, commit: str) -> str:
    return git(pytorch, "show", f"{commit}:version.txt").strip()


def release_tags(pytorch: Path) -> dict[str, list[str]]:
    """version.txt -> the release tags that carry it (alpha, beta and RC tags left out)."""
    found: dict[str, list[str]] = {}
    for tag in git(pytorch, "tag", "--list", "v*-pytorch*").split():
        if re.search(r"alpha|beta|\.RC\d", tag):
            continue
        try:
            found.setdefault(_version_at(pytorch, tag), []).append(tag)
        except subprocess.CalledProcessError:
            continue
    return found


def _built_from_tag(pytorch: Path, tag: str) -> dict:
    commit = git(pytorch, "rev-parse", f"{tag}^{{commit}}").strip()
    return {"pytorch": f"tag {tag}", "pytorch_commit": commit, "op_plugin": _submodule(pytorch, commit)}


def _nightly_candidates(pytorch: Path, base: str, day: str) -> list[dict]:
    """Every op-plugin pointer of a branch carrying version `base` during UTC day `day` (YYYYMMDD)."""
    start = dt.datetime.strptime(day, "%Y%m%d").replace(tzinfo=dt.timezone.utc)
    end = start + dt.timedelta(days=1)
    torch = ".".join(base.split(".")[:3])
    branches = [b.strip() for b in git(pytorch, "branch", "--list", f"v{torch}", f"v{torch}-*").split()]
    out: dict[str, dict] = {}
    for branch in branches:
        heads = git(pytorch, "rev-list", f"--before={start.isoformat()}", "-1", branch).split()
        heads += git(pytorch, "rev-list", f"--after={start.isoformat()}", f"--before={end.isoformat()}", branch).split()
        for commit in heads:
            if _version_at(pytorch, commit) != base:
                continue
            pointer = _submodule(pytorch, commit)
            when = git(pytorch, "log", "-1", "--format=%cI", commit).strip()
            out.setdefault(
                pointer,
                {"pytorch": f"branch {branch} at {when}", "pytorch_commit": commit, "op_plugin": pointer},
            )
    return list(out.values())


def built_from(pytorch: Path, torch_npu: str, tags: dict[str, list[str]], fallback: list[str]) -> dict:
    public = torch_npu.split("+", 1)[0]
    if match := _DEV.match(public):
        return {"built_from": _nightly_candidates(pytorch, match["base"], match["date"])}
    if "+" in torch_npu:
        candidates = [_built_from_tag(pytorch, t) for v in (public, *fallback) for t in tags.get(v, [])]
        note = (
            f"local build {torch_npu}: its commit is not in Ascend/pytorch's public history; the release "
            f"{public} and the version vllm-ascend's pyproject pins ({', '.join(fallback) or 'none'}) are its candidates"
        )
        return {"built_from": candidates, "note": note}
    return {"built_from": [_built_from_tag(pytorch, t) for t in tags.get(public, [])]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op-plugin", type=Path, required=True, help="git directory of an Ascend/op-plugin clone")
    parser.add_argument("--pytorch", type=Path, required=True, help="git directory of an Ascend/pytorch clone")
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    parser.add_argument(
        "--local-fallback",
        nargs="*",
        default=["2.9.0"],
        help="public versions that stand in for a local (+git) build",
    )
    args = parser.parse_args()
    tags = release_tags(args.pytorch)
    versions = sorted({r["torch_npu"] for r in json.loads(RELEASES.read_text())["releases"]})
    wheels = {v: built_from(args.pytorch, v, tags, args.local_fallback) for v in versions}
    for version, evidence in CHECKED.items():
        wheels[version]["checked"] = evidence
    master = git(args.op_plugin, "rev-parse", "master^{commit}").strip()
    wheels["main"] = {
        "built_from": [{"pytorch": "op-plugin master (releases after the newest tag read)", "op_plugin": master}]
    }
    empty = [v for v, w in wheels.items() if not w["built_from"]]
    if empty:
        raise SystemExit(f"no built-from commit found for torch_npu {empty}")
    commits = sorted({c["op_plugin"] for w in wheels.values() for c in w["built_from"]})
    out = {
        "about": __doc__.split("\n\n", 1)[0],
        "source": {"op_plugin": "https://github.com/Ascend/op-plugin", "pytorch": "https://github.com/Ascend/pytorch"},
        "rule": RULE,
        "wheels": wheels,
        "commits": {c: commit_record(args.op_plugin, c) for c in commits},
    }
    args.out.write_text(json.dumps(out, indent=1, sort_keys=False) + "\n")


if __name__ == "__main__":
    main()
