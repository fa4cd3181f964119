"""A quantized checkpoint as the checkpoint lint reads it, without loading a weight: the msmodelslim
description, config.json, the safetensors headers (8 bytes + a JSON header per file) and the values of the
scale tensors only (a few KB: NaN and all-zero scales are findings)."""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError

DESCRIPTION_FILE = "quant_model_description.json"


@dataclass(frozen=True)
class CheckpointFiles:
    root: Path
    description: dict[str, Any] | None
    description_error: str | None
    config: dict[str, Any] | None
    tensors: dict[str, tuple[str, tuple[int, ...], Path]]  # name -> (dtype, shape, file)

    @property
    def quantization_config(self) -> dict[str, Any] | None:
        quant = (self.config or {}).get("quantization_config")
        return quant if isinstance(quant, dict) else None


def safetensors_header(file: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """name -> (dtype, shape) from a safetensors file's header alone (8-byte length, then JSON)."""
    try:
        with file.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            if length > 100 * 1024 * 1024:
                raise ValueError(f"header length {length} is not plausible")
            header = json.loads(handle.read(length))
    except (OSError, ValueError, struct.error) as exc:
        raise WorkbenchError(f"{file}: not a readable safetensors file ({exc}); re-copy the checkpoint") from None
    return {k: (v["dtype"], tuple(v["shape"])) for k, v in header.items() if k != "__metadata__"}


def _json_file(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WorkbenchError(f"{path}: cannot read it ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        hint = " (a trailing comma before '}' or ']'?)" if re.search(r",\s*[}\]]", text) else ""
        return None, f"line {exc.lineno} column {exc.colno}: {exc.msg}{hint}"
    if not isinstance(data, dict):
        return None, "the file is JSON but not an object of name -> value"
    return data, None


def read_checkpoint(path: Path) -> CheckpointFiles:
    path = Path(path).expanduser()
    if path.is_file():
        root, description_file = path.parent, path
    elif path.is_dir():
        root, description_file = path, path / DESCRIPTION_FILE
    else:
        raise WorkbenchError(
            f"--checkpoint {path}: no such file or directory; give a checkpoint directory or its {DESCRIPTION_FILE}"
        )
    description, error = _json_file(description_file) if description_file.is_file() else (None, None)
    config = _json_file(root / "config.json")[0] if (root / "config.json").is_file() else None
    tensors: dict[str, tuple[str, tuple[int, ...], Path]] = {}
    if path.is_dir():
        for file in sorted(root.glob("*.safetensors")):
            for name, (dtype, shape) in safetensors_header(file).items():
                tensors[name] = (dtype, shape, file)
    return CheckpointFiles(root, description, error, config, tensors)


def bad_scales(ckpt: CheckpointFiles) -> list[tuple[str, str]]:
    """(tensor, what is wrong) for scale tensors holding NaN/Inf or only zeros (their values are read)."""
    from safetensors import safe_open

    found = []
    by_file: dict[Path, list[str]] = {}
    for name, (_, _, file) in ckpt.tensors.items():
        leaf = name.rsplit(".", 1)[-1]
        if leaf in (
            "weight_scale",
            "input_scale",
            "deq_scale",
            "kv_cache_scale",
            "weight_scale_second",
        ) or leaf.endswith("antiquant_scale"):
            by_file.setdefault(file, []).append(name)
    for file, names in by_file.items():
        with safe_open(str(file), framework="pt") as handle:
            for name in names:
                values = handle.get_tensor(name)
                values = values.float() if values.is_floating_point() else values.view(-1)
                if values.is_floating_point() and not bool(values.isfinite().all()):
                    found.append((name, f"{int((~values.isfinite()).sum())} of {values.numel()} values are NaN or Inf"))
                elif values.numel() and bool((values == 0).all()):
                    found.append((name, "every value is 0"))
    return found
