"""The parallel sweep's spec (sweep_support) through a local Ray cluster, with one kill of each kind.

`ray.init()` here with two units of the custom group resource. One configuration's server is killed on
its first point (its second point is recorded as failed, with the crash class) and the other's Ray
worker is killed (its remaining point is retried in a new task); every point not killed is complete with
the content the spec implies, and nothing is left running on the node.
"""

from __future__ import annotations

import logging
import os
import signal
import time

import pytest

from tests.integration.sweep_support import (
    MARKS,
    cluster_processes,
    content,
    expected_content,
    new_sweep,
    side_by_side_ok,
    wait_gone,
)
from workbench.sweep.ray_executor import (
    CPU_GROUP_RESOURCE,
    LOCAL_SYSTEM_CONFIG,
    NORMAL_PRIORITY,
    priority_env,
    priority_probe,
)
from workbench.sweep.runner import Execution, run_sweep
from workbench.sweep.spec import expand
from workbench.sweep.store import PointStatus

pytestmark = MARKS


@pytest.fixture(scope="module")
def ray_session():
    """A local Ray cluster started here, with two units of the group resource; stopped and checked after."""
    import ray

    before = cluster_processes()
    ray.init(
        resources={CPU_GROUP_RESOURCE: 2},
        include_dashboard=False,
        logging_level=logging.WARNING,
        # Ray's default worker priority (+15), unlike `--ray local`'s own cluster: the tasks must restore it
        _system_config={"agent_register_timeout_ms": LOCAL_SYSTEM_CONFIG["agent_register_timeout_ms"]},
    )
    try:
        yield ray
    finally:
        ray.shutdown()
        deadline = time.monotonic() + 30
        while cluster_processes() - before and time.monotonic() < deadline:
            time.sleep(0.5)
        assert cluster_processes() - before == set(), "a raylet or gcs_server outlived ray.shutdown()"


def test_on_ray_the_spec_runs_a_killed_server_is_recorded_and_a_killed_worker_retried(
    server_env, ray_session, tmp_path
):
    spec, env = new_sweep(tmp_path, server_env)
    points = expand(spec)
    victim_server, victim_worker = points[0].server_key, points[2].server_key
    assert victim_server != victim_worker
    killed: dict[str, list[int]] = {}

    def kill_on_first_point(result):
        if result.server_key in killed:
            return
        if result.server_key == victim_server:
            killed[victim_server] = list(result.server_pids)
            for pid in result.server_pids:
                os.kill(pid, signal.SIGKILL)
        elif result.server_key == victim_worker:
            killed[victim_worker] = [result.placement["worker_pid"], *result.server_pids]
            os.kill(result.placement["worker_pid"], signal.SIGKILL)

    outcome = run_sweep(spec, tmp_path / "out", progress=False, extra_env=env,
                        on_point=kill_on_first_point, execution=Execution(ray="local", retries=1))  # fmt: skip
    assert outcome.missing == ()
    assert set(killed) == {victim_server, victim_worker}
    by_id = {r.point_id: r for r in outcome.results}
    first, second = by_id[points[0].point_id], by_id[points[1].point_id]
    assert first.status is PointStatus.OK and second.status is PointStatus.LOAD_FAILED
    assert second.crash and second.crash["kind"]  # the dead server's crash class, with its log
    retried_first, retried = by_id[points[2].point_id], by_id[points[3].point_id]
    assert retried_first.placement["attempt"] == 1
    assert retried.status is PointStatus.OK and retried.placement["attempt"] == 2  # a new task measured it
    assert retried.placement["worker_pid"] != retried_first.placement["worker_pid"]
    assert {r.placement["mode"] for r in outcome.results} == {"ray"}
    assert all(r.placement["node"] for r in outcome.results)
    # Ray starts workers at niceness +15 here; the tasks asked for the raylet's (this process's) priority
    assert {r.placement["niceness"] for r in outcome.results} == {os.nice(0)}
    # the Ray path measures the same spec: every point that was not killed is complete
    untouched = [r for r in outcome.results if r.point_id != second.point_id]
    assert content(untouched) == [c for c in expected_content(spec) if c[0] != second.point_id]
    side_by_side_ok([first, retried_first])
    assert wait_gone(env) == []  # no server left on the node
    print(f"\nray (cluster already up), with one kill of each kind: {outcome.wall_s:.1f} s")


def test_the_priority_probe_sees_workers_lowered_and_their_priority_restored(ray_session):
    """On a cluster with Ray's default worker priority the sweep's probe finds workers below the raylet,
    so its tasks carry NORMAL_PRIORITY, under which the probe finds them level. (A cluster started as
    `--ray local` starts one gives no such answer: its tasks then use the workers Ray prestarted; were
    that config ignored, the probe would say so and the tasks would fall back to this runtime_env.)"""
    ray = ray_session
    assert priority_env(ray) == NORMAL_PRIORITY
    probe = ray.remote(priority_probe()).options(num_cpus=0, runtime_env=NORMAL_PRIORITY)
    assert ray.get(probe.remote(), timeout=120) is False
