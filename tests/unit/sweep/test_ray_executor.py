"""The Ray path without a cluster: the resources a task asks for, the feasibility check, the node-local group lock.

A real local Ray cluster runs in tests/integration/test_parallel_sweep.py.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile

import pytest

from workbench.errors import WorkbenchError
from workbench.recipes import Device
from workbench.sweep.ray_executor import CPU_GROUP_RESOURCE, _lock_cpu_group, check_cluster, task_options


class Nodes:
    """The one call check_cluster makes on the ray module: nodes() -> list of node dicts."""

    def __init__(self, *resources: dict, alive=True):
        self._nodes = [{"NodeID": str(i), "Alive": alive, "Resources": r} for i, r in enumerate(resources)]

    def nodes(self):
        return self._nodes


def test_task_options_request_one_group_as_a_ray_resource():
    assert task_options(Device.NPU, 2) == {"resources": {"NPU": 2}, "num_cpus": 0}
    assert task_options(Device.CUDA, 4) == {"num_gpus": 4, "num_cpus": 0}
    assert task_options(Device.CPU, 2) == {"resources": {CPU_GROUP_RESOURCE: 1}, "num_cpus": 0}  # cores in-group


def test_check_cluster_refuses_what_no_live_node_offers():
    check_cluster(Nodes({"NPU": 8.0}, {"NPU": 4.0}), Device.NPU, [1, 8], "head:6379")
    with pytest.raises(WorkbenchError, match=r"no live node offers 8 NPU \(largest offer: 4 on 2 nodes\)"):
        check_cluster(Nodes({"NPU": 4.0}, {"NPU": 2.0}), Device.NPU, [8], "head:6379")
    with pytest.raises(WorkbenchError, match="largest offer: 0 on 0 nodes"):
        check_cluster(Nodes({"NPU": 8.0}, alive=False), Device.NPU, [1], "head:6379")
    with pytest.raises(WorkbenchError, match=f"ray start --resources .*{CPU_GROUP_RESOURCE}"):
        check_cluster(Nodes({"CPU": 64.0}), Device.CPU, [1], "head:6379")


HOLD = """
import sys, tempfile, time
tempfile.tempdir = sys.argv[1]
from workbench.sweep.ray_executor import _lock_cpu_group
print(_lock_cpu_group(2)[0], flush=True)
time.sleep(60)
"""


def test_cpu_group_locks_are_exclusive_across_processes_and_freed_by_death(tmp_path, monkeypatch):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "0"  # the other process holds group 0
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        index, fd = _lock_cpu_group(2)
        assert index == 1
        with pytest.raises(WorkbenchError, match="all 2 CPU groups of this node stayed locked"):
            _lock_cpu_group(2, wait_s=0.3)
    finally:
        holder.kill()
        holder.wait()
    assert _lock_cpu_group(2, wait_s=5)[0] == 0  # the killed holder's lock went with it
