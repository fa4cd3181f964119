"""From a float state dict (and, for static W8A8, calibration ranges) to a format-neutral QuantizedModel.

Two steps, as in gpt-fast: `plan_layers` decides what each linear becomes, `quantize_model` makes the
int8 weights and scales. The writers (`msmodelslim`, `compressed_tensors`) then lay the result out.

Which layers: every projection inside the decoder blocks (`model.layers.N.self_attn.{q,k,v,o}_proj`,
`model.layers.N.mlp.{gate,up,down}_proj`); embeddings, norms and `lm_head` stay in float, as in
msmodelslim's default W8A8 recipe. Layers named by `keep_float` patterns stay float too (the usual
fix when one layer loses too much, e.g. a down_proj with large activation outliers).

Fused groups: vLLM (and vllm-ascend) run q/k/v as one `qkv_proj` and gate/up as one `gate_up_proj`, so
the members of a group must share a scheme — vllm-ascend refuses a checkpoint whose shards differ
(`get_linear_quant_type`, vllm_ascend/quantization/modelslim_config.py, v0.23.0) — and, for static
W8A8, one activation scale (the group reads one input); `plan_layers` and `quantize_model` enforce both.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence

import torch

from ascend_backend.quantization.arithmetic import quantize_weight_per_channel, representable, static_activation_params
from ascend_backend.quantization.calibration import ActivationRange
from ascend_backend.quantization.scheme import QuantizedLinear, QuantizedModel, QuantType

DECODER_LINEAR = re.compile(r"^(?:.*\.)?layers\.\d+\.(?:self_attn|mlp)\.\w+_proj$")
FUSED_GROUPS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


def linear_prefixes(tensor_names: Sequence[str]) -> list[str]:
    """Module prefixes of the decoder-block projections among a checkpoint's tensor names, in order."""
    return [n[: -len(".weight")] for n in tensor_names if n.endswith(".weight") and DECODER_LINEAR.match(n[:-7])]


def fused_group(prefix: str) -> tuple[str, ...]:
    """The prefixes that vLLM fuses with `prefix` (itself included); a 1-tuple when it is not fused."""
    parent, _, leaf = prefix.rpartition(".")
    for group in FUSED_GROUPS:
        if leaf in group:
            return tuple(f"{parent}.{member}" for member in group)
    return (prefix,)


def plan_layers(prefixes: Sequence[str], quant_type: QuantType, keep_float: Sequence[str] = ()) -> dict[str, QuantType]:
    """prefix -> scheme: `quant_type` everywhere except layers matching a `keep_float` glob (FLOAT).

    A pattern that keeps one member of a fused group float keeps the whole group float (vLLM runs the
    group as one layer), and a pattern matching nothing is an error, not a silent no-op.
    """
    if quant_type is QuantType.FLOAT:
        raise ValueError("plan_layers needs W8A8 or W8A8_DYNAMIC; FLOAT would quantize nothing")
    for pattern in keep_float:
        if not any(fnmatch.fnmatchcase(p, pattern) for p in prefixes):
            raise ValueError(f"keep_float pattern {pattern!r} matches no linear layer (e.g. {prefixes[:1]})")
    floated = {p for p in prefixes if any(fnmatch.fnmatchcase(p, pat) for pat in keep_float)}
    floated |= {member for p in floated for member in fused_group(p)}
    return {p: QuantType.FLOAT if p in floated else quant_type for p in prefixes}


def quantize_linear(
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    quant_type: QuantType,
    dtype: torch.dtype,
    activation: ActivationRange | None = None,
    *,
    symmetric_inputs: bool = True,
) -> QuantizedLinear:
    """One layer: weight [out, in] float -> QuantizedLinear whose scales are exact in `dtype`.

    A static layer's input gets a zero point only with `symmetric_inputs=False`
    (`arithmetic.static_activation_params` says which runtimes take one).
    """
    q, scale = quantize_weight_per_channel(weight, dtype)
    float_bias = None if bias is None else representable(bias, dtype)
    if quant_type is QuantType.W8A8_DYNAMIC:
        return QuantizedLinear(quant_type, q, scale, float_bias)
    if activation is None:
        raise ValueError("static W8A8 needs the layer's calibration range")
    input_scale, input_offset = static_activation_params(
        activation.minimum, activation.maximum, dtype, symmetric=symmetric_inputs
    )
    return QuantizedLinear(quant_type, q, scale, float_bias, input_scale, input_offset)


def quantize_model(
    state: Mapping[str, torch.Tensor],
    plan: Mapping[str, QuantType],
    dtype: torch.dtype,
    ranges: Mapping[str, ActivationRange] | None = None,
    *,
    tied_embeddings: bool = False,
    symmetric_inputs: bool = True,
) -> QuantizedModel:
    """The whole checkpoint: planned layers quantized, every other tensor cast to `dtype`.

    Static layers of one fused group get the union of their members' ranges (identical anyway when the
    ranges were observed on the shared input) so that vLLM's single input scale fits all of them.
    `tied_embeddings` (config.json's `tie_word_embeddings`) is carried to the writers, which must
    describe an lm_head the state dict does not hold. Static inputs are symmetric (zero point 0) unless
    `symmetric_inputs=False`: the only static form every runtime here loads (`quantize_linear`).
    """
    ranges = ranges or {}
    linears: dict[str, QuantizedLinear] = {}
    for prefix, quant_type in plan.items():
        if quant_type is QuantType.FLOAT:
            continue
        if f"{prefix}.weight" not in state:
            raise KeyError(f"planned layer {prefix} has no tensor {prefix}.weight in the state dict")
        activation = _group_range(prefix, ranges) if quant_type is QuantType.W8A8 else None
        linears[prefix] = quantize_linear(
            state[f"{prefix}.weight"],
            state.get(f"{prefix}.bias"),
            quant_type,
            dtype,
            activation,
            symmetric_inputs=symmetric_inputs,
        )
    owned = {f"{p}.{leaf}" for p in linears for leaf in ("weight", "bias")}
    floats = {name: t.to(dtype) if t.is_floating_point() else t for name, t in state.items() if name not in owned}
    return QuantizedModel(linears, floats, dtype, tied_embeddings)


def _group_range(prefix: str, ranges: Mapping[str, ActivationRange]) -> ActivationRange:
    members = [ranges[m] for m in fused_group(prefix) if m in ranges]
    if not members:
        raise ValueError(f"static W8A8 layer {prefix} has no calibration range: run calibration over it")
    return ActivationRange(
        min(r.minimum for r in members), max(r.maximum for r in members), sum(r.tokens for r in members)
    )
