"""What a quantized linear layer is, independent of the file format it is stored in.

Two W8A8 schemes, both with int8 weights quantized symmetrically per output channel:

- `W8A8` (static): the activation entering the layer is quantized with ONE scale and offset for the
  whole tensor, fixed at calibration time (`q = round(x / s) + z`). Cheapest at run time (no
  reduction over the input), the scheme msmodelslim calls `W8A8`. The quantizer makes the offset 0
  (symmetric) unless asked otherwise, since vllm-ascend's compressed-tensors path takes nothing else
  (`arithmetic.static_activation_params`); checkpoints that carry an offset read back with it.
- `W8A8_DYNAMIC`: every token (row) of the activation gets its own symmetric scale, computed at run
  time from that row's absolute maximum (`s_t = max|x_t| / 127`). Costs one reduction per call, but
  one outlier token cannot squeeze the resolution of all the others.

`FLOAT` marks a weight kept in the model's float dtype (embeddings, norms, layers left unquantized).
The names are msmodelslim's, as vllm-ascend reads them from `quant_model_description.json`
(vllm_ascend/quantization/methods/w8a8_static.py and w8a8_dynamic.py, `@register_scheme("W8A8")` and
`@register_scheme("W8A8_DYNAMIC")`, tag v0.23.0).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import torch

from ascend_backend.quantization.arithmetic import static_deq_scale, static_quant_bias


class QuantType(str, enum.Enum):
    W8A8 = "W8A8"
    W8A8_DYNAMIC = "W8A8_DYNAMIC"
    FLOAT = "FLOAT"


class PlanScheme(str, enum.Enum):
    """What a quantization plan may assign one linear: msmodelslim's type names, wider than QuantType.

    QuantType is what this package's W8A8 writers and readers carry; a plan also names the weight-only
    and 4-bit schemes whose accuracy the autopilot measures (`fakequant` says how each is measured).
    """

    W8A8 = "W8A8"  # int8 weights per channel, static per-tensor int8 inputs
    W8A8_DYNAMIC = "W8A8_DYNAMIC"  # int8 weights per channel, int8 inputs per token
    W8A16 = "W8A16"  # int8 weights per channel, float inputs
    W4A16 = "W4A16"  # int4 weights per group, float inputs
    W4A8_DYNAMIC = "W4A8_DYNAMIC"  # int4 weights per group, int8 inputs per token
    FLOAT = "FLOAT"

    @property
    def quant_type(self) -> QuantType | None:
        """The W8A8 writers' type for this scheme (None: the W8A8 writers cannot store it)."""
        return {"W8A8": QuantType.W8A8, "W8A8_DYNAMIC": QuantType.W8A8_DYNAMIC, "FLOAT": QuantType.FLOAT}.get(
            self.value
        )

    @property
    def weight_bits(self) -> int | None:
        return None if self is PlanScheme.FLOAT else (4 if self.value.startswith("W4") else 8)

    @classmethod
    def parse(cls, text: str) -> PlanScheme:
        """'w8a8-dynamic', 'W8A8_DYNAMIC', 'float' ... -> the scheme (ValueError naming the choices)."""
        key = text.strip().upper().replace("-", "_")
        aliases = {"W8A8_STATIC": "W8A8", "W4A8": "W4A8_DYNAMIC"}
        try:
            return cls(aliases.get(key, key))
        except ValueError:
            raise ValueError(f"unknown scheme {text!r}; choose {', '.join(s.value for s in cls)}") from None


class QuantFormat(str, enum.Enum):
    """On-disk layouts: Ascend's (vllm-ascend `--quantization ascend`) and vLLM's compressed-tensors."""

    MSMODELSLIM = "msmodelslim"
    COMPRESSED_TENSORS = "compressed-tensors"


class QuantizedCheckpointError(ValueError):
    """A quantized checkpoint is malformed or inconsistent; the message names the file, the tensor and the fix."""


@dataclass(frozen=True, eq=False)
class QuantizedLinear:
    """One linear layer in W8A8, the format-neutral form every writer and reader converts to and from.

    Float values are what the layer means (`W ~= weight * weight_scale[:, None]`); each format derives
    its own tensors from them (msmodelslim's `deq_scale` and `quant_bias`, compressed-tensors' zero
    point). Scales the quantizer makes are float32 tensors whose values are exactly representable in the
    model's dtype, so a checkpoint that stores them in bf16/fp16 (msmodelslim v0 does) reads back to
    the same numbers; a reader keeps whatever values the file holds.
    """

    quant_type: QuantType  # W8A8 or W8A8_DYNAMIC
    weight: torch.Tensor  # [out, in] int8, symmetric (no weight offset)
    weight_scale: torch.Tensor  # [out] float32
    bias: torch.Tensor | None = None  # [out] float32, the layer's float bias
    input_scale: torch.Tensor | None = None  # [] float32, static only
    input_offset: int | None = None  # int8 zero point of the activation, static only
    # Static only, as a checkpoint stored them (msmodelslim computes them from its own float32 scales, so
    # they need not equal what input_scale and weight_scale give); None = derive them (`arithmetic`).
    deq_scale: torch.Tensor | None = None  # [out] float32
    quant_bias: torch.Tensor | None = None  # [out] int32

    def __post_init__(self) -> None:
        if self.quant_type is QuantType.FLOAT:
            raise ValueError("QuantizedLinear holds W8A8 or W8A8_DYNAMIC layers; FLOAT layers stay float tensors")
        if self.weight.dtype != torch.int8 or self.weight.dim() != 2:
            raise ValueError(f"weight must be int8 [out, in], got {self.weight.dtype} {tuple(self.weight.shape)}")
        out_features = self.weight.shape[0]
        if tuple(self.weight_scale.shape) != (out_features,):
            raise ValueError(f"weight_scale must be [{out_features}], got {tuple(self.weight_scale.shape)}")
        static = self.quant_type is QuantType.W8A8
        if static != (self.input_scale is not None) or static != (self.input_offset is not None):
            raise ValueError(f"{self.quant_type.value}: input_scale/input_offset are required for W8A8 and only for it")
        if self.input_offset is not None and not -128 <= self.input_offset <= 127:
            raise ValueError(f"input_offset {self.input_offset} is outside int8")
        if not static and (self.deq_scale is not None or self.quant_bias is not None):
            raise ValueError("deq_scale/quant_bias belong to static W8A8 layers only")

    @property
    def out_features(self) -> int:
        return int(self.weight.shape[0])

    @property
    def in_features(self) -> int:
        return int(self.weight.shape[1])

    def static_deq_scale(self) -> torch.Tensor:
        """[out] float32: the stored deq_scale, else input_scale * weight_scale."""
        if self.deq_scale is not None:
            return self.deq_scale
        assert self.input_scale is not None, "static layers only"
        return static_deq_scale(self.input_scale, self.weight_scale)

    def static_quant_bias(self) -> torch.Tensor:
        """[out] int32: the stored quant_bias, else the zero-point correction plus the folded float bias."""
        if self.quant_bias is not None:
            return self.quant_bias
        assert self.input_offset is not None, "static layers only"
        return static_quant_bias(self.weight, self.input_offset, self.static_deq_scale(), self.bias)

    def dequantized_weight(self) -> torch.Tensor:
        """[out, in] float32: what the int8 weight stands for."""
        return self.weight.float() * self.weight_scale[:, None]

    def same_as(self, other: QuantizedLinear) -> bool:
        """Bit-for-bit equality of every field (the round-trip tests' criterion)."""

        def same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
            if a is None or b is None:
                return a is None and b is None
            return a.dtype == b.dtype and a.shape == b.shape and bool(torch.equal(a, b))

        return (
            self.quant_type is other.quant_type
            and self.input_offset == other.input_offset
            and all(
                same(getattr(self, f), getattr(other, f)) for f in ("weight", "weight_scale", "bias", "input_scale")
            )
            and (
                self.quant_type is not QuantType.W8A8
                or (
                    same(self.static_deq_scale(), other.static_deq_scale())
                    and same(self.static_quant_bias(), other.static_quant_bias())
                )
            )
        )


@dataclass(frozen=True, eq=False)
class QuantizedModel:
    """A whole checkpoint in W8A8: quantized linears by module name, every other tensor in float.

    `linears` maps a module prefix (`model.layers.0.self_attn.q_proj`) to its layer; `floats` maps full
    tensor names (`model.embed_tokens.weight`, and the weights of linears left FLOAT) to tensors in
    `dtype`, the model's float dtype (what activations and FLOAT weights use at run time).

    `tied_embeddings` is config.json's `tie_word_embeddings`: the output projection reuses
    `model.embed_tokens.weight`, so a checkpoint usually stores no `lm_head.weight`. vLLM still builds
    an `lm_head` layer and asks the quantization config about it, so a writer may have to describe a
    head it does not store (`msmodelslim.to_tensors`).
    """

    linears: dict[str, QuantizedLinear]
    floats: dict[str, torch.Tensor]
    dtype: torch.dtype
    tied_embeddings: bool = False

    def quant_type_of(self, tensor_name: str) -> QuantType:
        """The description entry of a tensor name: its layer's scheme, or FLOAT."""
        prefix = tensor_name.rsplit(".", 1)[0]
        layer = self.linears.get(prefix)
        return layer.quant_type if layer is not None else QuantType.FLOAT
