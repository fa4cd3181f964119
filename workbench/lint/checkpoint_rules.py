"""What a vllm-ascend release's loader accepts of a quantized checkpoint, rule by rule, each finding cited
from the capability table `workbench/truth/data/quant_capabilities.json` (file@tag:line in vllm-ascend's
source, checked against the mirror by `scripts/quant_capabilities.py`) or, for the quantization method and
the architecture config.json names, from the table lint shares (workbench.truth.capabilities)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from workbench.lint.checkpoint_files import DESCRIPTION_FILE, CheckpointFiles
from workbench.lint.checkpoint_judge import CheckpointJudge, capability_table, cell

# msmodelslim's description keys that describe the model, not a tensor (ascend_backend.quantization.msmodelslim)
# msmodelslim's description keys that describe the model, not a tensor (ascend_backend.quantization.msmodelslim)
MODEL_KEYS = frozenset(
    {
        "model_quant_type",
        "version",
        "group_size",
        "kv_quant_type",
        "kv_cache_type",
        "fa_quant_type",
        "indexer_quant_type",
        "reduce_quant_type",
        "metadata",
        "optional",
    }
)
LINEAR = re.compile(r"^(?P<stem>.*\.(?:self_attn|mlp|attn))\.(?P<leaf>\w+_proj)$")
FUSED = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


def _entries(description: Mapping[str, Any]) -> dict[str, str]:
    return {k: v for k, v in description.items() if k not in MODEL_KEYS and isinstance(v, str)}


def format_rules(j: CheckpointJudge) -> None:
    ckpt = j.ckpt
    quant = ckpt.quantization_config
    ct = quant is not None and quant.get("quant_method") == "compressed-tensors"
    if ckpt.description is not None and ct:
        j.add(
            f"{DESCRIPTION_FILE} + config.json:quantization_config",
            "both",
            "detect.ascend_first",
            "two_formats",
            "warning",
            "the directory holds an msmodelslim description and a compressed-tensors config; vllm-ascend "
            "loads it as 'ascend' from the description and ignores config.json's quantization_config",
            "keep one format: delete quantization_config from config.json, or the description file",
        )
    if ckpt.description is None and quant is not None and quant.get("quant_method"):
        _method_rule(j, str(quant["quant_method"]))
    _architecture_rule(j)


def _method_rule(j: CheckpointJudge, method: str) -> None:
    """config.json's quant_method, judged by the table `lint --quantization` and the scan use
    (workbench.truth.capabilities: NPUPlatform.supported_quantization at the tag)."""
    from workbench.truth.capabilities import quantization
    from workbench.truth.table import config_table

    table = config_table()
    tag = table.tag_for(j.tag)[0]
    verdict = quantization(table, tag, table.vllm_for(tag), method, parser=False)
    if verdict.accepted is not False:
        return
    fix = (
        "re-export with `ascend-workbench quantize --format msmodelslim`, or deploy a release that lists it"
        if method == "compressed-tensors"
        else "requantize with msModelSlim (W8A8/W4A8) and serve it as 'ascend', or deploy a release that lists it"
    )
    j.add(
        "config.json:quantization_config.quant_method",
        method,
        None,
        "format_unsupported",
        "error",
        f"vllm-ascend {j.tag}: {verdict.reason}",
        fix,
        cite=_file_at_tag(verdict.cite),
    )


def _file_at_tag(cite: str) -> str:
    """The config-truth table's 'TAG:path:line' written as this table writes it, 'path@TAG:line'."""
    parts = cite.split(":")
    return f"{parts[1]}@{parts[0]}:{parts[2]}" if len(parts) == 3 and parts[1].endswith(".py") else cite


def _architecture_rule(j: CheckpointJudge) -> None:
    """config.json's architectures, judged by the model registries the command lint uses."""
    from workbench.truth.capabilities import architecture
    from workbench.truth.table import config_table

    names = (j.ckpt.config or {}).get("architectures") or []
    table = config_table()
    tag = table.tag_for(j.tag)[0]
    for name in [n for n in names if isinstance(n, str)]:
        verdict = architecture(table, tag, table.vllm_for(tag), name)
        if verdict.accepted is False:
            j.add(
                "config.json:architectures",
                name,
                None,
                "architecture_unsupported",
                "error",
                verdict.reason,
                "serve it on a release whose vLLM knows the architecture, or convert the checkpoint",
                cite=_file_at_tag(verdict.cite),
            )


def msmodelslim_rules(j: CheckpointJudge) -> None:
    description = j.ckpt.description or {}
    entries = _entries(description)
    by_type: dict[str, list[str]] = {}
    for name, kind in sorted(entries.items()):
        prefix = name[: -len(".weight")] if name.endswith(".weight") else None
        if prefix is not None and kind != "FLOAT" and LINEAR.match(prefix):
            by_type.setdefault(kind, []).append(name)
    for kind, names in sorted(by_type.items()):
        row = f"linear.{kind}"
        setting, value = f"{DESCRIPTION_FILE}:{names[0]}", f"{kind} ({len(names)} linears)"
        if not any(r["id"] == row for r in capability_table()["rows"]):
            j.add(
                setting,
                value,
                None,
                "unknown_type",
                "warning",
                f"{kind} is not in the capability table; the loader may not know it",
                "check the release's quantization methods",
                cell("linear.W8A8", j.tag)["cite"],
            )
        elif not j.supported(row):
            j.add(
                setting,
                value,
                row,
                "linear_type_unsupported",
                "error",
                f"vllm-ascend {j.tag} has no {kind} method for a dense linear",
                _type_fix(kind),
            )
    if "lm_head.weight" not in description and not j.supported("lookup.lm_head_guarded"):
        j.add(
            f"{DESCRIPTION_FILE}:lm_head.weight",
            "absent",
            "lookup.lm_head_guarded",
            "lm_head_entry_missing",
            "error",
            f"vLLM builds lm_head with the quantization config (tied or not) and vllm-ascend {j.tag} looks "
            "up quant_description['lm_head.weight']: KeyError at start-up",
            'add "lm_head.weight": "FLOAT" to the description (ascend-workbench quantize writes it)',
        )
    _missing_entries(j, entries)
    _fused_rules(j, entries)
    _w4a8_rules(j, description, entries)
    _c8_rules(j, description)


def _type_fix(kind: str) -> str:
    if kind == "W4A16":
        return "vllm-ascend runs W4A16 on MoE experts only: quantize dense layers W8A8 / W8A8_DYNAMIC (or W8A16)"
    if kind == "W8A16":
        return "deploy vllm-ascend v0.13.0 or newer, or quantize these layers W8A8_DYNAMIC"
    if kind == "W4A8_DYNAMIC":
        return "W4A8 dense linears are gone on main: use W8A8_DYNAMIC, or a release up to v0.25.1rc1"
    return "quantize these layers with a type the release lists"


def _missing_entries(j: CheckpointJudge, entries: Mapping[str, str]) -> None:
    stored = [n for n, (dtype, shape, _) in j.ckpt.tensors.items() if n.endswith(".weight") and len(shape) == 2]
    missing = [n for n in stored if LINEAR.match(n[: -len(".weight")]) and n not in entries]
    if missing:
        j.add(
            f"{DESCRIPTION_FILE}:{missing[0]}",
            f"absent ({len(missing)} linear weights without an entry)",
            "lookup.linear_entry",
            "linear_entry_missing",
            "error",
            f"vllm-ascend {j.tag} looks up every linear's '<prefix>.weight' in the description (an MTP or extra "
            f"layer the exporter skipped raises KeyError), e.g. {missing[0]}",
            "re-export the description with every layer, or add the missing entries (FLOAT if left unquantized)",
        )


def _fused_rules(j: CheckpointJudge, entries: Mapping[str, str]) -> None:
    stems = {LINEAR.match(n[:-7])["stem"] for n in entries if n.endswith(".weight") and LINEAR.match(n[:-7])}
    for stem in sorted(stems):
        for group in FUSED:
            kinds = {leaf: entries.get(f"{stem}.{leaf}.weight") for leaf in group}
            present = {k: v for k, v in kinds.items() if v is not None}
            if len(set(present.values())) > 1:
                j.add(
                    f"{DESCRIPTION_FILE}:{stem}.{group[0]}.weight",
                    json.dumps(present),
                    "fused.same_type",
                    "fused_types_differ",
                    "error",
                    f"vLLM fuses {'/'.join(group)} into one layer; vllm-ascend "
                    f"{j.tag} raises 'Not all shards ... same quant type'",
                    "give the fused shards one type (keep all of them FLOAT or all quantized)",
                )


def _w4a8_rules(j: CheckpointJudge, description: Mapping[str, Any], entries: Mapping[str, str]) -> None:
    if not j.supported("w4a8.group_size_default"):
        return  # no W4A8 dense linear at this tag (linear_type_unsupported says so)
    group = description.get("group_size", 256)
    for name, kind in sorted(entries.items()):
        if kind != "W4A8_DYNAMIC" or not name.endswith(".weight"):
            continue
        second = j.ckpt.tensors.get(name[: -len(".weight")] + ".weight_scale_second")
        if second is None or not isinstance(group, int) or group < 1:
            continue
        in_features = _input_size(j.ckpt, name)
        expected = in_features // group if in_features else None
        if expected is not None and second[1][-1] != expected:
            stored_group = in_features // second[1][-1] if second[1][-1] else 0
            j.add(
                f"{DESCRIPTION_FILE}:group_size",
                str(description.get("group_size", "absent (256)")),
                "w4a8.group_size_default",
                "w4a8_group_size_mismatch",
                "error",
                f"{name[:-7]}.weight_scale_second has {second[1][-1]} groups (group size {stored_group}); "
                f"vllm-ascend {j.tag} allocates {expected} from group_size {group}: a shape error at load",
                f'write "group_size": {stored_group} into the description',
            )
            return


def _input_size(ckpt: CheckpointFiles, weight_name: str) -> int | None:
    scale = ckpt.tensors.get(weight_name[: -len(".weight")] + ".weight_scale_second")
    weight = ckpt.tensors.get(weight_name)
    if weight is None or scale is None:
        return None
    # W4A8 packs two int4 per int8 along the output dim (new format) or stores int8 [out, in]: in is the last dim
    return int(weight[1][-1])


def _c8_rules(j: CheckpointJudge, description: Mapping[str, Any]) -> None:
    names = list(j.ckpt.tensors)
    antiquant = [n for n in names if n.endswith(("key_antiquant_scale", "value_antiquant_scale"))]
    cache_scale = [n for n in names if n.endswith(("kv_cache_scale", "kv_cache_offset"))]
    layouts = []
    if description.get("kv_quant_type") == "C8":
        layouts.append(("kv_quant_type", "kv.c8_antiquant", antiquant, "<attn>.key_antiquant_scale"))
    if description.get("kv_cache_type") == "C8":
        layouts.append(("kv_cache_type", "kv.c8_cache_scale", cache_scale, "k_proj/v_proj.kv_cache_scale"))
    for key, row, tensors, expected in layouts:
        if not j.supported(row):
            other = "kv.c8_cache_scale" if row == "kv.c8_antiquant" else "kv.c8_antiquant"
            hint = (
                "this release reads C8 as kv_cache_type with k_proj/v_proj.kv_cache_scale"
                if j.supported("kv.c8_cache_scale")
                else "this release reads C8 as kv_quant_type with key/value_antiquant_scale"
                if j.supported("kv.c8_antiquant")
                else "this release has no C8 KV cache"
            )
            j.add(
                f"{DESCRIPTION_FILE}:{key}",
                "C8",
                row,
                "c8_layout_unsupported",
                "error",
                f"vllm-ascend {j.tag} does not read C8 written as {key} ({expected}): {hint}",
                "export C8 in the layout of the release you deploy (see the loader line), or drop C8",
                cell(other if j.supported(other) else row, j.tag)["cite"],
            )
        elif not tensors and j.ckpt.tensors:
            j.add(
                f"{DESCRIPTION_FILE}:{key}",
                "C8",
                row,
                "c8_scales_missing",
                "error",
                f"{key} is C8 but no {expected} tensor is stored",
                "re-export the KV scales with the checkpoint",
            )


def compressed_tensors_rules(j: CheckpointJudge) -> None:
    quant = j.ckpt.quantization_config or {}
    if quant.get("quant_method") != "compressed-tensors" or not j.supported("ct.static_symmetric_only"):
        return
    for name, group in sorted((quant.get("config_groups") or {}).items()):
        inputs = (group or {}).get("input_activations") or {}
        if inputs and not inputs.get("dynamic") and inputs.get("strategy") == "tensor" and not inputs.get("symmetric"):
            j.add(
                f"config.json:quantization_config.config_groups.{name}.input_activations.symmetric",
                "false",
                "ct.static_symmetric_only",
                "ct_static_asymmetric",
                "error",
                f"vllm-ascend {j.tag} maps a static compressed-tensors group to W8A8 only when its inputs are "
                "symmetric; this group has a zero point and finds no scheme",
                "re-quantize with symmetric static inputs (ascend-workbench quantize does by default)",
            )


def scale_rules(j: CheckpointJudge, bad: Sequence[tuple[str, str]]) -> None:
    for name, what in bad:
        file = j.ckpt.tensors[name][2].name
        j.add(
            f"{file}:{name}",
            what,
            "scales.weight_scale",
            "bad_scale",
            "error",
            "the kernel multiplies by this scale: NaN spreads to every output it touches, zero silences the layer",
            "re-run calibration (a layer whose inputs were all zero or held NaN), or keep the layer FLOAT",
        )
