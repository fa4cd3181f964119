"""Launch a cluster recipe: several vLLM "nodes" on this machine, one process group each, behind one URL.

    with launch(load_serving_recipe("cpu-tiny-dp2")) as server:    # launch() hands cluster recipes here
        print(server.url)                                          # node0's API (dp), or the proxy's (pd)

A `dp` recipe starts a data-parallel group the way a multi-node deployment does (vLLM's `--data-parallel-*`
flags; every node but the master `--headless`); a `pd` recipe starts a prefill and a decode server joined by
a KV connector and a proxy in front (`workbench.serving.pd_proxy`). Each node is planned with the one
launcher (`server.plan_launch`: the recipe's flags and environment, the node's own on top) and runs
`python -m workbench.serving.vllm_serve`, i.e. `vllm serve` itself.

Before anything starts, the planned nodes are checked against each other as node bundles by the cluster
check (`workbench.cluster.api`): a mismatched variable, a taken port, a wrong rank is refused here, naming
the flag, and no process is started. The lifecycle is the single server's: every node is guarded by the
orphan reaper, a failed start stops every group, a launched cluster stops on `stop()`, and inside the engine
pool the cluster is pooled as one configuration (its record lists every node's group).
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from workbench.errors import WorkbenchError
from workbench.recipes import ServingRecipe, stable_hash
from workbench.recipes.cluster import ClusterMode, ClusterNode
from workbench.serving.client import healthy, served_model
from workbench.serving.crash import ServerFailure, classify, start_timeout
from workbench.serving.launch_plan import (
    API_SERVER_MODULE,
    HOST,
    IN_PROCESS_WORKER_VAR,
    LaunchPlan,
    free_port,
    idle_budget,
    plan_launch,
    server_environ,
)
from workbench.serving.pool import EnginePool, PoolRecord, active_pool
from workbench.serving.processes import stop_process_group
from workbench.serving.reaper import OrphanReaper
from workbench.serving.starts import record_lease, record_start
from workbench.settings import run_dir, utc_stamp

SERVE_MODULE = "workbench.serving.vllm_serve"
POLL_S = 0.5
PROXY_MODULE = "workbench.serving.pd_proxy"


@dataclass(frozen=True)
class NodePlan:
    name: str
    role: str  # master | follower | prefill | decode | proxy
    plan: LaunchPlan


@dataclass(frozen=True)
class ClusterPlan:
    recipe: ServingRecipe
    nodes: tuple[NodePlan, ...]  # serving nodes first, the proxy (pd) last
    fingerprint: str
    storage: Path | None = None  # the KV connector's shared folder (pd)

    @property
    def front(self) -> NodePlan:
        """The node whose URL is the cluster's: the dp master, or the pd proxy."""
        return next(n for n in self.nodes if n.role in ("master", "proxy"))

    @property
    def engines(self) -> tuple[NodePlan, ...]:
        return tuple(n for n in self.nodes if n.role != "proxy")


def _node_plan(recipe: ServingRecipe, node: ClusterNode, role: str, args: tuple[str, ...], **launch) -> NodePlan:
    """One node: the recipe's server with the node's environment and flags on top, run through `vllm serve`."""
    node_recipe = recipe.with_overrides(cluster=None, env=dict(node.env))
    extra_args = (*args, *node.args, *launch.pop("extra_args", ()))
    plan = plan_launch(node_recipe, extra_args=extra_args, **launch)
    argv = tuple(SERVE_MODULE if a == API_SERVER_MODULE else a for a in plan.argv)
    env = tuple((k, v) for k, v in plan.env if k != IN_PROCESS_WORKER_VAR)  # a node's engine runs in its own process
    log = plan.log_path.with_name(f"{recipe.name}-{node.name}-{utc_stamp()}-{plan.port}.log")
    return NodePlan(
        node.name,
        role,
        dataclasses.replace(plan, recipe_name=f"{recipe.name}:{node.name}", argv=argv, env=env, log_path=log),
    )


def _dp_nodes(recipe: ServingRecipe, launch: dict) -> tuple[list[NodePlan], None]:
    spec = recipe.cluster
    assert spec is not None
    rpc_port = spec.rpc_port or free_port()
    common = (
        "--data-parallel-size",
        str(len(spec.nodes)),
        "--data-parallel-size-local",
        "1",
        "--data-parallel-address",
        spec.address,
        "--data-parallel-rpc-port",
        str(rpc_port),
    )
    nodes = []
    for rank, node in enumerate(spec.nodes):
        own = ("--api-server-count", "1") if rank == 0 else ("--headless", "--data-parallel-start-rank", str(rank))
        nodes.append(_node_plan(recipe, node, "master" if rank == 0 else "follower", (*common, *own), **dict(launch)))
    return nodes, None


def kv_transfer_config(connector: str, role: str, storage: Path) -> str:
    """vLLM's --kv-transfer-config for one side: prefill produces, decode consumes, both at `storage`."""
    import json

    kv_role = "kv_producer" if role == "prefill" else "kv_consumer"
    extra = {"shared_storage_path": str(storage)}
    return json.dumps(
        {"kv_connector": connector, "kv_role": kv_role, "kv_connector_extra_config": extra}, separators=(",", ":")
    )


def _pd_nodes(recipe: ServingRecipe, launch: dict) -> tuple[list[NodePlan], Path]:
    spec = recipe.cluster
    assert spec is not None
    # ExampleConnector's folder: the recipe's, else one per start beside the logs (made when the nodes start)
    logs = launch.get("log_dir") or run_dir("server-logs")
    storage = Path(spec.shared_storage or Path(logs) / f"{recipe.name}-kv-{utc_stamp()}").resolve()
    nodes = []
    for role in ("prefill", "decode"):
        args = ("--kv-transfer-config", kv_transfer_config(spec.kv_connector, role, storage))
        nodes.append(_node_plan(recipe, spec.node(role), role, args, **dict(launch)))
    port = free_port()
    argv = (
        sys.executable,
        "-m",
        PROXY_MODULE,
        "--prefill",
        nodes[0].plan.url,
        "--decode",
        nodes[1].plan.url,
        "--host",
        HOST,
        "--port",
        str(port),
    )
    log = nodes[0].plan.log_path.with_name(f"{recipe.name}-proxy-{utc_stamp()}-{port}.log")
    proxy = LaunchPlan(
        f"{recipe.name}:proxy", argv, (("PYTHONUNBUFFERED", "1"),), HOST, port, log, recipe.startup_timeout_s
    )
    return [*nodes, NodePlan("proxy", "proxy", proxy)], storage


def plan_cluster(
    recipe: ServingRecipe,
    *,
    extra_env: Mapping[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
    log_dir: Path | None = None,
    startup_timeout_s: float | None = None,
) -> ClusterPlan:
    """Every node's command and environment (nothing starts)."""
    if recipe.cluster is None:
        raise WorkbenchError(f"recipe {recipe.name} has no cluster: section; launch it as a single server")
    launch = {
        "extra_env": extra_env,
        "extra_args": extra_args,
        "log_dir": log_dir,
        "startup_timeout_s": startup_timeout_s,
    }
    dp = recipe.cluster.mode is ClusterMode.DP
    nodes, storage = _dp_nodes(recipe, launch) if dp else _pd_nodes(recipe, launch)
    identity = {"cluster": recipe.identity(), "env": dict(extra_env or {}), "args": list(extra_args)}
    return ClusterPlan(recipe, tuple(nodes), stable_hash(identity)[:16], storage)


def _engines(cluster: ClusterPlan) -> list[tuple[str, tuple[str, ...], dict[str, str]]]:
    return [(n.name, n.plan.argv, server_environ(n.plan.env)) for n in cluster.engines]


def check_plan(cluster: ClusterPlan):
    """The cluster check over the planned nodes (as node bundles); returns the check's result."""
    from workbench.cluster.api import check_planned_nodes

    return check_planned_nodes(_engines(cluster))


def cluster_bundles(recipe: ServingRecipe, **launch):
    """The node bundles a cluster recipe's nodes would have, planned on this machine (nothing starts)."""
    from workbench.cluster.api import planned_bundles

    return planned_bundles(_engines(plan_cluster(recipe, **launch)))


def check_cluster_recipe(recipe: ServingRecipe, **launch):
    """What `check --cluster` says about a cluster recipe's nodes before they start (launch refuses on an error)."""
    return check_plan(plan_cluster(recipe, **launch))


def refuse_inconsistent(cluster: ClusterPlan) -> None:
    """Raise before any start when the cluster check finds an error among the planned nodes."""
    result = check_plan(cluster)
    if result.failed:
        errors = [f for f in result.findings if f.severity.value == "error"]
        lines = "\n".join(f"  {f.node}: {f.setting}: {f.message}; fix: {f.fix}" for f in errors)
        raise WorkbenchError(
            f"cluster recipe {cluster.recipe.name}: refused before start ({len(errors)} errors):\n{lines}"
        )


# -- running ---------------------------------------------------------------------------------------


def _spawn(plan: LaunchPlan, marks: Mapping[str, str]) -> subprocess.Popen:
    plan.log_path.parent.mkdir(parents=True, exist_ok=True)
    with plan.log_path.open("w") as log:
        log.write(f"# ascend-workbench launch: {plan.command_line()}\n")
        log.flush()
        return subprocess.Popen(
            plan.argv,
            env={**server_environ(plan.env), **marks},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _wait(members: list[tuple[NodePlan, subprocess.Popen]], urls: list[str], timeout_s: float) -> None:
    """Until every URL answers /health; a node that exits, or the time running out, is a ServerFailure."""
    began = time.monotonic()
    with httpx.Client() as client:
        while not all(healthy(u, client=client) for u in urls):
            for node, process in members:
                code = process.poll()
                if code is not None:
                    raise ServerFailure(
                        classify(node.plan.log_path.read_text(errors="replace"), code, log_path=node.plan.log_path)
                    )
            if time.monotonic() - began > timeout_s:
                node = members[0][0]
                raise ServerFailure(
                    start_timeout(node.plan.log_path.read_text(errors="replace"), timeout_s, node.plan.log_path)
                )
            time.sleep(POLL_S)


@dataclass(frozen=True)
class ClusterStart:
    """A started (or leased) cluster, for `server.launch` to wrap in its `Server`: the front's URL, the front's
    process and every other node's (each leading its own group) when launched, the pool's lease when leased."""

    url: str
    model: str
    plan: LaunchPlan
    ready_s: float | None
    process: subprocess.Popen | None = None
    companions: tuple[subprocess.Popen, ...] = ()
    guard: OrphanReaper | None = None
    lease: tuple[EnginePool, PoolRecord] | None = None


def start_cluster(cluster: ClusterPlan, *, progress: bool = True, pool: EnginePool | None = None) -> ClusterStart:
    """Start every node (the engines, then the proxy of a pd cluster), wait for the front; on any failure every
    group is already stopped."""
    guard = OrphanReaper() if pool is None else None
    marks = guard.env() if guard is not None else pool.guard_env()  # type: ignore[union-attr]
    began, members = time.monotonic(), []
    timeout = cluster.front.plan.startup_timeout_s
    try:
        if cluster.storage is not None:
            cluster.storage.mkdir(parents=True, exist_ok=True)
        engines = [(n, _spawn(n.plan, marks)) for n in cluster.engines]
        members += engines
        _wait(engines, [n.plan.url for n in cluster.engines if n.role != "follower"], timeout)
        if cluster.front.role == "proxy":
            members.append((cluster.front, _spawn(cluster.front.plan, marks)))
            _wait(members, [cluster.front.plan.url], 60.0)
        model = served_model(cluster.front.plan.url)
    except BaseException:
        for _, process in reversed(members):
            stop_process_group(process)
        if guard is not None:
            guard.release()
        raise
    ready_s = round(time.monotonic() - began, 2)
    record_start(cluster.recipe.name, cluster.fingerprint, ready_s, cluster.recipe.engine.tensor_parallel_size, False)
    front = next(p for n, p in members if n is cluster.front)
    others = tuple(p for n, p in members if n is not cluster.front)
    if pool is not None:
        record = PoolRecord(
            cluster.fingerprint,
            cluster.recipe.name,
            cluster.front.plan.url,
            model,
            front.pid,
            ready_s,
            str(cluster.front.plan.log_path),
            extra_pids=tuple(p.pid for p in others),
        )
        pool.add(record)
        return ClusterStart(record.url, model, cluster.front.plan, ready_s, lease=(pool, pool.take(record)))
    return ClusterStart(cluster.front.plan.url, model, cluster.front.plan, ready_s, front, others, guard)


def launch_cluster(recipe: ServingRecipe, *, progress: bool = True, pooled: bool = True, **launch) -> ClusterStart:
    """`launch()` for a cluster recipe: checked, then started (or leased from the engine pool)."""
    cluster = plan_cluster(recipe, **launch)
    pool = active_pool() if pooled else None
    if pool is None:
        refuse_inconsistent(cluster)
        return start_cluster(cluster, progress=progress)
    pool.make_room(keep=cluster.fingerprint, others=idle_budget(recipe))
    with pool.holding(cluster.fingerprint) as record:
        if record is not None and healthy(record.url):
            record_lease(record)
            plan = dataclasses.replace(cluster.front.plan, log_path=Path(record.log_path))
            return ClusterStart(record.url, record.model, plan, record.ready_s, lease=(pool, pool.take(record)))
        refuse_inconsistent(cluster)
        return start_cluster(cluster, progress=progress, pool=pool)


__all__ = [
    "ClusterPlan",
    "ClusterStart",
    "NodePlan",
    "check_cluster_recipe",
    "check_plan",
    "cluster_bundles",
    "launch_cluster",
    "plan_cluster",
    "refuse_inconsistent",
    "start_cluster",
]
