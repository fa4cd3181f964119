"""Will this vllm-ascend release load this quantized checkpoint? Answered before a server is started.

    findings = lint_checkpoint("/ckpt")                    # every tag of the capability table
    findings = lint_checkpoint("/ckpt", release="0.18.0")  # one release (the newest tag at or before it)
    verdicts(findings)                                     # {tag: "pass" | "warning" | "error"}

PATH is a checkpoint directory or a `quant_model_description.json` alone. The linter reads the
description and config.json, the safetensors *headers* (names, dtypes, shapes: 8 bytes + a JSON
header per file), and the values of the scale tensors only (a few KB: NaN and all-zero scales are
findings). What the loader accepts per tag comes from the capability table
`workbench/truth/data/quant_capabilities.json`, every cell cited `file@tag:line` in vllm-ascend's source
and checked against the mirror by `scripts/quant_capabilities.py`. Real cases behind the rules
(vllm-project/vllm-ascend issues): #8367 lm_head.weight, #5794 an MTP layer without entries, #6481 /
#7076 dense W4A16, #8770 W4A8 group size, #13713 W4A8 linear on main, #2144 C8 tensor names, #6980 NaN
scales, #4313 format detection.

A finding is `CheckpointFinding`: setting (file and key or tensor), value, release, release_basis,
finding (rule id), severity, reason, fix, cite -- the record of the lint verb.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.lint.checkpoint_files import DESCRIPTION_FILE, bad_scales, read_checkpoint, safetensors_header
from workbench.lint.checkpoint_judge import CheckpointFinding, CheckpointJudge, capability_table, resolve_release
from workbench.lint.checkpoint_rules import compressed_tensors_rules, format_rules, msmodelslim_rules, scale_rules

__all__ = [
    "CheckpointFinding",
    "capability_table",
    "findings_text",
    "lint_checkpoint",
    "read_checkpoint",
    "resolve_release",
    "safetensors_header",
    "verdicts",
]
SEVERITY_ORDER = {"pass": 0, "warning": 1, "error": 2}


def lint_checkpoint(path: str | Path, release: str | None = None, basis: str | None = None) -> list[CheckpointFinding]:
    """Every finding for `path` at `release` (None: at every tag of the capability table); [] = loads.
    `basis` says why that release (the lint verb's release resolution); it is carried on every finding."""
    ckpt = read_checkpoint(Path(path))
    if ckpt.description is None and ckpt.description_error is None and ckpt.quantization_config is None:
        raise WorkbenchError(
            f"--checkpoint {path}: neither {DESCRIPTION_FILE} nor a quantization_config in "
            "config.json; this is not a quantized checkpoint"
        )
    bad = bad_scales(ckpt) if ckpt.tensors else []
    findings: list[CheckpointFinding] = []
    for tag, why in resolve_release(release, basis):
        j = CheckpointJudge(ckpt, tag, why)
        if ckpt.description_error is not None:
            j.add(
                DESCRIPTION_FILE,
                ckpt.description_error,
                "format.description_file",
                "description_not_json",
                "error",
                f"vllm-ascend json-loads the description at start-up: {ckpt.description_error}",
                "fix the JSON (real exports often carry a trailing comma) and lint again",
            )
        else:
            format_rules(j)
            if ckpt.description is not None:
                msmodelslim_rules(j)
            else:
                compressed_tensors_rules(j)
            scale_rules(j, bad)
        findings += j.findings
    return findings


def verdicts(findings: Iterable[CheckpointFinding], tags: Sequence[str] | None = None) -> dict[str, str]:
    """tag -> the worst severity of its findings ('pass' when none)."""
    tags = list(tags or capability_table()["tags"])
    out = dict.fromkeys(tags, "pass")
    for f in findings:
        if SEVERITY_ORDER[f.severity] > SEVERITY_ORDER[out.get(f.release, "pass")]:
            out[f.release] = f.severity
    return out


def findings_text(findings: Sequence[CheckpointFinding]) -> str:
    """One block per finding, for the terminal; 'no findings' when the checkpoint loads everywhere asked."""
    if not findings:
        return "no findings: the checkpoint loads at every release judged"
    lines = []
    for f in findings:
        lines.append(
            f"[{f.severity}] {f.release}: {f.setting} = {f.value}\n    {f.reason}\n    fix: {f.fix}\n"
            f"    loader: {f.cite}"
        )
    return "\n".join(lines)
