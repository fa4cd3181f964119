"""`--parallel` without servers: concurrent producers, one writer, groups never shared, errors, resume.

The measurer is the boundary to real vLLM servers (tests/integration/test_parallel_sweep.py runs real
ones); here a scripted one stands in for it, recording which thread and group measured what and when,
so the runner's guarantees are checked exactly: every point stored once, by the driver thread only,
no device group used by two configurations at once, a worker's error raised in the driver after the
other workers' finished points are stored, and a rerun measuring only what is missing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from workbench.recipes import DeviceKind
from workbench.serving.device_groups import DeviceGroup, make_pool
from workbench.sweep.runner import Execution, SweepRunner
from workbench.sweep.spec import expand, parse_sweep_spec
from workbench.sweep.store import PointResult, PointStatus


def spec(tmp_path: Path, seqs=(2, 4, 8)):
    data = {
        "name": "par",
        "base": str(REPO_ROOT / "recipes/serving/cpu-tiny.yaml"),
        "grid": {"max_num_seqs": list(seqs)},
        "workload": {"input_len": 8, "output_len": 2, "num_prompts": 2, "concurrency": [1, 2]},
    }
    return parse_sweep_spec(data, tmp_path / "par.yaml")


class ScriptedMeasurer:
    """Yields a result per point after `delay_s`; fails a configuration when told; records everything."""

    def __init__(self, delay_s: float = 0.05, fail_config: str | None = None):
        self.delay_s, self.fail_config = delay_s, fail_config
        self.lock = threading.Lock()
        self.live: dict[str, tuple[int, ...]] = {}  # server_key -> devices of its group, while its "server" runs
        self.max_live = 0
        self.shared_device = False
        self.measured: list[tuple[str, str]] = []  # (point id, group id)
        self.closed: list[str] = []

    def results(self, points, group: DeviceGroup | None = None, status=None) -> Iterator[PointResult]:
        key = points[0].server_key
        with self.lock:
            held = {d for devices in self.live.values() for d in devices}
            self.shared_device |= bool(held & set(group.devices))
            self.live[key] = group.devices
            self.max_live = max(self.max_live, len(self.live))
        try:
            for index, point in enumerate(points):
                began = time.time()
                time.sleep(self.delay_s)
                if key == self.fail_config and index == 1:
                    raise RuntimeError(f"server of {key} died")
                with self.lock:
                    self.measured.append((point.point_id, group.group_id))
                yield PointResult(
                    point.point_id,
                    "par",
                    key,
                    point.params_dict,
                    {},
                    point.repeat,
                    PointStatus.OK,
                    placement={"mode": "parallel", **group.describe(), "window": [began, time.time()]},
                )
        finally:
            with self.lock:
                del self.live[key]
                self.closed.append(key)


def runner(tmp_path: Path, measurer: ScriptedMeasurer, **kwargs) -> SweepRunner:
    run = SweepRunner(spec(tmp_path), tmp_path / "out", progress=False, execution=Execution(parallel=2), **kwargs)
    run.measurer = measurer
    run._pool = lambda kind: make_pool(DeviceKind.CPU, 2, cores=(0, 1))
    return run


def writers_of(run: SweepRunner) -> list[str]:
    """Wrap the store's append to record which thread writes."""
    names: list[str] = []
    append = run.store.append

    def recording(result):
        names.append(threading.current_thread().name)
        append(result)

    run.store.append = recording
    return names


def test_concurrent_configurations_one_writer_every_point_once(tmp_path):
    measurer = ScriptedMeasurer()
    run = runner(tmp_path, measurer)
    writers = writers_of(run)
    points = expand(run.spec)
    results = run.run_points(points)
    assert [r.point_id for r in results] == [p.point_id for p in points]  # returned in sweep order
    stored = [r.point_id for r in run.store.read()]
    assert sorted(stored) == sorted(p.point_id for p in points) and len(stored) == len(set(stored)) == 6
    assert set(writers) == {threading.current_thread().name}  # the driver thread wrote every line
    assert measurer.max_live == 2 and not measurer.shared_device  # two at once, never one device twice
    by_point = dict(measurer.measured)
    for key in {p.server_key for p in points}:  # a configuration stays in one group
        assert len({by_point[p.point_id] for p in points if p.server_key == key}) == 1
    assert sorted(measurer.closed) == sorted({p.server_key for p in points})

    again = ScriptedMeasurer()
    run2 = runner(tmp_path, again)
    assert [r.point_id for r in run2.run_points(points)] == [p.point_id for p in points]
    assert again.measured == []  # resumed: nothing measured twice


def test_a_worker_error_is_raised_after_the_others_finished_points_are_stored(tmp_path):
    points = expand(spec(tmp_path))
    failing = points[2].server_key  # the second configuration dies after its first point
    measurer = ScriptedMeasurer(fail_config=failing)
    run = runner(tmp_path, measurer)
    with pytest.raises(RuntimeError, match=f"server of {failing} died"):
        run.run_points(points)
    assert measurer.live == {}  # every configuration's server was stopped
    stored = {r.point_id for r in run.store.read()}
    assert {pid for pid, _ in measurer.measured} == stored  # every finished point was kept
    assert points[2].point_id in stored and points[3].point_id not in stored

    healthy = ScriptedMeasurer()
    rerun = runner(tmp_path, healthy)
    rerun.run_points(points)
    assert {pid for pid, _ in healthy.measured} == {p.point_id for p in points} - stored
    assert len(rerun.store.read()) == len(points)


def test_a_consumer_that_stops_early_stops_every_worker(tmp_path):
    measurer = ScriptedMeasurer(delay_s=0.2)

    def stop_at_first(result):
        raise KeyError("stop")

    run = runner(tmp_path, measurer, on_point=stop_at_first)
    with pytest.raises(KeyError):
        run.run_points(expand(run.spec))
    assert measurer.live == {}  # workers ended at their next point boundary, their servers stopped
    assert len(run.store.read()) == 1  # the point handed to on_point was stored first
