"""The replay API: what `ascend-workbench capture` / `replay` and notebook 12 call (docs/METHOD.md §18).

with capture_proxy(CaptureRequest(upstream=url, out=trace_dir, port=0)) as proxy:   # record a service's traffic
    send_traffic(proxy.url, TrafficSpec(model))                                    # (or let its clients talk)
run_import_trace(ImportTraceRequest(TraceSource.MOONCAKE, path, out, tokenizer=model_dir))     # or import a trace
result = run_replay(ReplayRequest(trace_dir, recipe=candidate))                     # replay, judge, save
print(result.text()); result.parity_table(); parity_chart(result.class_table())
handoff = to_twin(result.verdicts, read_trace(trace_dir), out, reference=..., candidate=...)   # -> twin
"""

from __future__ import annotations

from pathlib import Path

from workbench.replay.capture import (
    CaptureRequest,
    CaptureResult,
    ImportTraceRequest,
    TraceSource,
    capture_proxy,
    read_capture,
    run_capture,
    run_import_trace,
)
from workbench.replay.charts import latency_chart, parity_chart
from workbench.replay.experiment import ExperimentPlan, ExperimentReport, run_experiment
from workbench.replay.handoff import TwinHandoff, to_twin
from workbench.replay.imports.lengths import Columns
from workbench.replay.parity import Parity
from workbench.replay.policy import ReplayThresholds, load_thresholds
from workbench.replay.recorder import CaptureSettings
from workbench.replay.report import ReplayResult, read_replay, trace_table
from workbench.replay.run import ReplayRequest, run_replay
from workbench.replay.traffic import TrafficSpec, send_traffic
from workbench.serving.load.runner import run_coroutine
from workbench.serving.load.trace import read_trace
from workbench.settings import run_dir


def run_folder(out_dir: str | Path | None = None) -> Path:
    """`out_dir`, or a new folder under runs/replay (a notebook's capture, replays and twin runs go inside)."""
    return Path(out_dir) if out_dir else run_dir("replay", fresh=True)


def play_traffic(url: str, spec: TrafficSpec) -> int:
    """`send_traffic` from synchronous code and notebooks (their event loop already runs)."""
    return run_coroutine(send_traffic(url, spec))


__all__ = [
    "CaptureRequest",
    "CaptureResult",
    "CaptureSettings",
    "Columns",
    "ExperimentPlan",
    "ExperimentReport",
    "ImportTraceRequest",
    "Parity",
    "ReplayRequest",
    "ReplayResult",
    "ReplayThresholds",
    "TraceSource",
    "TrafficSpec",
    "TwinHandoff",
    "capture_proxy",
    "latency_chart",
    "load_thresholds",
    "parity_chart",
    "play_traffic",
    "read_capture",
    "read_replay",
    "read_trace",
    "run_capture",
    "run_experiment",
    "run_import_trace",
    "run_folder",
    "run_replay",
    "send_traffic",
    "to_twin",
    "trace_table",
]
