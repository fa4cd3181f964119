"""W8A8 quantization of a float checkpoint, behind `ascend-workbench quantize` and notebook 10.

    request   QuantizeRequest / Scheme (w8a8-static, w8a8-dynamic) / QuantizeResult
    calibrate calibration texts from workbench.evaluate's data sets, observed ranges per layer (tqdm)
    checkpoint  resolve -> plan -> calibrate -> quantize -> write msmodelslim or compressed-tensors,
              atomically, with quantization.json (per-layer scheme and ranges, provenance)

The arithmetic and the formats are `ascend_backend.quantization`'s; this package only drives them.
"""

from workbench.quantize.checkpoint import REPORT_FILE, build_into, quantize_checkpoint
from workbench.quantize.request import DEFAULT_CALIBRATION, QuantizeRequest, QuantizeResult, Scheme, parse_format

__all__ = [
    "DEFAULT_CALIBRATION",
    "REPORT_FILE",
    "QuantizeRequest",
    "QuantizeResult",
    "Scheme",
    "build_into",
    "parse_format",
    "quantize_checkpoint",
]
