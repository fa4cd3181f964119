"""Load a Hugging Face safetensors checkpoint into the executor's CausalLM."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open

from ascend_backend.models.config import ModelConfig
from ascend_backend.models.layers import CausalLM


class CheckpointError(ValueError):
    """The directory's weights are missing, incomplete or do not fit the config."""


def _weight_files(path: Path) -> list[Path]:
    index = path / "model.safetensors.index.json"
    if index.is_file():
        names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [path / name for name in names]
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"no *.safetensors in {path}: the executor loads Hugging Face safetensors checkpoints")
    return files


def load_model(path: str | Path, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> CausalLM:
    """Build CausalLM from `path/config.json` and fill it from its safetensors, cast to `dtype` on `device`."""
    path = Path(path)
    config = ModelConfig.from_dir(path)
    with torch.device("meta"):
        model = CausalLM(config)
    params = dict(model.named_parameters(remove_duplicate=False))
    loaded: dict[str, torch.Tensor] = {}
    for file in _weight_files(path):
        with safe_open(str(file), framework="pt", device="cpu") as handle:
            for name in handle.keys():
                if name not in params:
                    if "rotary_emb.inv_freq" in name:  # old checkpoints store derived buffers
                        continue
                    raise CheckpointError(f"{file.name}: unexpected tensor {name!r} for a {config.architecture} model")
                tensor = handle.get_tensor(name)
                if tuple(tensor.shape) != tuple(params[name].shape):
                    raise CheckpointError(
                        f"{file.name}: {name} has shape {tuple(tensor.shape)}, config expects {tuple(params[name].shape)}"
                    )
                loaded[name] = tensor.to(device=device, dtype=dtype)
    if config.tie_word_embeddings:
        loaded.setdefault("lm_head.weight", loaded.get("model.embed_tokens.weight"))
    missing = sorted(set(params) - {k for k, v in loaded.items() if v is not None})
    if missing:
        raise CheckpointError(f"{path}: checkpoint lacks {len(missing)} tensors, e.g. {missing[:3]}")
    model.load_state_dict(loaded, strict=False, assign=True)
    if config.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    return model.eval()
