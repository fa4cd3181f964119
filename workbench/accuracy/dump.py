"""Capture per-module outputs of any `nn.Module` into a portable dump, and open dumps for comparison.

`capture_dump(model, inputs, out_dir)` runs one forward pass under `torch.no_grad()` with a forward hook
on every module whose name matches one of the fnmatch patterns (the root module is named "<root>"), and
writes each output tensor as it is produced (see `dump_format` for the layout). Alongside each output
it records whether any tensor *input* of that call held NaN/Inf, so a compare can name the NaN origin:
the first module whose output is non-finite while its inputs were finite.

Execution order is completion order: a forward hook fires when a module returns, so inner modules come
before the block that contains them, and the first non-finite record is the innermost culprit.

`open_dump(path)` opens a workbench dump (manifest.json), the rank dumps of a tensor-parallel engine
(rank<R>/manifest.json, gathered into one: `dump_gather`) or an msprobe dump (dump.json).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from workbench.accuracy.dump_format import (
    MANIFEST_FILE,
    DumpHeader,
    DumpMode,
    WorkbenchDump,
    any_nonfinite,
    open_writer,
    stack_versions,
    tensors_in,
)
from workbench.accuracy.dump_gather import GatheredDump, rank_directories
from workbench.accuracy.msprobe_dump import MsprobeDump, find_dump_json
from workbench.errors import WorkbenchError

ROOT_MODULE_NAME = "<root>"


@dataclass(frozen=True)
class CaptureSummary:
    """What a capture wrote: the directory, the number of tensors, and the modules hooked."""

    directory: Path
    record_count: int
    hooked_modules: tuple[str, ...]
    mode: DumpMode


def select_modules(model: nn.Module, patterns: Sequence[str]) -> list[tuple[str, nn.Module]]:
    """(name, module) pairs whose name matches any fnmatch pattern; the root is named "<root>"."""
    chosen = []
    for name, module in model.named_modules():
        display = name or ROOT_MODULE_NAME
        if any(fnmatch.fnmatchcase(display, p) for p in patterns):
            chosen.append((display, module))
    if not chosen:
        sample = ", ".join(n or ROOT_MODULE_NAME for n, _ in list(model.named_modules())[:8])
        raise WorkbenchError(
            f"--modules {list(patterns)} matches no module of {type(model).__name__}; names look like: {sample}"
        )
    return chosen


def _model_device(model: nn.Module) -> str:
    for tensor in model.parameters():
        return str(tensor.device)
    return "cpu"


def capture_dump(
    model: nn.Module,
    inputs: Mapping[str, torch.Tensor] | Sequence[torch.Tensor] | torch.Tensor,
    out_dir: str | os.PathLike,
    *,
    stats_only: bool = False,
    module_patterns: Sequence[str] = ("*",),
    prompt_token_ids: Sequence[int] | None = None,
    prompt: str | None = None,
    model_description: str = "",
    forward: Callable[[nn.Module, object], object] | None = None,
) -> CaptureSummary:
    """Run `model` once on `inputs` and write the outputs of the selected modules to `out_dir`.

    `inputs` is passed as `model(**inputs)` for a mapping, `model(*inputs)` for a sequence, else
    `model(inputs)`; pass `forward(model, inputs)` to drive anything else (an executor). The capture
    refuses an existing non-empty `out_dir`, and a failed forward leaves a dump marked incomplete.
    """
    selected = select_modules(model, list(module_patterns))
    header = DumpHeader(
        mode=DumpMode.STATS if stats_only else DumpMode.TENSORS,
        prompt_token_ids=tuple(int(i) for i in prompt_token_ids) if prompt_token_ids is not None else None,
        prompt=prompt,
        model=model_description or type(model).__name__,
        device=_model_device(model),
        module_patterns=tuple(module_patterns),
        versions=stack_versions(),
    )
    writer = open_writer(out_dir, header)
    calls: dict[str, int] = {}

    def make_hook(name: str):
        def hook(module: nn.Module, args: tuple, kwargs: dict, output: object) -> None:
            call = calls.get(name, 0)
            calls[name] = call + 1
            inputs_bad = any_nonfinite(tensors_in(args) + tensors_in(kwargs))
            for index, tensor in enumerate(tensors_in(output)):
                writer.add(name, call, index, tensor, inputs_bad)

        return hook

    handles = [module.register_forward_hook(make_hook(name), with_kwargs=True) for name, module in selected]
    try:
        with torch.no_grad():
            if forward is not None:
                forward(model, inputs)
            elif isinstance(inputs, Mapping):
                model(**inputs)
            elif isinstance(inputs, list | tuple):
                model(*inputs)
            else:
                model(inputs)
    except BaseException:
        writer.abandon()
        raise
    finally:
        for handle in handles:
            handle.remove()
    writer.finish()
    return CaptureSummary(Path(out_dir), writer.count, tuple(n for n, _ in selected), header.mode)


def open_dump(path: str | os.PathLike) -> WorkbenchDump | MsprobeDump:
    """Open a workbench dump (manifest.json), a tensor-parallel engine's rank dumps (gathered) or an msprobe
    dump (dump.json somewhere below `path`)."""
    directory = Path(path)
    if not directory.is_dir():
        raise WorkbenchError(f"dump directory {directory} does not exist (or is not a directory)")
    if (directory / MANIFEST_FILE).is_file():
        return WorkbenchDump(directory)
    if rank_directories(directory):  # a tensor-parallel engine: one dump per rank, read as one
        return GatheredDump(directory)
    dump_json = find_dump_json(directory)
    if dump_json is not None:
        return MsprobeDump(directory, dump_json)
    raise WorkbenchError(
        f"{directory} is not a dump: it has no {MANIFEST_FILE} (workbench dump) and no dump.json (msprobe dump); "
        "create one with `ascend-workbench dump` or msprobe's PrecisionDebugger"
    )


def load_causal_lm(model_dir: str | os.PathLike, dtype: torch.dtype, device: str) -> nn.Module:
    """A Hugging Face causal LM from a checkpoint directory, in eval mode on `device`."""
    directory = Path(model_dir)
    if not (directory / "config.json").is_file():
        raise WorkbenchError(f"{directory} is not a Hugging Face model directory (no config.json); pass --model DIR")
    try:
        from transformers import AutoModelForCausalLM
    except ImportError as exc:
        raise WorkbenchError("transformers is not installed: pip install 'ascend-porting-workbench[models]'") from exc
    return AutoModelForCausalLM.from_pretrained(str(directory), dtype=dtype).to(device).eval()


def tokenize_prompt(model_dir: str | os.PathLike, prompt: str) -> list[int]:
    """Token ids of `prompt` with the checkpoint's own tokenizer."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    except (OSError, ValueError) as exc:
        raise WorkbenchError(
            f"{model_dir} has no usable tokenizer ({exc}); pass --token-ids instead of --prompt"
        ) from exc
    return list(tokenizer(prompt)["input_ids"])
