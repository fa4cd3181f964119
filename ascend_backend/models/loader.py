"""Load a Hugging Face safetensors checkpoint into the executor's CausalLM: float, or W8A8 in either format.

A quantized checkpoint (msmodelslim's `quant_model_description.json`, or a compressed-tensors
`quantization_config` in config.json) is read and checked by `ascend_backend.quantization`; its
quantized layers become `StaticW8A8Linear` / `DynamicW8A8Linear` modules under the float layer's name,
and every other tensor (embeddings, norms, layers kept FLOAT) loads as in a float checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch

from ascend_backend.models.config import ModelConfig
from ascend_backend.models.layers import CausalLM
from ascend_backend.models.quantized import quantized_module
from ascend_backend.quantization import QuantizedCheckpointError, checkpoint_format, read_checkpoint
from ascend_backend.quantization.files import iter_tensors


class CheckpointError(ValueError):
    """The directory's weights are missing, incomplete or do not fit the config."""


def load_model(path: str | Path, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> CausalLM:
    """Build CausalLM from `path/config.json` and fill it from its safetensors, cast to `dtype` on `device`."""
    path = Path(path)
    config = ModelConfig.from_dir(path)
    with torch.device("meta"):
        model = CausalLM(config)
    try:
        if checkpoint_format(path) is None:
            floats: Iterable[tuple[str, torch.Tensor, str]] = iter_tensors(path)
        else:
            quantized = read_checkpoint(path)
            for prefix, layer in quantized.linears.items():
                _replace(model, prefix, quantized_module(layer, dtype, device))
            floats = ((name, tensor, path.name) for name, tensor in quantized.floats.items())
        _load_floats(model, floats, path, device, dtype)
    except QuantizedCheckpointError as exc:
        raise CheckpointError(str(exc)) from None
    return model.eval()


def _replace(model: CausalLM, prefix: str, module: torch.nn.Module) -> None:
    parent, _, leaf = prefix.rpartition(".")
    try:
        owner = model.get_submodule(parent)
        getattr(owner, leaf)
    except AttributeError:
        raise CheckpointError(
            f"quantized layer {prefix} is not a module of a {model.config.architecture} model"
        ) from None
    setattr(owner, leaf, module)


def _load_floats(
    model: CausalLM,
    tensors: Iterable[tuple[str, torch.Tensor, str]],
    path: Path,
    device: torch.device | str,
    dtype: torch.dtype,
) -> None:
    """Fill every float parameter from (name, tensor, file) items, cast to `dtype` on `device` one by one."""
    config = model.config
    params = dict(model.named_parameters(remove_duplicate=False))
    loaded: dict[str, torch.Tensor] = {}
    for name, tensor, where in tensors:
        if name not in params:
            if "rotary_emb.inv_freq" in name:  # old checkpoints store derived buffers
                continue
            raise CheckpointError(f"{where}: unexpected tensor {name!r} for a {config.architecture} model")
        if tuple(tensor.shape) != tuple(params[name].shape):
            raise CheckpointError(
                f"{where}: {name} has shape {tuple(tensor.shape)}, config expects {tuple(params[name].shape)}"
            )
        loaded[name] = tensor.to(device=device, dtype=dtype)
    if config.tie_word_embeddings and "lm_head.weight" in params:
        loaded.setdefault("lm_head.weight", loaded.get("model.embed_tokens.weight"))
    missing = sorted(set(params) - {k for k, v in loaded.items() if v is not None})
    if missing:
        raise CheckpointError(f"{path}: checkpoint lacks {len(missing)} tensors, e.g. {missing[:3]}")
    model.load_state_dict(loaded, strict=False, assign=True)
    if config.tie_word_embeddings and isinstance(model.lm_head.weight, torch.nn.Parameter):
        model.lm_head.weight = model.model.embed_tokens.weight
