"""A sweep whose workload is a trace: the service's own requests at their own times, once per replay speed.

    workload: {trace: runs/capture/prod/trace.jsonl, num_prompts: 200, speed: [1, 2, 4]}

Each speed is one workload point: the trace's first `num_prompts` requests, each sent at its recorded
offset divided by the speed (`workbench.serving.load.runner`, trace mode), so the same traffic is offered
at 1x, 2x, 4x its recorded rate. The mean recorded lengths label the point; warm-up requests keep the
fixed-length shape of those means. The trace file is read when the spec is expanded: a bad path or a
file that is not a trace fails there, with the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.serving.load.trace import read_trace, trace_prompts, trace_workload
from workbench.serving.load.workload import Prompt


def check_trace_workload(spec: Any) -> Any:
    """A trace workload's own rules (the fixed-length keys do not apply to it)."""
    if spec.input_len or spec.output_len or spec.concurrency or spec.request_rate:
        raise ValueError(
            "a trace sets lengths and arrivals itself: leave out input_len, output_len, concurrency, request_rate"
        )
    if not spec.speed or any(not s > 0 for s in spec.speed):
        raise ValueError(f"speed must hold factors > 0 (1 = as recorded), got {list(spec.speed)}")
    return spec


def trace_shape(trace: Path, num_prompts: int) -> tuple[int, int, int]:
    """(mean input tokens, mean output tokens, requests) of a trace's first `num_prompts` requests."""
    shape = trace_workload(read_trace(trace, num_prompts))
    return shape.input_len, shape.output_len, int(shape.num_prompts or 0)


def load_prompts(point: Any) -> tuple[Prompt, ...]:
    """The requests a trace point sends."""
    assert point.trace is not None
    return tuple(trace_prompts(read_trace(point.trace, point.num_prompts)))


def guard_fields(result: Any) -> dict[str, int]:
    """The output guard's counts for a point's summary (0 answers: none kept)."""
    guard = getattr(result, "guard", None)
    return {"guard_answers": guard.answers, "guard_flagged": guard.flagged} if guard is not None else {}


__all__ = ["check_trace_workload", "guard_fields", "load_prompts", "trace_shape"]
