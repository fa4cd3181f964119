"""The quantize API: what `ascend-workbench quantize` and notebook 10 call.

result = quantize_checkpoint(QuantizeRequest("smollm2", Scheme.W8A8_STATIC, QuantFormat.MSMODELSLIM, out))
range_figure(result.out); description_counts(result.out); round_trip(result.out, scratch)

auto = run_autopilot(AutoRequest("smollm2", budget=1.0))          # quantize --auto
print(auto.text()); sensitivity_figure(auto); steps_table(auto)
"""

from __future__ import annotations

from ascend_backend.quantization.scheme import PlanScheme
from workbench.errors import WorkbenchError
from workbench.quantize.autopilot import AutoRequest, AutoResult, Outcome, run_autopilot
from workbench.quantize.checkpoint import quantize_checkpoint
from workbench.quantize.report import (
    accuracy_table,
    description_counts,
    layer_table,
    plan_table,
    range_figure,
    round_trip,
    sensitivity_figure,
    steps_figure,
    steps_table,
)
from workbench.quantize.request import QuantizeRequest, QuantizeResult, Scheme, parse_format
from workbench.quantize.served import compare_served
from workbench.quantize.texts import Target


def parse_ladder(text: str) -> tuple[PlanScheme, ...]:
    """'W8A8,W8A8_DYNAMIC,FLOAT' (or w8a8-static,w8a8-dynamic,float) -> the rungs, one clear error otherwise."""
    try:
        return tuple(PlanScheme.parse(part) for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise WorkbenchError(f"--ladder {text!r}: {exc}") from None


__all__ = [
    "AutoRequest",
    "AutoResult",
    "Outcome",
    "PlanScheme",
    "QuantizeRequest",
    "QuantizeResult",
    "Scheme",
    "Target",
    "accuracy_table",
    "compare_served",
    "description_counts",
    "layer_table",
    "parse_format",
    "parse_ladder",
    "plan_table",
    "quantize_checkpoint",
    "range_figure",
    "round_trip",
    "run_autopilot",
    "sensitivity_figure",
    "steps_figure",
    "steps_table",
]
