"""The serving API: what `serve`, `smoke`, `bench` and notebook 03 call (a load watches its server for
a hang by default: `HangWatch`, `ServerHung`).

    with connect(recipe=load_serving_recipe("cpu-tiny")) as server:     # or connect(url=...) to attach
        report = run_smoke(server, prompt="The capital of France is")
        result = run_load(server.url, server.model, Workload(input_len=256, output_len=64, num_prompts=32))

A launched server is always a context manager: leaving the block (normally, on an error or on Ctrl-C)
stops its whole process group.
"""

from __future__ import annotations

from workbench.serving.cluster import check_cluster_recipe, cluster_bundles
from workbench.serving.crash import CrashReport, ServerFailure
from workbench.serving.device_groups import kv_budget_flag, local_pool, parse_devices, resolve_parallel
from workbench.serving.hang import HANG_AFTER_S, HangWatchdog, ServerHung
from workbench.serving.load.metrics import LoadResult
from workbench.serving.load.runner import HangWatch, run_load
from workbench.serving.load.workload import SLO, Workload
from workbench.serving.server import Server, attach, connect, launch
from workbench.serving.smoke import DEFAULT_PROMPT, SmokeReport, run_smoke

__all__ = [
    "CrashReport",
    "DEFAULT_PROMPT",
    "HANG_AFTER_S",
    "HangWatch",
    "HangWatchdog",
    "LoadResult",
    "SLO",
    "Server",
    "ServerFailure",
    "ServerHung",
    "SmokeReport",
    "Workload",
    "attach",
    "check_cluster_recipe",
    "cluster_bundles",
    "connect",
    "kv_budget_flag",
    "launch",
    "local_pool",
    "parse_devices",
    "resolve_parallel",
    "run_load",
    "run_smoke",
]
