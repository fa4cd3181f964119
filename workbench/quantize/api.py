"""The quantize API: what the `ascend-workbench` verb and the notebook call (see the package docstring)."""

from __future__ import annotations

from workbench.quantize.checkpoint import REPORT_FILE, build_into, quantize_checkpoint
from workbench.quantize.request import DEFAULT_CALIBRATION, QuantizeRequest, QuantizeResult, Scheme, parse_format

__all__ = [
    "DEFAULT_CALIBRATION",
    "QuantizeRequest",
    "QuantizeResult",
    "REPORT_FILE",
    "Scheme",
    "build_into",
    "parse_format",
    "quantize_checkpoint",
]
