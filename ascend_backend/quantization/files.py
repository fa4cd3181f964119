"""The safetensors files of a checkpoint directory, read and written one way for every format.

A Hugging Face directory holds either `model.safetensors.index.json` (sharded: the index names the
files) or one or more `*.safetensors`; msmodelslim names its file `quant_model_weight_w8a8.safetensors`.
The executor's loader and both quantized readers go through here, and read config.json's few keys
that decide how the weights are read (`read_config`, `ties_word_embeddings`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ascend_backend.quantization.scheme import QuantizedCheckpointError


@dataclass(frozen=True)
class CheckpointTensors:
    """Every tensor of a directory, with the file each came from (for error messages)."""

    tensors: dict[str, torch.Tensor]
    files: dict[str, str]  # tensor name -> file name


def safetensors_files(path: Path) -> list[Path]:
    """The weight files of `path`: the index's files when there is one, else every *.safetensors."""
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError, TypeError) as exc:
            raise QuantizedCheckpointError(
                f"{index} is not a safetensors index ({exc}); re-save the checkpoint"
            ) from None
        return [path / name for name in names]
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise QuantizedCheckpointError(f"no *.safetensors in {path}: point at a Hugging Face checkpoint directory")
    return files


def iter_tensors(path: Path) -> Iterator[tuple[str, torch.Tensor, str]]:
    """(name, tensor as stored on the CPU, file name) for every tensor, one at a time (a caller that
    converts as it goes never holds two copies of a large model)."""
    for file in safetensors_files(path):
        if not file.is_file():
            raise QuantizedCheckpointError(f"{file} is listed in the index but missing; copy the whole checkpoint")
        with safe_open(str(file), framework="pt", device="cpu") as handle:
            for name in handle.keys():
                yield name, handle.get_tensor(name), file.name


def read_tensors(path: Path) -> CheckpointTensors:
    """All tensors of the directory on the CPU, as stored (no dtype change)."""
    tensors: dict[str, torch.Tensor] = {}
    files: dict[str, str] = {}
    for name, tensor, file_name in iter_tensors(path):
        if name in tensors:
            raise QuantizedCheckpointError(f"{name} is stored twice ({files[name]} and {file_name})")
        tensors[name] = tensor
        files[name] = file_name
    return CheckpointTensors(tensors, files)


def write_tensors(tensors: Mapping[str, torch.Tensor], file: Path, metadata: Mapping[str, str] | None = None) -> Path:
    """Save contiguous, unshared copies (safetensors refuses views and tied storage)."""
    save_file({k: v.detach().contiguous().clone() for k, v in tensors.items()}, str(file), dict(metadata or {}))
    return file


def read_config(path: Path) -> dict[str, Any] | None:
    """`path/config.json` as a dict; None when it is absent or not a JSON object (the caller decides
    whether that is an error: a quantized reader can still check description against weights)."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def ties_word_embeddings(config: Mapping[str, Any] | None) -> bool:
    """Whether the model's lm_head reuses `model.embed_tokens.weight`.

    False when the key is absent, the rule `ascend_backend.models.config.ModelConfig` loads by, so a
    quantized reader and the executor never disagree about whether a missing `lm_head.weight` is tied.
    """
    return bool((config or {}).get("tie_word_embeddings", False))
