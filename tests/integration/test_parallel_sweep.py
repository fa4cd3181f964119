"""Parallel and Ray sweeps on real vLLM CPU servers: two groups of one core each, the tiny model twice.

One spec (two server configurations, two points each), two runs, each exercising several promises at
once to keep server starts few (about 75 s each here). What a point's result must hold does not depend on
how the sweep ran, so it is derived from the spec itself (ids, params, statuses, request and token
counts; timings differ by nature) rather than from a serial run:
  - `--parallel 2` (two groups of one core, both servers at once): every point complete, the points
    recorded as run side by side, and a second run over the same folder resumes with nothing to measure;
  - the same spec through a local Ray cluster (`ray.init()` here, with two units of the custom group
    resource), where one configuration's server is killed on its first point (its second point is
    recorded as failed, with the crash class) and the other's Ray worker is killed (its remaining
    point is retried in a new task); every point not killed is complete, and nothing is left running
    on the node.
A driver SIGKILLed mid-sweep loses no finished point: the store and resume logic are the same in every
mode, and test_sweep.py kills a real sweep's driver and resumes it. Wall times are printed; the speed
comparison with a serial sweep is benchmarks/bench_parallel_sweep.py.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.integration.conftest import processes_with_marker
from workbench.sweep import PointStatus, build_report, expand, load_sweep_spec, run_sweep
from workbench.sweep.ray_executor import CPU_GROUP_RESOURCE
from workbench.sweep.runner import Execution

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two device groups need two cores"),
]

# 16 one-at-a-time requests of 32 tokens: a point lasts long enough that a kill sent when a
# configuration's first point arrives lands during its second
WORKLOAD = {"input_len": 16, "output_len": 32, "num_prompts": 16, "concurrency": [1], "warmup_requests": 1}


def write_spec(tmp_path: Path, name: str, **changes) -> Path:
    data = {
        "name": name,
        "base": str(REPO_ROOT / "recipes" / "serving" / "cpu-tiny.yaml"),
        "grid": {"max_num_seqs": [2, 4], "kv_cache_memory_bytes": ["256MiB"]},
        "workload": WORKLOAD,
        "repeats": 2,
        "slo": {"p99_ttft_ms": 60000, "p99_e2el_ms": 120000},
        **changes,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _row(point_id, server_key, params: dict, repeat, status: str, completed, failed, tokens) -> tuple:
    return (point_id, server_key, tuple(sorted(params.items())), repeat, status, completed, failed, tokens)


def content(results) -> list[tuple]:
    """What must not depend on how the sweep ran: ids, params, statuses, request and token counts."""
    return sorted(
        _row(r.point_id, r.server_key, r.params, r.repeat, r.status.value, r.summary.get("completed"),
             r.summary.get("failed"), r.summary.get("total_output_tokens"))
        for r in results
    )  # fmt: skip


def expected_content(spec) -> list[tuple]:
    """content() of a sweep whose every point completed all its requests, from the spec alone."""
    requests, tokens = WORKLOAD["num_prompts"], WORKLOAD["num_prompts"] * WORKLOAD["output_len"]
    return sorted(
        _row(p.point_id, p.server_key, p.params_dict, p.repeat, PointStatus.OK.value, requests, 0, tokens)
        for p in expand(spec)
    )


def cluster_processes() -> set[int]:
    """Live raylet / gcs_server processes on this machine."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            name = (entry / "comm").read_text().strip() if entry.name.isdigit() else ""
        except OSError:
            continue
        if name in ("raylet", "gcs_server"):
            found.add(int(entry.name))
    return found


def wait_gone(marker: str, timeout_s: float = 40.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while processes_with_marker(marker) and time.monotonic() < deadline:
        time.sleep(0.3)
    return processes_with_marker(marker)


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory) -> Path:
    return write_spec(tmp_path_factory.mktemp("spec"), "par")


@pytest.fixture(scope="module")
def ray_session():
    """A local Ray cluster started here, with two units of the group resource; stopped and checked after."""
    import ray

    before = cluster_processes()
    ray.init(
        resources={CPU_GROUP_RESOURCE: 2},
        include_dashboard=False,
        logging_level=logging.WARNING,
        _system_config={"agent_register_timeout_ms": 180_000},
    )
    try:
        yield ray
    finally:
        ray.shutdown()
        deadline = time.monotonic() + 30
        while cluster_processes() - before and time.monotonic() < deadline:
            time.sleep(0.5)
        assert cluster_processes() - before == set(), "a raylet or gcs_server outlived ray.shutdown()"


def side_by_side_ok(results) -> None:
    """The two configurations ran on the two groups, and their servers were up at the same time."""
    windows = {}
    for r in results:
        windows.setdefault(r.placement["group"], r.placement["window"])
    assert sorted(windows) == ["cpu:0", "cpu:1"]
    (a0, a1), (b0, b1) = windows.values()
    assert max(a0, b0) < min(a1, b1), "the two servers were expected to run at the same time"


def test_two_groups_of_one_core_measure_every_point_and_resume(spec_path, server_env, tmp_path):
    spec = load_sweep_spec(spec_path)
    outcome = run_sweep(spec, tmp_path / "par", progress=False, extra_env=server_env, execution=Execution(parallel=2))
    assert outcome.missing == ()
    assert content(outcome.results) == expected_content(spec)
    assert {r.placement["mode"] for r in outcome.results} == {"parallel"}
    side_by_side_ok(outcome.results)
    assert all(r.summary["output_throughput"] > 0 for r in outcome.results)
    # each configuration's server started once, for its first point; its second point reused it
    assert sorted(r.timings["server_start_s"] > 0 for r in outcome.results) == [False, False, True, True]
    report = build_report(spec, outcome.results)
    assert "4 of 4 points ran side by side" in report.interference_text()
    assert wait_gone(server_env["ASCEND_WORKBENCH_TEST_SESSION"]) == []
    print(f"\nparallel 2: {outcome.wall_s:.1f} s")

    again = run_sweep(spec, tmp_path / "par", progress=False, extra_env=server_env, execution=Execution(parallel=2))
    assert again.measured == () and sorted(again.skipped) == sorted(p.point_id for p in expand(spec))
    assert content(again.results) == content(outcome.results)


def test_on_ray_the_spec_runs_a_killed_server_is_recorded_and_a_killed_worker_retried(
    spec_path, server_env, ray_session, tmp_path
):
    spec = load_sweep_spec(spec_path)
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

    outcome = run_sweep(spec, tmp_path / "out", progress=False, extra_env=server_env,
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
    # the Ray path measures the same spec: every point that was not killed is complete
    untouched = [r for r in outcome.results if r.point_id != second.point_id]
    assert content(untouched) == [c for c in expected_content(spec) if c[0] != second.point_id]
    side_by_side_ok([first, retried_first])
    assert wait_gone(server_env["ASCEND_WORKBENCH_TEST_SESSION"]) == []  # no server left on the node
    print(f"\nray (cluster already up), with one kill of each kind: {outcome.wall_s:.1f} s")
