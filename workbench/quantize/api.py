"""The quantize API: what `ascend-workbench quantize` and notebook 10 call.

result = quantize_checkpoint(QuantizeRequest("smollm2", Scheme.W8A8_STATIC, QuantFormat.MSMODELSLIM, out))
range_figure(result.out); description_counts(result.out); round_trip(result.out, scratch)
"""

from __future__ import annotations

from workbench.quantize.checkpoint import quantize_checkpoint
from workbench.quantize.report import description_counts, layer_table, range_figure, round_trip
from workbench.quantize.request import QuantizeRequest, QuantizeResult, Scheme, parse_format

__all__ = [
    "QuantizeRequest",
    "QuantizeResult",
    "Scheme",
    "description_counts",
    "layer_table",
    "parse_format",
    "quantize_checkpoint",
    "range_figure",
    "round_trip",
]
