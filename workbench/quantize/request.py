"""What `ascend-workbench quantize` is asked to do, validated, and what it reports back."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path

from ascend_backend.quantization import QuantFormat, QuantType
from workbench.errors import WorkbenchError

DEFAULT_CALIBRATION = "calibration"  # workbench.evaluate.datasets.calibration_set: disjoint from what evaluate scores
DEFAULT_SAMPLES = 32


class Scheme(str, enum.Enum):
    """CLI names of the two W8A8 schemes (docs/METHOD.md §13)."""

    STATIC = "w8a8-static"  # msmodelslim W8A8: per-tensor activation scale from calibration, symmetric (offset 0)
    DYNAMIC = "w8a8-dynamic"  # msmodelslim W8A8_DYNAMIC: a scale per token, computed at run time

    @property
    def quant_type(self) -> QuantType:
        return QuantType.W8A8 if self is Scheme.STATIC else QuantType.W8A8_DYNAMIC

    @classmethod
    def parse(cls, text: str | Scheme) -> Scheme:
        try:
            return cls(text)
        except ValueError:
            raise WorkbenchError(f"--scheme {text!r}: choose {' or '.join(s.value for s in cls)}") from None


def parse_format(text: str | QuantFormat) -> QuantFormat:
    try:
        return QuantFormat(text)
    except ValueError:
        choices = " or ".join(f.value for f in QuantFormat)
        raise WorkbenchError(f"--format {text!r}: choose {choices}") from None


@dataclass(frozen=True)
class QuantizeRequest:
    model: str  # tiny, smollm2 or a Hugging Face checkpoint directory (float)
    scheme: Scheme
    format: QuantFormat
    out: Path
    calibration: str = DEFAULT_CALIBRATION  # a data-set name (humaneval, text, calibration) or a JSONL file
    num_samples: int = DEFAULT_SAMPLES
    dtype: str = "auto"  # the checkpoint's float dtype; auto = the source's (bf16/fp16), bf16 for fp32 sources
    keep_float: tuple[str, ...] = ()  # glob patterns of linear layers left unquantized
    max_tokens: int = 512  # calibration samples are cut to this many tokens
    force: bool = False  # replace an existing, non-empty --out

    def __post_init__(self) -> None:
        if self.num_samples < 1:
            raise WorkbenchError(f"--num-samples {self.num_samples}: give at least 1 calibration sample")
        if self.max_tokens < 8:
            raise WorkbenchError(f"--max-tokens {self.max_tokens}: calibration samples need at least 8 tokens")


@dataclass(frozen=True)
class QuantizeResult:
    out: Path
    source: Path
    scheme: Scheme
    format: QuantFormat
    dtype: str
    layers: dict[str, str] = field(default_factory=dict)  # prefix -> W8A8 | W8A8_DYNAMIC | FLOAT
    calibration: dict | None = None  # data set, samples, tokens (static only)
    seconds: float = 0.0

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for kind in self.layers.values():
            counts[kind] = counts.get(kind, 0) + 1
        layers = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        calib = ""
        if self.calibration:
            calib = f"; calibrated on {self.calibration['samples']} samples ({self.calibration['tokens']} tokens)"
        return (
            f"{self.out}: {self.scheme.value} in {self.format.value} layout, {self.dtype}, {layers}{calib}; "
            f"{self.seconds:.1f} s"
        )
