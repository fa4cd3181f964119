"""A profile per sweep point, for sweep specs that set `profile: true`.

The sweep runner starts each configuration's server with vLLM's profiler configured (`server_args`,
`SERVER_ENV`) and, after a point's measured load — which runs outside any profiling window, so its
throughput and latency are not disturbed — calls `profile_point`: the same workload shape once more
between /start_profile and /stop_profile (files named after the point, so one server serves every
point), read and judged. The point keeps the summary (busy / communication / free shares, verdict
kinds and findings) and the full profile goes to `<sweep out>/profiles/<point_id>.json`.

Open-loop points (a request rate) are profiled closed-loop at their in-flight cap (4 without one):
the profile explains where a step's time goes, which the arrival process does not change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.profiling.capture import SCOPES_ENV, CaptureWorkload, profile_window, profiler_args
from workbench.profiling.report import summary
from workbench.profiling.verdicts import judge, load_thresholds
from workbench.serving.server import Server

SERVER_ENV = SCOPES_ENV
DEFAULT_CONCURRENCY = 4


def trace_dir(out_dir: Path, server_key: str) -> Path:
    return (Path(out_dir) / "profiles" / server_key).resolve()


def server_args(out_dir: Path, server_key: str) -> tuple[str, ...]:
    """The api_server arguments that configure the profiler for one configuration's server."""
    directory = trace_dir(out_dir, server_key)
    directory.mkdir(parents=True, exist_ok=True)
    return profiler_args(directory)


def point_workload(workload: Any) -> CaptureWorkload:
    """The profiled window's load: the point's lengths and prompt count, closed-loop (see the docstring)."""
    return CaptureWorkload(
        input_len=workload.input_len,
        output_len=workload.output_len,
        num_prompts=workload.num_prompts,
        concurrency=workload.concurrency or DEFAULT_CONCURRENCY,
        warmup_requests=0,  # the point's own load just ran on this server
        seed=workload.seed,
    )


def profile_point(server: Server, point: Any, out_dir: Path, tokenizer: Any) -> dict[str, Any]:
    """Profile one sweep point on its running server; a failure is recorded, never fatal to the sweep."""
    try:
        _, profile = profile_window(
            server,
            trace_dir(out_dir, point.server_key),
            point_workload(point.workload),
            point.recipe,
            prefix=f"p{point.point_id}",
            tokenizer=tokenizer,
            progress=False,
        )
    except WorkbenchError as exc:
        return {"error": str(exc)}
    verdicts = judge(profile, load_thresholds())
    path = profile.write(Path(out_dir) / "profiles" / f"{point.point_id}.json")
    return {**summary(profile, verdicts), "file": str(path)}
