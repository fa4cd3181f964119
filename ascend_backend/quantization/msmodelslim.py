"""msmodelslim's W8A8 checkpoint layout: what vllm-ascend's `ascend` quantization method loads.

A directory holds the model's config and tokenizer files, `quant_model_weight_w8a8.safetensors` (or
`..._w8a8_dynamic`) and `quant_model_description.json`, which maps EVERY tensor name to `W8A8`,
`W8A8_DYNAMIC` or `FLOAT` (all tensors of one linear share its type) plus `model_quant_type` and
`version`. vllm-ascend reads the `<layer>.weight` entry to pick a layer's scheme
(`get_linear_quant_type`, vllm_ascend/quantization/modelslim_config.py, v0.23.0) and creates these
parameters for it (w8a8_static.py / w8a8_dynamic.py `get_weight`, `get_pertensor_param`,
`get_perchannel_param`, v0.23.0; identical in vllm_ascend/quantization/w8a8.py, v0.9.1):

    tensor          W8A8 (static)                   W8A8_DYNAMIC       dtype
    weight          [out, in]                       [out, in]          int8
    weight_scale    [out, 1]                        [out, 1]           model dtype
    weight_offset   [out, 1] (zeros: symmetric)     [out, 1]           model dtype
    input_scale     [1]                             -                  model dtype
    input_offset    [1]                             -                  int8
    quant_bias      [out]                           -                  int32
    deq_scale       [out]                           -                  float32 (bf16 models) / int64 (fp16)
    bias            [out] when the layer has one    same               model dtype

A model that ties its embeddings stores no `lm_head.weight`, yet its description says
`"lm_head.weight": "FLOAT"`: vllm-ascend looks that key up for the head vLLM builds anyway (TIED_HEAD).

For fp16 models deq_scale holds each float32 scale's bit pattern in an int64 (`arithmetic.pack_deq_scale`).
Static layers compute `(x_q @ w_q + quant_bias) * deq_scale`, so the float bias is folded into
quant_bias; `bias` is still written because vLLM's linear layer owns a bias parameter that must load.

This writer makes the table above. The reader also takes msmodelslim v1 output, which vllm-ascend
loads too: object values (`"metadata": {}`, `"optional": {}`) and an int `group_size` among the
description's keys (`tensor_entries`), static layers without weight_scale / weight_offset (neither is
read by the static kernel; weight_scale is recovered from deq_scale), a float32 input_offset holding an
integer, float32 scales and biases (REQUIRED_TENSORS).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import torch

from ascend_backend.quantization.arithmetic import pack_deq_scale, unpack_deq_scale
from ascend_backend.quantization.files import (
    CheckpointTensors,
    read_config,
    read_tensors,
    ties_word_embeddings,
    write_tensors,
)
from ascend_backend.quantization.scheme import QuantizedCheckpointError, QuantizedLinear, QuantizedModel, QuantType

DESCRIPTION_FILE = "quant_model_description.json"
FORMAT_VERSION = "1.0.0"
# Top-level keys of the description that describe the model, not a tensor (msmodelslim and vllm-ascend).
# msmodelslim v1 adds two objects, `metadata` (QuaRot's settings) and `optional` (paths of extra files)
# (AscendV1Saver.post_run, msmodelslim/core/quant_service/modelslim_v1/save/ascendv1.py, Ascend/msmodelslim
# @3de0a3c4e9); `tensor_entries` also leaves out any other key whose value is not a string.
METADATA_KEYS = frozenset(
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
# Every tensor a static layer may own, and what each scheme must store: the tensors vllm-ascend's kernels
# compute with. A static layer runs on input_scale, input_offset, deq_scale and quant_bias; its
# weight_scale / weight_offset parameters are created but only flattened, never read (w8a8_static.py
# `apply` / `process_weights_after_loading`, vllm_ascend/quantization/methods, v0.23.0), and msmodelslim
# v1 does not write them (`on_w8a8_static`, ascendv1.py @3de0a3c4e9). A dynamic layer multiplies by
# weight_scale; its weight_offset is only flattened (w8a8_dynamic.py, v0.23.0).
STATIC_TENSORS = ("weight", "weight_scale", "weight_offset", "input_scale", "input_offset", "quant_bias", "deq_scale")
REQUIRED_TENSORS = {
    QuantType.W8A8: ("weight", "input_scale", "input_offset", "quant_bias", "deq_scale"),
    QuantType.W8A8_DYNAMIC: ("weight", "weight_scale"),
}
# The description entry of a tied model's output projection, written with no tensor behind it. vLLM
# builds `lm_head` with the quantization config even when it ties it to the embedding (ParallelLMHead,
# then `tie_weights`: vllm/model_executor/models/llama.py and qwen2.py, vLLM 0.32), and vllm-ascend asks
# the description about it: `quant_description[prefix + ".weight"]` in `get_linear_quant_type`
# (vllm_ascend/quantization/modelslim_config.py, v0.18.0:292, reached from the VocabParallelEmbedding
# branch at :506 -- the KeyError of vllm-ascend issue #8367) or in `is_layer_skipped_ascend`
# (vllm_ascend/quantization/quant_config.py, v0.9.1:142, v0.13.0:196). Only v0.23.0 checks
# `_has_quant_weight` first (modelslim_config.py, v0.23.0:666); main and v0.25.1rc1 index directly
# again. "FLOAT" makes `is_layer_skipped_ascend` true, so the head gets vLLM's unquantized method and
# keeps the embedding's weight: no tensor is needed, and none is written.
TIED_HEAD = "lm_head.weight"


def weight_file_name(model: QuantizedModel) -> str:
    """msmodelslim's file name: quant_model_weight_w8a8.safetensors, or ..._w8a8_dynamic when all are dynamic."""
    return f"quant_model_weight_{model_quant_type(model).value.lower()}.safetensors"


def model_quant_type(model: QuantizedModel) -> QuantType:
    """The description's `model_quant_type`: the scheme most layers use (W8A8 when tied or none)."""
    counts = Counter(layer.quant_type for layer in model.linears.values())
    return QuantType.W8A8_DYNAMIC if counts[QuantType.W8A8_DYNAMIC] > counts[QuantType.W8A8] else QuantType.W8A8


def to_tensors(model: QuantizedModel) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The checkpoint's tensors and its description (tensor name -> type, plus the metadata keys)."""
    if model.dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(
            f"msmodelslim checkpoints hold bf16 or fp16 models (deq_scale is float32 for bf16, int64 for fp16); "
            f"this model is {model.dtype}: quantize with dtype bfloat16 or float16"
        )
    tensors = dict(model.floats)
    description: dict[str, str] = {"model_quant_type": model_quant_type(model).value, "version": FORMAT_VERSION}
    description.update({name: QuantType.FLOAT.value for name in model.floats})
    for prefix, layer in model.linears.items():
        for leaf, tensor in _layer_tensors(layer, model.dtype).items():
            tensors[f"{prefix}.{leaf}"] = tensor
            description[f"{prefix}.{leaf}"] = layer.quant_type.value
    if model.tied_embeddings and TIED_HEAD not in description:
        description[TIED_HEAD] = QuantType.FLOAT.value
    return tensors, description


def _layer_tensors(layer: QuantizedLinear, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {
        "weight": layer.weight,
        "weight_scale": layer.weight_scale.to(dtype)[:, None],
        "weight_offset": torch.zeros(layer.out_features, 1, dtype=dtype),
    }
    if layer.bias is not None:
        out["bias"] = layer.bias.to(dtype)
    if layer.quant_type is QuantType.W8A8:
        assert layer.input_scale is not None and layer.input_offset is not None
        deq = layer.static_deq_scale().float()
        out["input_scale"] = layer.input_scale.reshape(1).to(dtype)
        out["input_offset"] = torch.tensor([layer.input_offset], dtype=torch.int8)
        out["quant_bias"] = layer.static_quant_bias().to(torch.int32)
        out["deq_scale"] = deq if dtype == torch.bfloat16 else pack_deq_scale(deq)
    return out


def write(model: QuantizedModel, out_dir: str | Path) -> list[Path]:
    """Write the weights file and quant_model_description.json into `out_dir` (config/tokenizer are the caller's)."""
    out_dir = Path(out_dir)
    tensors, description = to_tensors(model)
    weights = write_tensors(tensors, out_dir / weight_file_name(model), {"format": "pt"})
    desc_path = out_dir / DESCRIPTION_FILE
    desc_path.write_text(json.dumps(description, indent=2) + "\n", encoding="utf-8")
    return [weights, desc_path]


def is_msmodelslim(path: str | Path) -> bool:
    return (Path(path) / DESCRIPTION_FILE).is_file()


def read_description(path: Path) -> dict[str, object]:
    desc_path = path / DESCRIPTION_FILE
    try:
        description = json.loads(desc_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise QuantizedCheckpointError(f"{desc_path} not found: not an msmodelslim checkpoint") from None
    except ValueError as exc:
        raise QuantizedCheckpointError(f"{desc_path} is not valid JSON ({exc}); re-export the checkpoint") from None
    if not isinstance(description, dict):
        raise QuantizedCheckpointError(f"{desc_path} must be a JSON object of tensor name -> quant type")
    return description


def tensor_entries(description: dict[str, object]) -> dict[str, str]:
    """Tensor name -> quant type: the description without the keys that describe the whole model.

    Those are METADATA_KEYS and any key whose value is not a string. vllm-ascend json-loads the file
    and only looks up `<prefix>.weight` and a few named keys (modelslim_config.py, v0.23.0: json.load
    at :797, `get_linear_quant_type` at :381, `is_layer_skipped_ascend` comparing values with "FLOAT"
    at :703), so an object or number under any other name is never read as a type. One under a stored
    tensor's name is an error `read` reports.
    """
    return {k: v for k, v in description.items() if k not in METADATA_KEYS and isinstance(v, str)}


def read(path: str | Path) -> QuantizedModel:
    """Read an msmodelslim directory back into a QuantizedModel, checking description against tensors.

    Any disagreement (a tensor without an entry or an entry without a tensor, a W8A8 layer missing one
    of its tensors, a wrong dtype or shape, an unsupported scheme) raises one QuantizedCheckpointError
    naming the first problem, the number of others, and the fix.
    """
    path = Path(path)
    description = read_description(path)
    stored = read_tensors(path)
    tied = ties_word_embeddings(read_config(path))
    problems = _disagreements(description, stored, tied)
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise QuantizedCheckpointError(
            f"{path / DESCRIPTION_FILE} disagrees with the weights: {problems[0]}{more}; the description and the "
            "safetensors must come from the same export — re-export the checkpoint"
        )
    return _assemble(description, stored, tied)


def _layer_prefixes(description: dict[str, object]) -> dict[str, QuantType]:
    """Quantized layers: the prefixes whose `.weight` entry is W8A8 or W8A8_DYNAMIC."""
    return {
        name[: -len(".weight")]: QuantType(kind)
        for name, kind in description.items()
        if name.endswith(".weight") and kind in (QuantType.W8A8.value, QuantType.W8A8_DYNAMIC.value)
    }


def _disagreements(description: dict[str, object], stored: CheckpointTensors, tied: bool) -> list[str]:
    # a stored tensor's entry is its type even when it is not a string (then it is reported, not skipped)
    entries = {**tensor_entries(description), **{k: v for k, v in description.items() if k in stored.tensors}}
    known = {t.value for t in QuantType}
    problems = [
        f"{name} has type {kind!r}; this reader knows W8A8, W8A8_DYNAMIC and FLOAT"
        for name, kind in entries.items()
        if not isinstance(kind, str) or kind not in known
    ]
    problems += [f"{name} (in {stored.files[name]}) has no entry" for name in stored.tensors if name not in entries]
    problems += [
        f"{name} is described as {kind} but no weights file holds it{_untied_head_hint(name, kind)}"
        for name, kind in entries.items()
        if name not in stored.tensors and not (tied and name == TIED_HEAD and kind == QuantType.FLOAT.value)
    ]
    layers = _layer_prefixes(entries)
    for name, kind in entries.items():
        prefix, _, leaf = name.rpartition(".")
        if kind in (QuantType.W8A8.value, QuantType.W8A8_DYNAMIC.value) and layers.get(prefix) != QuantType(kind):
            problems.append(f"{name} is {kind} but {prefix}.weight is {entries.get(prefix + '.weight', 'absent')}")
        if kind == QuantType.FLOAT.value and name in stored.tensors and not stored.tensors[name].is_floating_point():
            problems.append(f"{name} is FLOAT but stored as {stored.tensors[name].dtype}")
    for prefix, kind in layers.items():
        problems += _layer_problems(prefix, kind, stored.tensors)
    return problems


def _untied_head_hint(name: str, kind: object) -> str:
    if name != TIED_HEAD or kind != QuantType.FLOAT.value:
        return ""
    return " (a model whose lm_head reuses the embedding needs tie_word_embeddings: true in config.json)"


def _layer_problems(prefix: str, kind: QuantType, tensors: dict[str, torch.Tensor]) -> list[str]:
    missing = [leaf for leaf in REQUIRED_TENSORS[kind] if f"{prefix}.{leaf}" not in tensors]
    if missing:
        return [f"{prefix} is {kind.value} but lacks {', '.join(f'{prefix}.{m}' for m in missing)}"]
    extra = [
        leaf for leaf in ("input_scale", "input_offset", "quant_bias", "deq_scale") if f"{prefix}.{leaf}" in tensors
    ]
    if kind is QuantType.W8A8_DYNAMIC and extra:
        return [f"{prefix} is W8A8_DYNAMIC but holds static tensors {extra} (was it exported as W8A8?)"]
    t = {leaf: tensors[f"{prefix}.{leaf}"] for leaf in STATIC_TENSORS if f"{prefix}.{leaf}" in tensors}
    weight = t["weight"]
    if weight.dtype != torch.int8 or weight.dim() != 2:
        return [
            f"{prefix}.weight is {kind.value} but stored as {weight.dtype} {tuple(weight.shape)}, not int8 [out, in]"
        ]
    out = weight.shape[0]
    expected = {
        "weight_scale": (out, 1),
        "weight_offset": (out, 1),
        "input_scale": (1,),
        "input_offset": (1,),
        "quant_bias": (out,),
        "deq_scale": (out,),
    }
    problems = [
        f"{prefix}.{leaf} has shape {tuple(t[leaf].shape)}, expected {shape}"
        for leaf, shape in expected.items()
        if leaf in t and tuple(t[leaf].shape) != shape
    ]
    # input_offset: int8 (v0, and ours) or a float holding an integer (msmodelslim v1 writes float32;
    # vllm-ascend copies it into its int8 parameter, get_pertensor_param in w8a8_static.py, v0.23.0)
    floats = (torch.float32, torch.float16, torch.bfloat16)
    dtypes = {
        "input_offset": (torch.int8, *floats),
        "quant_bias": (torch.int32,),
        "deq_scale": (torch.float32, torch.int64),
    }
    problems += [
        f"{prefix}.{leaf} is {t[leaf].dtype}, expected {' or '.join(map(str, allowed))}"
        for leaf, allowed in dtypes.items()
        if leaf in t and t[leaf].dtype not in allowed
    ]
    if not problems and "input_offset" in t:
        problems += _offset_problems(f"{prefix}.input_offset", t["input_offset"])
    if not problems and "weight_offset" in t and bool((t["weight_offset"] != 0).any()):
        problems.append(f"{prefix}.weight_offset is not zero: asymmetric weights are not W8A8 as vllm-ascend runs it")
    return problems


def _offset_problems(name: str, offset: torch.Tensor) -> list[str]:
    """A float input_offset must be an integer in int8: the copy into vllm-ascend's int8 parameter would
    truncate a fraction and wrap a value outside [-128, 127] without a word."""
    if not offset.is_floating_point():
        return []
    value = float(offset.flatten()[0])
    if value.is_integer() and -128 <= value <= 127:
        return []
    return [f"{name} holds {value}, not an int8 integer (vllm-ascend would silently truncate it)"]


def _assemble(description: dict[str, object], stored: CheckpointTensors, tied: bool) -> QuantizedModel:
    layers = _layer_prefixes(tensor_entries(description))
    owned = {f"{p}.{leaf}" for p in layers for leaf in (*STATIC_TENSORS, "bias")}
    floats = {name: t for name, t in stored.tensors.items() if name not in owned}
    dtype = next((t.dtype for t in floats.values() if t.is_floating_point()), torch.bfloat16)
    linears = {prefix: _layer(prefix, kind, stored.tensors) for prefix, kind in layers.items()}
    return QuantizedModel(linears, floats, dtype, tied)


def _layer(prefix: str, kind: QuantType, tensors: dict[str, torch.Tensor]) -> QuantizedLinear:
    def get(leaf: str) -> torch.Tensor:
        return tensors[f"{prefix}.{leaf}"]

    bias = tensors.get(f"{prefix}.bias")
    bias = None if bias is None else bias.float()
    if kind is QuantType.W8A8_DYNAMIC:
        return QuantizedLinear(kind, get("weight"), get("weight_scale").float().flatten(), bias)
    stored_deq = get("deq_scale")
    deq = unpack_deq_scale(stored_deq) if stored_deq.dtype == torch.int64 else stored_deq.float()  # [out]
    input_scale = get("input_scale").float().reshape(())
    stored_scale = tensors.get(f"{prefix}.weight_scale")
    # msmodelslim v1 stores no weight_scale for a static layer; the format-neutral form needs one (to
    # dequantize the weight, to write compressed-tensors), and deq_scale = input_scale * weight_scale
    # gives it back. The layer still computes with the stored deq_scale and quant_bias.
    weight_scale = deq / input_scale if stored_scale is None else stored_scale.float().flatten()
    return QuantizedLinear(
        kind,
        get("weight"),
        weight_scale,
        bias,
        input_scale=input_scale,
        input_offset=int(get("input_offset").flatten()[0]),  # int8, or a float holding an integer (v1)
        deq_scale=deq,
        quant_bias=get("quant_bias"),
    )
