"""The compressed-tensors W8A8 int8 layout: what vLLM's CPU (and CUDA) backends serve with int8 scaled-mm.

`config.json` gains a `quantization_config` that vLLM 0.32 parses in
vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py:

    {"quant_method": "compressed-tensors", "format": "int-quantized", "quantization_status": "compressed",
     "config_groups": {"group_0": {"targets": ["Linear"],
         "weights":           {"num_bits": 8, "type": "int", "symmetric": true, "strategy": "channel",
                               "dynamic": false},
         "input_activations": {"num_bits": 8, "type": "int", "symmetric": true, "strategy": "tensor",
                               "dynamic": false}}},                       # static W8A8
     "ignore": ["lm_head", ...float linears]}

`_is_static_tensor_w8a8` accepts that group, `_is_dynamic_token_w8a8` the dynamic one
(`"strategy": "token", "dynamic": true, "symmetric": true`); both become `CompressedTensorsW8A8Int8`
(schemes/compressed_tensors_w8a8_int8.py), which creates per layer:

    weight             [out, in]  int8
    weight_scale       [out, 1]   float32   (ChannelQuantScaleParameter)
    input_scale        [1]        float32   static only
    input_zero_point   [1]        int8      static asymmetric only ("AZP loaded as int8")
    bias               [out]      model dtype, when the layer has one

Static inputs are written symmetric (no input_zero_point) whenever every static layer's offset is 0,
which is what the quantizer makes by default: vllm-ascend's compressed-tensors path refuses an
asymmetric static group (`_is_static_tensor_w8a8`, vllm_ascend/quantization/compressed_tensors_config.py,
v0.23.0:380-389; compressed_tensors/compressed_tensors.py, v0.13.0:244-256) and its kernel would drop
the zero point anyway (w8a8.py, v0.13.0: the float bias replaces quant_bias). A model that does carry
offsets (calibrated with `symmetric_inputs=False`, or read from msmodelslim) is written asymmetric,
with every static layer's input_zero_point: vLLM's CPU backend serves it, vllm-ascend does not. The
zero-point convention is msmodelslim's (`x_q = round(x / s) + z`), so one static calibration serves
both formats. A target `"Linear"` matches vLLM's QKVParallelLinear etc. by class name
(`find_matched_target` in compressed_tensors/utils.py); when layers of both schemes are present each
scheme gets its own group that lists its layers by name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from ascend_backend.quantization.files import read_config, read_tensors, ties_word_embeddings, write_tensors
from ascend_backend.quantization.scheme import QuantizedCheckpointError, QuantizedLinear, QuantizedModel, QuantType

QUANT_METHOD = "compressed-tensors"
FORMAT = "int-quantized"
WEIGHT_FILE = "model.safetensors"
_WEIGHTS = {
    "num_bits": 8,
    "type": "int",
    "symmetric": True,
    "strategy": "channel",
    "dynamic": False,
    "group_size": None,
}
_INPUTS = {
    QuantType.W8A8: {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "tensor", "dynamic": False},
    QuantType.W8A8_DYNAMIC: {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "token", "dynamic": True},
}


def static_inputs_symmetric(model: QuantizedModel) -> bool:
    """Whether every static layer's input zero point is 0 (then the config says symmetric, no zero points)."""
    return all(layer.input_offset == 0 for layer in model.linears.values() if layer.quant_type is QuantType.W8A8)


def _input_args(model: QuantizedModel, kind: QuantType) -> dict[str, Any]:
    args = dict(_INPUTS[kind])
    if kind is QuantType.W8A8:
        args["symmetric"] = static_inputs_symmetric(model)
    return args


def quantization_config(model: QuantizedModel, float_linears: list[str]) -> dict[str, Any]:
    """The config.json `quantization_config` for `model`; `float_linears` are linears left in float."""
    kinds = sorted({layer.quant_type for layer in model.linears.values()}, key=lambda k: k.value)
    if len(kinds) == 1:
        groups = {
            "group_0": {
                "targets": ["Linear"],
                "weights": dict(_WEIGHTS),
                "input_activations": _input_args(model, kinds[0]),
            }
        }
    else:
        groups = {
            f"group_{i}": {
                "targets": sorted(p for p, layer in model.linears.items() if layer.quant_type is kind),
                "weights": dict(_WEIGHTS),
                "input_activations": _input_args(model, kind),
            }
            for i, kind in enumerate(kinds)
        }
    return {
        "quant_method": QUANT_METHOD,
        "format": FORMAT,
        "quantization_status": "compressed",
        "config_groups": groups,
        "ignore": ["lm_head", *sorted(float_linears)],
        "kv_cache_scheme": None,
    }


def to_tensors(model: QuantizedModel) -> dict[str, torch.Tensor]:
    # vLLM creates input_zero_point only for an asymmetric group, and a tensor with no parameter to load
    # into is an error there (AutoWeightsLoader, vllm/model_executor/models/utils.py, vLLM 0.32): zero
    # points are written exactly when the config says asymmetric.
    zero_points = not static_inputs_symmetric(model)
    tensors = dict(model.floats)
    for prefix, layer in model.linears.items():
        tensors[f"{prefix}.weight"] = layer.weight
        tensors[f"{prefix}.weight_scale"] = layer.weight_scale.float()[:, None]
        if layer.bias is not None:
            tensors[f"{prefix}.bias"] = layer.bias.to(model.dtype)
        if layer.quant_type is QuantType.W8A8:
            assert layer.input_scale is not None and layer.input_offset is not None
            tensors[f"{prefix}.input_scale"] = layer.input_scale.float().reshape(1)
            if zero_points:
                tensors[f"{prefix}.input_zero_point"] = torch.tensor([layer.input_offset], dtype=torch.int8)
    return tensors


def write(
    model: QuantizedModel, out_dir: str | Path, config: Mapping[str, Any], float_linears: list[str]
) -> list[Path]:
    """Write model.safetensors and config.json (`config` plus the quantization_config) into `out_dir`."""
    out_dir = Path(out_dir)
    weights = write_tensors(to_tensors(model), out_dir / WEIGHT_FILE, {"format": "pt"})
    full = {**config, "quantization_config": quantization_config(model, float_linears)}
    config_path = out_dir / "config.json"
    config_path.write_text(json.dumps(full, indent=2) + "\n", encoding="utf-8")
    return [weights, config_path]


def config_of(path: Path) -> dict[str, Any] | None:
    """config.json's quantization_config when it is compressed-tensors, else None."""
    quant = (read_config(path) or {}).get("quantization_config")
    return quant if isinstance(quant, dict) and quant.get("quant_method") == QUANT_METHOD else None


def is_compressed_tensors(path: str | Path) -> bool:
    return config_of(Path(path)) is not None


def read(path: str | Path) -> QuantizedModel:
    """Read a compressed-tensors W8A8 int8 directory (what `write` makes, or an llm-compressor export of it)."""
    path = Path(path)
    config = config_of(path)
    if config is None:
        raise QuantizedCheckpointError(f"{path / 'config.json'} has no compressed-tensors quantization_config")
    dynamic_groups = _check_groups(path, config)
    stored = read_tensors(path).tensors
    prefixes = [n[: -len(".weight_scale")] for n in stored if n.endswith(".weight_scale")]
    try:
        linears = {p: _layer(path, p, stored, dynamic_groups) for p in prefixes}
    except QuantizedCheckpointError:
        raise
    except ValueError as exc:  # QuantizedLinear's own shape and dtype checks
        raise QuantizedCheckpointError(f"{path}: {exc}; re-export the checkpoint") from None
    owned = {
        f"{p}.{leaf}"
        for p in prefixes
        for leaf in ("weight", "weight_scale", "bias", "input_scale", "input_zero_point")
    }
    floats = {n: t for n, t in stored.items() if n not in owned}
    dtype = next((t.dtype for t in floats.values() if t.is_floating_point()), torch.bfloat16)
    return QuantizedModel(linears, floats, dtype, ties_word_embeddings(read_config(path)))


def _check_groups(path: Path, config: dict[str, Any]) -> set[bool]:
    """The `dynamic` flags of the config's input activations; anything but W8A8 int8 is refused."""
    flags: set[bool] = set()
    for name, group in (config.get("config_groups") or {}).items():
        weights, inputs = group.get("weights") or {}, group.get("input_activations") or {}
        ok = (
            weights.get("num_bits") == 8
            and weights.get("type") == "int"
            and weights.get("symmetric")
            and weights.get("strategy") in ("channel", "tensor")
            and inputs.get("num_bits") == 8
            and inputs.get("type") == "int"
            and (not inputs.get("dynamic") or inputs.get("symmetric"))
        )
        if not ok:
            raise QuantizedCheckpointError(
                f"{path / 'config.json'}: config_groups.{name} is not W8A8 int8 (symmetric int8 weights, int8 "
                "inputs, dynamic inputs symmetric); this reader takes what `ascend-workbench quantize` writes"
            )
        flags.add(bool(inputs.get("dynamic")))
    if not flags:
        raise QuantizedCheckpointError(f"{path / 'config.json'}: quantization_config has no config_groups")
    return flags


def _layer(path: Path, prefix: str, stored: dict[str, torch.Tensor], dynamic_groups: set[bool]) -> QuantizedLinear:
    weight = stored.get(f"{prefix}.weight")
    if weight is None or weight.dtype != torch.int8:
        raise QuantizedCheckpointError(
            f"{path}: {prefix}.weight_scale is stored but {prefix}.weight is "
            f"{'missing' if weight is None else weight.dtype}, not int8; re-export the checkpoint"
        )
    scale = stored[f"{prefix}.weight_scale"].float().flatten()  # [out] per channel, [1] per tensor
    if scale.numel() == 1:
        scale = scale.expand(weight.shape[0]).clone()
    bias = stored.get(f"{prefix}.bias")
    bias = None if bias is None else bias.float()
    static = f"{prefix}.input_scale" in stored
    if (static and False not in dynamic_groups) or (not static and True not in dynamic_groups):
        raise QuantizedCheckpointError(
            f"{path}: {prefix} {'has' if static else 'lacks'} input_scale but config.json's quantization_config "
            f"says its inputs are {'dynamic' if static else 'static'}; re-export the checkpoint"
        )
    if not static:
        return QuantizedLinear(QuantType.W8A8_DYNAMIC, weight, scale, bias)
    zero_point = stored.get(f"{prefix}.input_zero_point")
    offset = 0 if zero_point is None else int(zero_point.flatten()[0])
    return QuantizedLinear(
        QuantType.W8A8, weight, scale, bias, stored[f"{prefix}.input_scale"].float().reshape(()), offset
    )
