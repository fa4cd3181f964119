"""Parallel and Ray sweeps on real vLLM CPU servers: two groups of one core each, the tiny model twice.

One spec (two server configurations, one short workload) is run serially as the reference, then with
`--parallel 2` (two groups of one core, both servers at once) and through a local Ray cluster
(`ray.init()` here, with two units of the custom group resource): the results must equal the serial
ones in content (ids, params, statuses, request and token counts; timings differ by nature) and
record that the points ran side by side. Then the failure paths: the driver SIGKILLed mid-sweep and
resumed loses no finished point; on Ray, a task's server killed mid-configuration is recorded as a
failed point, a killed Ray worker's remaining point is retried in a new task, and nothing is left
running. Wall times are printed (the speed comparison itself is benchmarks/bench_parallel_sweep.py).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.integration.conftest import processes_with_marker
from workbench.sweep import PointStatus, ResultStore, build_report, expand, load_sweep_spec, run_sweep
from workbench.sweep.ray_executor import CPU_GROUP_RESOURCE
from workbench.sweep.runner import Execution

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two device groups need two cores"),
]

NUM_PROMPTS = 4
OUTPUT_LEN = 4


def write_spec(tmp_path: Path, name: str, **changes) -> Path:
    data = {
        "name": name,
        "base": str(REPO_ROOT / "recipes" / "serving" / "cpu-tiny.yaml"),
        "grid": {"max_num_seqs": [2, 4], "kv_cache_memory_bytes": ["256MiB"]},
        "workload": {
            "input_len": 16,
            "output_len": OUTPUT_LEN,
            "num_prompts": NUM_PROMPTS,
            "concurrency": [2],
            "warmup_requests": 1,
        },
        "repeats": 1,
        "slo": {"p99_ttft_ms": 60000, "p99_e2el_ms": 120000},
        **changes,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def content(results) -> list[tuple]:
    """What must not depend on how the sweep ran: ids, params, statuses, request and token counts."""
    return sorted(
        (
            r.point_id,
            r.server_key,
            tuple(sorted(r.params.items())),
            r.repeat,
            r.status.value,
            r.summary.get("completed"),
            r.summary.get("failed"),
            r.summary.get("total_output_tokens"),
        )
        for r in results
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
def serial(spec_path, server_env, tmp_path_factory):
    outcome = run_sweep(
        load_sweep_spec(spec_path), tmp_path_factory.mktemp("serial"), progress=False, extra_env=server_env
    )
    assert outcome.missing == () and all(r.status is PointStatus.OK for r in outcome.results)
    print(f"\nserial: {outcome.wall_s:.1f} s")
    return outcome


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
    placements = [r.placement for r in results]
    assert sorted(p["group"] for p in placements) == ["cpu:0", "cpu:1"]
    (a0, a1), (b0, b1) = (p["window"] for p in placements)
    assert max(a0, b0) < min(a1, b1), "the two servers were expected to run at the same time"


def test_two_groups_of_one_core_match_the_serial_sweep(spec_path, serial, server_env, tmp_path, record_property):
    spec = load_sweep_spec(spec_path)
    outcome = run_sweep(spec, tmp_path / "par", progress=False, extra_env=server_env, execution=Execution(parallel=2))
    assert outcome.missing == ()
    assert content(outcome.results) == content(serial.results)
    assert {r.placement["mode"] for r in outcome.results} == {"parallel"}
    side_by_side_ok(outcome.results)
    for r in outcome.results:
        assert r.summary["output_throughput"] > 0 and r.timings["server_start_s"] > 0
    report = build_report(spec, outcome.results)
    assert "2 of 2 points ran side by side" in report.interference_text()
    assert wait_gone(server_env["ASCEND_WORKBENCH_TEST_SESSION"]) == []
    record_property("parallel_wall_s", outcome.wall_s)
    print(
        f"\nparallel 2: {outcome.wall_s:.1f} s (serial {serial.wall_s:.1f} s, "
        f"ratio {outcome.wall_s / serial.wall_s:.2f})"
    )


def test_a_local_ray_cluster_runs_the_same_spec(spec_path, serial, server_env, ray_session, tmp_path, record_property):
    outcome = run_sweep(
        load_sweep_spec(spec_path),
        tmp_path / "ray",
        progress=False,
        extra_env=server_env,
        execution=Execution(ray="local"),
    )
    assert outcome.missing == ()
    assert content(outcome.results) == content(serial.results)
    assert {r.placement["mode"] for r in outcome.results} == {"ray"}
    assert all(r.placement["node"] and r.placement["attempt"] == 1 for r in outcome.results)
    side_by_side_ok(outcome.results)
    assert wait_gone(server_env["ASCEND_WORKBENCH_TEST_SESSION"]) == []
    record_property("ray_wall_s", outcome.wall_s)
    print(f"\nray (cluster already up): {outcome.wall_s:.1f} s")


def test_on_ray_a_killed_server_is_recorded_and_a_killed_worker_retried(server_env, ray_session, tmp_path):
    # two configurations of two points each; the load is long enough (16 sequential requests of 32
    # tokens) that a kill sent when a configuration's first point arrives lands during its second
    spec = load_sweep_spec(
        write_spec(
            tmp_path,
            "kill",
            workload={"input_len": 16, "output_len": 32, "num_prompts": 16, "concurrency": [1], "warmup_requests": 1},
            repeats=2,
        )
    )
    points = expand(spec)
    victim_server, victim_worker = points[0].server_key, points[2].server_key
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

    outcome = run_sweep(
        spec,
        tmp_path / "out",
        progress=False,
        extra_env=server_env,
        on_point=kill_on_first_point,
        execution=Execution(ray="local", retries=1),
    )
    by_id = {r.point_id: r for r in outcome.results}
    first, second = by_id[points[0].point_id], by_id[points[1].point_id]
    assert first.status is PointStatus.OK and second.status is PointStatus.LOAD_FAILED
    assert second.crash and second.crash["kind"]  # the dead server's crash class, with its log
    retried_first, retried = by_id[points[2].point_id], by_id[points[3].point_id]
    assert retried_first.placement["attempt"] == 1
    assert retried.status is PointStatus.OK and retried.placement["attempt"] == 2  # a new task measured it
    assert retried.placement["worker_pid"] != retried_first.placement["worker_pid"]
    assert outcome.missing == ()
    assert set(killed) == {victim_server, victim_worker}
    assert wait_gone(server_env["ASCEND_WORKBENCH_TEST_SESSION"]) == []  # no server left on the node


def test_a_sigkilled_parallel_driver_resumes_without_losing_a_point(server_env, tmp_path):
    spec_path = write_spec(tmp_path, "resume", repeats=2)  # 4 points, 2 configurations on 2 groups
    out = tmp_path / "out"
    store = out / "results.jsonl"

    def cli() -> subprocess.Popen:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "workbench.cli",
                "sweep",
                "--spec",
                str(spec_path),
                "--out",
                str(out),
                "--parallel",
                "2",
                "--no-progress",
            ],
            cwd=REPO_ROOT,
            env={**os.environ, **server_env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    first = cli()
    deadline = time.monotonic() + 600
    while not store.exists() or store.read_bytes().count(b"\n") < 1:
        assert first.poll() is None, first.stdout.read()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    before = store.read_bytes()[: store.read_bytes().rfind(b"\n") + 1]
    kept = ResultStore(store).read()
    assert 1 <= len(kept) < 4
    assert wait_gone(server_env["ASCEND_WORKBENCH_TEST_SESSION"]) == []  # both groups' servers went with it

    second = cli()
    output, _ = second.communicate(timeout=600)
    assert second.returncode == 0, output
    assert f"{4 - len(kept)} measured, {len(kept)} already stored, 0 missing" in output
    assert store.read_bytes().startswith(before)  # finished points neither lost nor rewritten
    results = ResultStore(store).read()
    assert sorted(r.point_id for r in results) == sorted(p.point_id for p in expand(load_sweep_spec(spec_path)))
    assert all(r.status is PointStatus.OK for r in results)
