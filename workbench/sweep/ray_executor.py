"""`--ray ADDRESS`: a sweep's server configurations as Ray tasks, spread over every node of a cluster.

Ray is the engine here (vLLM itself uses it for multi-node serving); the workbench adds no scheduler,
queue or transport of its own:

- each server configuration is one Ray *generator task* that asks for one device group as a Ray
  resource — `{"NPU": k}` on Ascend (Ray registers NPUs itself and sets ASCEND_RT_VISIBLE_DEVICES for
  the task), `num_gpus=k` on GPUs, and on CPU one unit of the custom resource `wb_cpu_group` that a
  node advertises once per group of cores it offers (`ray start --resources '{"wb_cpu_group": 2}'`);
  Ray decides which node runs it and when;
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
from workbench.recipes import Device
from workbench.serving.device_groups import (
    DeviceGroup,
    available_memory_bytes,
    default_kv_budget,
    group_size,
    split_cores,
)
from workbench.sweep.measure import ConfigMeasurer, lost_result
from workbench.sweep.spec import SweepPoint
from workbench.sweep.store import PointResult

CPU_GROUP_RESOURCE = "wb_cpu_group"
RAY_RESOURCE = {Device.NPU: "NPU", Device.CUDA: "GPU", Device.CPU: CPU_GROUP_RESOURCE}
LOCAL = "local"
# A local head node on a busy 2-core machine needs more than Ray's default 30 s for its agents to
# register (observed: 29 s under load, then "Timed out waiting for file ... metrics_agent_port").
LOCAL_SYSTEM_CONFIG = {"agent_register_timeout_ms": 180_000}
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
            "`ray start --head` and pass its address (host:6379), or use --ray local"
        ) from None
    try:
        yield ray
    finally:
        ray.shutdown()


def check_cluster(ray: Any, kind: Device, sizes: Sequence[int], address: str) -> None:
    """One clear error when no live node could ever run a configuration (Ray would wait forever)."""
    resource = RAY_RESOURCE[kind]
    offers = [float(n["Resources"].get(resource, 0)) for n in ray.nodes() if n.get("Alive")]
    biggest = max(offers, default=0.0)
    need = 1 if kind is Device.CPU else max(sizes, default=1)
    if biggest < need:
        hint = (
            f"start each node with `ray start --resources '{{\"{CPU_GROUP_RESOURCE}\": N}}'` (N groups of cores)"
            if kind is Device.CPU
            else f"nodes need {need} visible {resource}s (ASCEND_RT_VISIBLE_DEVICES"
            " / CUDA_VISIBLE_DEVICES when `ray start` runs)"
        )
        raise WorkbenchError(
            f"--ray {address}: no live node offers {need} {resource} (largest offer: {biggest:g} on "
            f"{len(offers)} nodes); {hint}"
        )


def task_options(kind: Device, size: int) -> dict[str, Any]:
    """The resources one configuration's task asks Ray for: its device group, and no plain CPU slot."""
    if kind is Device.CUDA:
        return {"num_gpus": size, "num_cpus": 0}
    return {"resources": {RAY_RESOURCE[kind]: 1 if kind is Device.CPU else size}, "num_cpus": 0}


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
def _task_group(kind: Device, kv_budget_bytes: int | None) -> Iterator[DeviceGroup]:
    """The device group Ray gave this task, as a DeviceGroup (CPU: locked for the task's lifetime)."""
    ray = _ray()
    if kind is not Device.CPU:
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


def config_task(
    measurer: ConfigMeasurer, points: Sequence[SweepPoint], kind: Device, kv_budget_bytes: int | None, attempt: int
) -> Iterator[dict[str, Any]]:
    """The Ray task body: measure one configuration in this node's group, yield each point as JSON."""
    ray = _ray()
    node = ray.get_runtime_context().get_node_id()
    measurer = replace(measurer, placement={**measurer.placement, "node": node, "attempt": attempt})
    with _task_group(kind, kv_budget_bytes) as group:
        for result in measurer.results(points, group):
            yield result.to_json()


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

    def submit(points: Sequence[SweepPoint], attempt: int) -> Any:
        options = {**task_options(kind, group_size(points[0].recipe)), "max_retries": 0}
        return task.options(**options).remote(measurer, tuple(points), kind, kv_budget_bytes, attempt)

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
            result = PointResult.from_json(data)
            pending[generator] = replace(job, points=tuple(p for p in job.points if p.point_id != result.point_id))
            yield result
    finally:
        for generator in pending:
            with contextlib.suppress(Exception):
                ray.cancel(generator, force=True)


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
