"""`--ray ADDRESS`: a sweep's server configurations as Ray tasks, spread over every node of a cluster.

Ray is the engine here (vLLM itself uses it for multi-node serving); the workbench adds no scheduler,
queue or transport of its own:

- each server configuration is one Ray *generator task* that asks for one device group as a Ray
  resource — `{"NPU": k}` on Ascend (Ray registers NPUs itself and sets ASCEND_RT_VISIBLE_DEVICES for
  the task), `num_gpus=k` on GPUs, and on CPU one unit of the custom resource `wb_cpu_group` that a
  node advertises once per group of cores it offers (`ray start --resources '{"wb_cpu_group": 2}'`);
  Ray decides which node runs it and when;
- one more task builds every configuration's prompts with the model's tokenizer while the servers
  start, and returns one object per configuration; each configuration's task takes its object once its
  server is up (so no other task imports transformers, ~10 s of CPU, just to build prompts; when the
  model is not a local directory it returns nothing and each task builds its own from its server's);
- the task starts the server on its node, measures the configuration's points and *yields* each
  finished point; Ray streams it to the driver, which appends it to the one results store (the
  driver stays the single writer, so resume and "no finished point lost" hold as in a serial sweep);
- the orphan guard of every server runs inside the task's process tree: when Ray kills the worker,
  or its node dies, the guard stops the server; when the driver goes, Ray cancels its tasks;
- a worker or node that dies mid-configuration loses only the point in flight: the driver resubmits
  the configuration's points not yet stored (at most `retries` times; Ray places the new task on
  any node with a free group), then records what is left as `lost` with Ray's reason.

On a CPU node, Ray says how many groups the node has but not which one a task got, so the task takes
the first free group by an exclusive `flock` on a per-node lock file (released when the task's process
ends, however it ends); its cores, port block and KV share follow from the group's index.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.recipes import DeviceKind
from workbench.serving.device_groups import (
    DeviceGroup,
    available_memory_bytes,
    default_kv_budget,
    group_size,
    split_cores,
)
from workbench.serving.load.workload import load_tokenizer
from workbench.serving.server import resolve_model
from workbench.sweep.measure import ConfigMeasurer, PromptBook, lost_result, prompt_book
from workbench.sweep.spec import SweepPoint
from workbench.sweep.store import PointResult

CPU_GROUP_RESOURCE = "wb_cpu_group"
RAY_RESOURCE = {DeviceKind.NPU: "NPU", DeviceKind.CUDA: "GPU", DeviceKind.CPU: CPU_GROUP_RESOURCE}
LOCAL = "local"
# A local head node on a busy 2-core machine needs more than Ray's default 30 s for its agents to
# register (observed: 29 s under load, then "Timed out waiting for file ... metrics_agent_port").
# Ray starts its workers at niceness +15 over the raylet (`worker_niceness`), and the servers a task
# starts inherit it: measured that way, a server yields the host CPU to every other process on the
# node, unlike the service it stands for. A cluster started with worker_niceness 0 (this config; on a
# real cluster `ray start --head --system-config '{"worker_niceness": 0}'`, which every node takes
# from the head) runs them at the raylet's priority, prestarted workers included.
LOCAL_SYSTEM_CONFIG = {"agent_register_timeout_ms": 180_000, "worker_niceness": 0}
# On any other cluster each task sets the same value in its runtime_env (Ray's job supervisor does
# too; a value in the cluster's system config wins over it). That needs no privilege, but Ray then
# starts a fresh worker for every task instead of handing it one of the idle workers it prestarted,
# hence only when a probe finds the workers lowered.
NORMAL_PRIORITY = {"env_vars": {"RAY_worker_niceness": "0"}}
PRIORITY_PROBE_TIMEOUT_S = 120.0
GROUP_WAIT_S = 600.0  # a CPU task waits this long for its node's group lock (held by another driver)


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise WorkbenchError(
            "--ray needs the 'ray' package; install the 'cluster' extra: pip install 'ascend-workbench[cluster]'"
        ) from None
    return ray


@contextlib.contextmanager
def ray_cluster(address: str, *, cpu_groups: int = 1, num_cpus: int | None = None) -> Iterator[Any]:
    """Connect to the cluster at `address`, or start a local one for 'local'; disconnect what was opened.

    'local' starts a head node on this machine offering `cpu_groups` units of `wb_cpu_group` (NPUs and
    GPUs are found by Ray itself) and stops it again on the way out, so no raylet or gcs_server is
    left. A real address is only connected to: the cluster belongs to whoever started it. When this
    process is already connected (a notebook or a test that called `ray.init` itself), that connection
    is used as it is and left open.
    """
    ray = _ray()
    if ray.is_initialized():
        yield ray
        return
    kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING, "log_to_driver": True}
    try:
        if address == LOCAL:
            ray.init(
                resources={CPU_GROUP_RESOURCE: cpu_groups},
                num_cpus=num_cpus,
                _system_config=LOCAL_SYSTEM_CONFIG,
                **kwargs,
            )
        else:
            ray.init(address=address, **kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise WorkbenchError(
            f"--ray {address}: cannot connect to a Ray cluster ({exc}); start one with "
            f"`ray start --head` and pass its address (host:6379), or use --ray local{_auth_hint(address)}"
        ) from None
    try:
        yield ray
    finally:
        ray.shutdown()


def _auth_hint(address: str) -> str:
    """What to do when the cluster wants a token: Ray (2.59 on) turns token authentication on for a
    cluster started by `ray start --head`, and a driver sends its token to an explicit address only
    when RAY_AUTH_MODE=token says so ('auto' finds a cluster started on this machine, token included)."""
    if address in (LOCAL, "auto") or os.environ.get("RAY_AUTH_MODE"):
        return ""
    return (
        "; if the cluster uses token authentication (`ray start --head` turns it on since Ray 2.59), "
        "export RAY_AUTH_MODE=token with the cluster's token in ~/.ray/auth_token or RAY_AUTH_TOKEN "
        "(`ray get-auth-token` prints it on the head node), or pass --ray auto on the head node"
    )


def check_cluster(ray: Any, kind: DeviceKind, sizes: Sequence[int], address: str) -> None:
    """One clear error when no live node could ever run a configuration (Ray would wait forever)."""
    resource = RAY_RESOURCE[kind]
    offers = [float(n["Resources"].get(resource, 0)) for n in ray.nodes() if n.get("Alive")]
    biggest = max(offers, default=0.0)
    need = 1 if kind is DeviceKind.CPU else max(sizes, default=1)
    if biggest < need:
        hint = (
            f"start each node with `ray start --resources '{{\"{CPU_GROUP_RESOURCE}\": N}}'` (N groups of cores)"
            if kind is DeviceKind.CPU
            else f"nodes need {need} visible {resource}s (ASCEND_RT_VISIBLE_DEVICES"
            " / CUDA_VISIBLE_DEVICES when `ray start` runs)"
        )
        raise WorkbenchError(
            f"--ray {address}: no live node offers {need} {resource} (largest offer: {biggest:g} on "
            f"{len(offers)} nodes); {hint}"
        )


def task_options(kind: DeviceKind, size: int, *, runtime_env: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What one configuration's task asks Ray for: its device group and no plain CPU slot (and the
    runtime_env that restores normal priority, when the cluster's workers run below it)."""
    extra = {"runtime_env": dict(runtime_env)} if runtime_env else {}
    if kind is DeviceKind.CUDA:
        return {"num_gpus": size, "num_cpus": 0, **extra}
    resources = {RAY_RESOURCE[kind]: 1 if kind is DeviceKind.CPU else size}
    return {"resources": resources, "num_cpus": 0, **extra}


def priority_probe() -> Callable[[], bool]:
    """A function telling whether the process calling it runs at a lower CPU priority (a higher niceness)
    than its parent: in a Ray worker, than the raylet that started it.

    Made inside this function, and using nothing but `os`, so that Ray ships it by value: the worker
    answering need not import the workbench (~1.7 s of CPU here) first.
    """

    def below_parent() -> bool:
        return os.nice(0) > os.getpriority(os.PRIO_PROCESS, os.getppid())

    return below_parent


def priority_env(ray: Any) -> Mapping[str, Any] | None:
    """NORMAL_PRIORITY when the cluster's workers run below their raylet's priority (Ray's default),
    else None: asked of one worker by a task that takes no resource. Without an answer in time (a
    cluster too busy to run it), the runtime_env is used: it is always correct, only slower to start."""
    probe = ray.remote(priority_probe()).options(num_cpus=0, max_retries=0).remote()
    try:
        lowered = ray.get(probe, timeout=PRIORITY_PROBE_TIMEOUT_S)
    except ray.exceptions.RayError:  # GetTimeoutError is one
        with contextlib.suppress(Exception):
            ray.cancel(probe, force=True)
        lowered = True
    return NORMAL_PRIORITY if lowered else None


# -- inside the task (runs on the node Ray picked) --------------------------------------------------


def _node_cpu_groups(ray: Any) -> int:
    node_id = ray.get_runtime_context().get_node_id()
    node = next(n for n in ray.nodes() if n["NodeID"] == node_id)
    return int(node["Resources"].get(CPU_GROUP_RESOURCE, 1))


def _lock_cpu_group(count: int, wait_s: float = GROUP_WAIT_S) -> tuple[int, int]:
    """(group index, lock fd): the first of this node's `count` groups that no other process holds."""
    directory = Path(tempfile.gettempdir())
    deadline = time.monotonic() + wait_s
    while True:
        for index in range(count):
            fd = os.open(
                directory / f"ascend-workbench-cpu-group-{index}-of-{count}.lock", os.O_RDWR | os.O_CREAT, 0o644
            )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return index, fd
            except BlockingIOError:
                os.close(fd)
        if time.monotonic() > deadline:
            raise WorkbenchError(
                f"all {count} CPU groups of this node stayed locked for {wait_s:.0f} s (another "
                f"sweep?); lock files: {directory}/ascend-workbench-cpu-group-*"
            )
        time.sleep(1.0)


@contextlib.contextmanager
def _task_group(kind: DeviceKind, kv_budget_bytes: int | None) -> Iterator[DeviceGroup]:
    """The device group Ray gave this task, as a DeviceGroup (CPU: locked for the task's lifetime)."""
    ray = _ray()
    if kind is not DeviceKind.CPU:
        ids = tuple(sorted(int(i) for i in ray.get_runtime_context().get_accelerator_ids()[RAY_RESOURCE[kind]]))
        yield DeviceGroup(kind, ids, min(ids))
        return
    count = _node_cpu_groups(ray)
    budget = kv_budget_bytes or default_kv_budget(available_memory_bytes())
    index, fd = _lock_cpu_group(count)
    try:
        yield split_cores(sorted(os.sched_getaffinity(0)), count, budget)[index]
    finally:
        os.close(fd)  # releases the flock


def prompt_books(
    measurer: ConfigMeasurer, configs: Sequence[Sequence[SweepPoint]]
) -> tuple[PromptBook | None, ...] | PromptBook | None:
    """The Ray task body that builds every configuration's prompts, one returned object per configuration
    (for a single configuration the object itself: what a task of num_returns=1 must return).

    None for a configuration whose model is not a local directory (a hub id the server resolves): its
    task then builds its prompts from what its server serves.
    """
    tokenizers: dict[str, Any] = {}
    books: list[PromptBook | None] = []
    for points in configs:
        recipe = points[0].recipe
        if not recipe.model_is_local():
            books.append(None)
            continue
        directory = resolve_model(recipe)
        if directory not in tokenizers:
            tokenizers[directory] = load_tokenizer(directory)
        books.append(prompt_book(measurer.spec, points, tokenizers[directory]))
    return tuple(books) if len(books) > 1 else books[0]


def _book_from(ray: Any, box: Sequence[Any]) -> PromptBook | None:
    """The configuration's prompts from the prompt task (`box` holds its object ref, so that Ray hands the
    ref to the task instead of waiting for the object before starting it). A workbench error there (no
    tokenizer files, a prompt that cannot be built) is this task's error too; a lost object is not: the
    task then builds its own prompts."""
    try:
        return ray.get(box[0])
    except ray.exceptions.RayTaskError as exc:
        if isinstance(getattr(exc, "cause", None), WorkbenchError):
            raise exc.cause from None
        return None
    except ray.exceptions.RayError:
        return None


def config_task(
    measurer: ConfigMeasurer,
    points: Sequence[SweepPoint],
    kind: DeviceKind,
    kv_budget_bytes: int | None,
    attempt: int,
    book_box: Sequence[Any] = (),
) -> Iterator[dict[str, Any]]:
    """The Ray task body: measure one configuration in this node's group, yield each point as JSON."""
    ray = _ray()
    node = ray.get_runtime_context().get_node_id()
    measurer = replace(measurer, placement={**measurer.placement, "node": node, "attempt": attempt})
    prompts = (lambda: _book_from(ray, book_box)) if book_box else None
    with _task_group(kind, kv_budget_bytes) as group:
        for result in measurer.results(points, group, prompts=prompts):
            yield result.to_dict()


# -- the driver -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Submitted:
    points: tuple[SweepPoint, ...]
    attempt: int


def run_on_ray(
    ray: Any,
    measurer: ConfigMeasurer,
    configs: Sequence[Sequence[SweepPoint]],
    *,
    address: str,
    retries: int = 1,
    kv_budget_bytes: int | None = None,
    status: Callable[[str], None] | None = None,
) -> Iterator[PointResult]:
    """Submit every configuration as a task; yield each point as its task streams it back.

    A task whose worker or node died is resubmitted with its points not yet yielded (`retries` times);
    after that those points come back as `lost` results carrying Ray's reason. An error raised by the
    workbench inside a task (a bad recipe for this group, say) cancels the other tasks and is raised here.
    """
    kind = configs[0][0].recipe.device
    check_cluster(ray, kind, [group_size(c[0].recipe) for c in configs], address)
    task = ray.remote(config_task)
    runtime_env = priority_env(ray)
    boxes = _submit_prompt_books(ray, measurer, configs)

    def submit(points: Sequence[SweepPoint], attempt: int) -> Any:
        options = {**task_options(kind, group_size(points[0].recipe), runtime_env=runtime_env), "max_retries": 0}
        box = boxes.get(points[0].server_key, ())
        return task.options(**options).remote(measurer, tuple(points), kind, kv_budget_bytes, attempt, box)

    pending = {submit(c, 1): _Submitted(tuple(c), 1) for c in configs}
    try:
        while pending:
            if status:
                status(f"{len(pending)} Ray tasks in flight")
            [generator], _ = ray.wait(list(pending), num_returns=1)
            job = pending[generator]
            try:
                data = ray.get(next(generator))
            except StopIteration:
                del pending[generator]
                continue
            except ray.exceptions.RayTaskError as exc:  # raised by our code in the task: deterministic
                cause = getattr(exc, "cause", None)
                raise (
                    cause
                    if isinstance(cause, WorkbenchError)
                    else WorkbenchError(f"a sweep task failed on a Ray node: {exc}")
                ) from None
            except ray.exceptions.RayError as exc:  # the worker or node died: retry what is left
                del pending[generator]
                yield from _after_loss(job, exc, retries, submit, pending, measurer)
                continue
            result = PointResult.from_dict(data)
            pending[generator] = replace(job, points=tuple(p for p in job.points if p.point_id != result.point_id))
            yield result
    finally:
        for generator in pending:
            with contextlib.suppress(Exception):
                ray.cancel(generator, force=True)


def _submit_prompt_books(
    ray: Any, measurer: ConfigMeasurer, configs: Sequence[Sequence[SweepPoint]]
) -> dict[str, list[Any]]:
    """Submit the prompt task; per configuration (by server key) a one-item list holding its object ref.

    No prompt task when the spec profiles: a profiled point needs the tokenizer in its own task anyway.
    The task takes no group and no CPU slot. It runs at normal priority in a worker of its own (its
    runtime_env rules out the idle workers Ray prestarted, which are left to the configuration tasks
    submitted next, whose server starts are the critical path); it has a server start's time (a
    minute or more) to finish before the first configuration asks for its object.
    """
    if measurer.spec.profile:
        return {}
    count = len(configs)
    options = {"num_cpus": 0, "num_returns": count, "runtime_env": NORMAL_PRIORITY}
    refs = ray.remote(prompt_books).options(**options).remote(measurer, [tuple(c) for c in configs])
    refs = refs if count > 1 else [refs]
    return {points[0].server_key: [ref] for points, ref in zip(configs, refs, strict=True)}


def _after_loss(
    job: _Submitted,
    exc: BaseException,
    retries: int,
    submit: Callable[[Sequence[SweepPoint], int], Any],
    pending: dict[Any, _Submitted],
    measurer: ConfigMeasurer,
) -> Iterator[PointResult]:
    """Resubmit a lost task's remaining points, or record them as lost when the retries are spent."""
    if not job.points:
        return
    if job.attempt <= retries:
        pending[submit(job.points, job.attempt + 1)] = _Submitted(job.points, job.attempt + 1)
        return
    reason = f"{type(exc).__name__} after {job.attempt} attempts: {exc}"
    placement: Mapping[str, Any] = {"mode": measurer.mode.value, "attempt": job.attempt}
    for point in job.points:
        yield lost_result(measurer.spec, point, reason, placement)
