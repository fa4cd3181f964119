"""Quantize a float checkpoint directory into a complete, servable W8A8 directory.

    result = quantize_checkpoint(QuantizeRequest("smollm2", Scheme.STATIC, QuantFormat.COMPRESSED_TENSORS,
                                                 Path("runs/smollm2-w8a8")))

Steps: resolve the model; read its float tensors; plan the layers; calibrate (static only); quantize;
write the format's files next to copies of the model's config and tokenizer files; add
`quantization.json` (what was done, per layer, stamped with provenance). Everything is written into a
staging directory beside `--out` and renamed into place at the end, so an interrupted run leaves no
half-written checkpoint that a server could mistake for a model (`build_atomically` does the same for
the embedded models and is what `build_into` serves).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from ascend_backend.quantization import (
    ActivationRange,
    QuantFormat,
    QuantizedCheckpointError,
    QuantType,
    checkpoint_format,
    compressed_tensors,
    linear_prefixes,
    msmodelslim,
    plan_layers,
    quantize_model,
)
from ascend_backend.quantization.files import read_tensors, ties_word_embeddings, write_tensors
from ascend_backend.quantization.scheme import PlanScheme
from ascend_backend.quantization.weight_only import (
    pack_quantized_config,
    pack_quantized_tensors,
    quantize_weight_only,
)
from workbench.embedded_models.catalog import resolve_model
from workbench.errors import WorkbenchError
from workbench.quantize.calibrate import calibration_texts, observe_ranges, tokenize
from workbench.quantize.request import QuantizeRequest, QuantizeResult
from workbench.results.envelope import DocumentKind, write_result
from workbench.results.files import staged_directory
from workbench.stack.dtypes import dtype_name, parse_dtype
from workbench.stack.provenance import provenance

QUANTIZATION_KIND = DocumentKind("quantization")  # quantization.json beside a checkpoint: what was written

REPORT_FILE = "quantization.json"
# Files of the source directory that are weights or its own bookkeeping, not model configuration.
_NOT_COPIED = ("*.safetensors", "*.bin", "*.pt", "*.index.json", "provenance.json", REPORT_FILE)


def quantize_checkpoint(request: QuantizeRequest, *, progress: bool = True) -> QuantizeResult:
    """Quantize `request.model` into `request.out` (atomically); see the module docstring."""
    out = request.out.expanduser().resolve()
    if out.exists() and any(out.iterdir()) and not request.force:
        raise WorkbenchError(f"--out {out} exists and is not empty; choose a new directory or pass --force")
    with staged_directory(out) as staging:
        result = build_into(request, staging, progress=progress)
    return dataclasses.replace(result, out=out)


def build_into(request: QuantizeRequest, target: Path, *, progress: bool = True) -> QuantizeResult:
    """Write the quantized checkpoint into the existing, empty directory `target`."""
    started = time.perf_counter()
    source = resolve_model(request.model)
    if checkpoint_format(source) is not None:
        raise WorkbenchError(
            f"--model {source} is already quantized ({checkpoint_format(source).value}); give a float checkpoint"
        )
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    dtype = checkpoint_dtype(request.dtype, config, request.format)
    try:
        state = read_tensors(source).tensors
        prefixes = linear_prefixes(list(state))
        if not prefixes:
            raise WorkbenchError(f"{source}: no decoder projections (model.layers.N.*_proj) to quantize")
        plan = plan_layers(prefixes, request.scheme.quant_type, request.keep_float)
    except (QuantizedCheckpointError, ValueError) as exc:
        raise WorkbenchError(f"--model {source}: {exc}") from None
    ranges, calibration = None, None
    if request.scheme.quant_type is QuantType.W8A8:
        texts, calibration = calibration_texts(request.calibration, request.num_samples)
        samples = tokenize(source, texts, request.max_tokens)
        static = [p for p, kind in plan.items() if kind is QuantType.W8A8]
        ranges = observe_ranges(source, samples, static, progress=progress)
        calibration["tokens"] = sum(len(s) for s in samples)
    model = quantize_model(state, plan, dtype, ranges, tied_embeddings=ties_word_embeddings(config))
    copy_model_files(source, target)
    write_format(model, target, request.format, {**config, **dtype_fields(config, dtype)}, plan)
    result = QuantizeResult(
        target,
        source,
        request.scheme,
        request.format,
        dtype_name(dtype),
        {p: k.value for p, k in plan.items()},
        calibration,
        time.perf_counter() - started,
    )
    write_report(target / REPORT_FILE, result, ranges)
    return result


def write_plan(
    source: Path,
    plan: Mapping[str, QuantType],
    fmt: QuantFormat,
    out: Path,
    *,
    ranges: Mapping[str, ActivationRange] | None = None,
    dtype: str = "auto",
    state: Mapping[str, torch.Tensor] | None = None,
    note: dict[str, Any] | None = None,
) -> Path:
    """A checkpoint of `source` quantized layer by layer as `plan` says (prefix -> W8A8 / W8A8_DYNAMIC / FLOAT;
    prefixes left out stay FLOAT), written atomically into `out` with its quantization.json.

    What the autopilot writes for each plan it serves, and for the plan it returns. `state` (the source's
    tensors, already read) saves re-reading a large checkpoint per plan; `note` is added to the report.
    """
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    torch_dtype = checkpoint_dtype(dtype, config, fmt)
    state = state if state is not None else read_tensors(source).tensors
    full = {p: plan.get(p, QuantType.FLOAT) for p in linear_prefixes(list(state))}
    model = quantize_model(state, full, torch_dtype, ranges, tied_embeddings=ties_word_embeddings(config))
    with staged_directory(out) as staging:
        copy_model_files(source, staging)
        write_format(model, staging, fmt, {**config, **dtype_fields(config, torch_dtype)}, full)
        layers = [{"layer": p, "type": k.value} for p, k in full.items()]
        _write_plan_report(staging, source, note, format=fmt.value, dtype=dtype_name(torch_dtype), layers=layers)
    return out


def write_weight_only(
    source: Path,
    plan: Mapping[str, PlanScheme],
    out: Path,
    *,
    group_size: int,
    dtype: str = "auto",
    state: Mapping[str, torch.Tensor] | None = None,
    note: dict[str, Any] | None = None,
) -> Path:
    """A compressed-tensors "pack-quantized" checkpoint: the plan's W4A16 / W8A16 layers packed, every other
    linear FLOAT (`ascend_backend.quantization.weight_only`); atomically, with quantization.json."""
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    torch_dtype = checkpoint_dtype(dtype, config, QuantFormat.COMPRESSED_TENSORS)
    state = state if state is not None else read_tensors(source).tensors
    prefixes = linear_prefixes(list(state))
    wrong = sorted({s.value for s in plan.values()} - {"W4A16", "W8A16", "FLOAT"})
    if wrong:
        raise WorkbenchError(f"a weight-only checkpoint holds W4A16 / W8A16 / FLOAT layers, not {wrong[0]}")
    layers = {
        p: quantize_weight_only(state[f"{p}.weight"], s, group_size, torch_dtype)
        for p, s in plan.items()
        if s is not PlanScheme.FLOAT
    }
    owned = {f"{p}.weight" for p in layers}
    tensors = {n: (t.to(torch_dtype) if t.is_floating_point() else t) for n, t in state.items() if n not in owned}
    tensors.update(pack_quantized_tensors(layers, torch_dtype))
    floats = [p for p in prefixes if p not in layers]
    with staged_directory(out) as staging:
        copy_model_files(source, staging)
        quant = pack_quantized_config(layers, floats)
        full = {**config, **dtype_fields(config, torch_dtype), "quantization_config": quant}
        (staging / "config.json").write_text(json.dumps(full, indent=2) + "\n", encoding="utf-8")
        write_tensors(tensors, staging / compressed_tensors.WEIGHT_FILE, {"format": "pt"})
        layers = [{"layer": p, "type": plan.get(p, PlanScheme.FLOAT).value} for p in prefixes]
        _write_plan_report(
            staging,
            source,
            note,
            format="compressed-tensors (pack-quantized)",
            dtype=dtype_name(torch_dtype),
            group_size=group_size,
            layers=layers,
        )
    return out


def _write_plan_report(staging: Path, source: Path, note: dict[str, Any] | None, **fields: Any) -> None:
    """quantization.json of a plan checkpoint: what was written, from which source, the caller's note, provenance."""
    report = {**fields, "source": str(source), **(note or {})}
    write_result(staging / REPORT_FILE, report, provenance(model_dir=source, device="cpu"), QUANTIZATION_KIND)


def checkpoint_dtype(requested: str, config: dict[str, Any], fmt: QuantFormat) -> torch.dtype:
    """The float dtype of the quantized checkpoint: the flag, else the source's (bf16 for an fp32 source)."""
    if requested != "auto":
        dtype = parse_dtype(requested)
    else:
        stored = str(config.get("dtype") or config.get("torch_dtype") or "bfloat16")
        dtype = {"float16": torch.float16}.get(stored, torch.bfloat16)
    if dtype not in (torch.bfloat16, torch.float16):
        hint = " (msmodelslim's deq_scale exists for these two only)" if fmt is QuantFormat.MSMODELSLIM else ""
        raise WorkbenchError(f"--dtype {requested}: quantized checkpoints are bfloat16 or float16{hint}")
    return dtype


def dtype_fields(config: dict[str, Any], dtype: torch.dtype) -> dict[str, str]:
    """config.json's dtype key(s) set to `dtype` ('dtype' in transformers 5, 'torch_dtype' before)."""
    keys = [k for k in ("dtype", "torch_dtype") if k in config] or ["torch_dtype"]
    return {key: dtype_name(dtype) for key in keys}


def copy_model_files(source: Path, target: Path) -> None:
    """Config, generation config, tokenizer and chat-template files: everything but weights and bookkeeping."""
    for item in sorted(source.iterdir()):
        if item.is_file() and not any(item.match(pattern) for pattern in _NOT_COPIED):
            shutil.copy2(item, target / item.name)


def write_format(
    model: Any, target: Path, fmt: QuantFormat, config: dict[str, Any], plan: dict[str, QuantType]
) -> list[Path]:
    floats = sorted(p for p, kind in plan.items() if kind is QuantType.FLOAT)
    if fmt is QuantFormat.COMPRESSED_TENSORS:
        return compressed_tensors.write(model, target, config, floats)
    (target / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return msmodelslim.write(model, target)


def write_report(path: Path, result: QuantizeResult, ranges: dict | None) -> None:
    layers = [
        {
            "layer": prefix,
            "type": kind,
            **({"min": ranges[prefix].minimum, "max": ranges[prefix].maximum} if ranges and prefix in ranges else {}),
        }
        for prefix, kind in result.layers.items()
    ]
    report = {
        "scheme": result.scheme.value,
        "format": result.format.value,
        "dtype": result.dtype,
        "source": str(result.source),
        "calibration": result.calibration,
        "layers": layers,
    }
    write_result(path, report, provenance(model_dir=result.source, device="cpu"), QUANTIZATION_KIND)
