"""The Ray path without a cluster: the resources a task asks for, the feasibility check, the node-local group lock.

A real local Ray cluster runs in tests/integration/test_ray_sweep.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest

from workbench.errors import WorkbenchError
from workbench.recipes import DeviceKind
from workbench.sweep.ray_executor import (
    CPU_GROUP_RESOURCE,
    LOCAL_SYSTEM_CONFIG,
    NORMAL_PRIORITY,
    _lock_cpu_group,
    check_cluster,
    priority_probe,
    task_options,
)


class Nodes:
    """The one call check_cluster makes on the ray module: nodes() -> list of node dicts."""

    def __init__(self, *resources: dict, alive=True):
        self._nodes = [{"NodeID": str(i), "Alive": alive, "Resources": r} for i, r in enumerate(resources)]

    def nodes(self):
        return self._nodes


def test_task_options_request_one_group_as_a_ray_resource_and_the_priority_env_when_needed():
    assert task_options(DeviceKind.NPU, 2) == {"resources": {"NPU": 2}, "num_cpus": 0}
    assert task_options(DeviceKind.CUDA, 4) == {"num_gpus": 4, "num_cpus": 0}
    assert task_options(DeviceKind.CPU, 2) == {
        "resources": {CPU_GROUP_RESOURCE: 1},
        "num_cpus": 0,
    }  # cores split in-group
    normal = {"env_vars": {"RAY_worker_niceness": "0"}}
    assert NORMAL_PRIORITY == normal
    assert task_options(DeviceKind.NPU, 2, runtime_env=normal) == {
        "resources": {"NPU": 2},
        "num_cpus": 0,
        "runtime_env": normal,
    }
    assert task_options(DeviceKind.CUDA, 1, runtime_env=normal)["runtime_env"] == normal
    assert LOCAL_SYSTEM_CONFIG["worker_niceness"] == 0  # --ray local's own cluster needs no runtime_env


CALL_PICKLED = """
import sys
import cloudpickle
sys.modules["workbench"] = None  # as on a Ray worker that never imported it: importing it would fail
print(cloudpickle.loads(sys.stdin.buffer.read())())
"""


@pytest.mark.parametrize("niceness", [0, 3])
def test_the_priority_probe_travels_without_the_workbench_and_compares_with_its_parent(niceness):
    """Ray ships the probe by value (cloudpickle), so a worker answers without importing the workbench;
    `nice -n 3` execs the child at 3 over this process, its parent."""
    import cloudpickle

    probe = cloudpickle.dumps(priority_probe())
    done = subprocess.run(
        ["nice", "-n", str(niceness), sys.executable, "-c", CALL_PICKLED], input=probe, capture_output=True, check=True
    )
    assert done.stdout.decode().strip() == str(niceness > 0)


def test_check_cluster_refuses_what_no_live_node_offers():
    check_cluster(Nodes({"NPU": 8.0}, {"NPU": 4.0}), DeviceKind.NPU, [1, 8], "head:6379")
    with pytest.raises(WorkbenchError, match=r"no live node offers 8 NPU \(largest offer: 4 on 2 nodes\)"):
        check_cluster(Nodes({"NPU": 4.0}, {"NPU": 2.0}), DeviceKind.NPU, [8], "head:6379")
    with pytest.raises(WorkbenchError, match="largest offer: 0 on 0 nodes"):
        check_cluster(Nodes({"NPU": 8.0}, alive=False), DeviceKind.NPU, [1], "head:6379")
    with pytest.raises(WorkbenchError, match=f"ray start --resources .*{CPU_GROUP_RESOURCE}"):
        check_cluster(Nodes({"CPU": 64.0}), DeviceKind.CPU, [1], "head:6379")


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


CONNECT = """
import sys
from workbench.errors import WorkbenchError
from workbench.sweep.ray_executor import ray_cluster
try:
    with ray_cluster(sys.argv[1]):
        print("connected")
except WorkbenchError as error:
    print(error)
"""


def test_an_unreachable_cluster_is_one_error_naming_the_address_and_the_token_settings():
    """Ray 2.59+ clusters started with `ray start --head` want a token, and a driver given an explicit
    address sends none unless RAY_AUTH_MODE=token: the error says so, unless the user already chose a mode.
    Each attempt runs in its own process: Ray reads its timeouts and auth mode when it is imported."""
    pytest.importorskip("ray")
    from tests.conftest import REPO_ROOT
    from workbench.serving.server import free_port

    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    quick = {
        f"RAY_{knob}": "1"
        for knob in (
            "gcs_server_port_wait_time_s",
            "gcs_rpc_server_connect_timeout_s",
            "gcs_rpc_server_reconnect_timeout_s",
            "py_gcs_connect_timeout_s",
        )
    }
    base = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"} | quick  # give up after ~4 s, not ~40
    attempts = {
        mode: subprocess.Popen([sys.executable, "-c", CONNECT, address], cwd=REPO_ROOT, text=True,
                               env=base | ({"RAY_AUTH_MODE": mode} if mode else {}),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        for mode in ("", "disabled")
    }  # fmt: skip
    said = {mode: attempt.communicate(timeout=120)[0] for mode, attempt in attempts.items()}
    for mode, text in said.items():
        assert text.startswith(f"--ray {address}: cannot connect to a Ray cluster"), text
        assert ("export RAY_AUTH_MODE=token" in text) is (mode == "")


def test_the_prompt_task_builds_what_each_configuration_task_would_build_itself(tmp_path):
    """The Ray path's prompt task (one tokenizer for every configuration) hands each task the prompts it
    would otherwise build from its own server's tokenizer: same texts, exact lengths, warm-up included."""
    import itertools
    from dataclasses import replace

    from workbench.embedded_models.catalog import prepare
    from workbench.serving.load.workload import load_tokenizer
    from workbench.sweep.measure import ConfigMeasurer, point_prompts
    from workbench.sweep.ray_executor import prompt_books
    from workbench.sweep.spec import expand, load_sweep_spec

    spec = load_sweep_spec("cpu-tiny")
    configs = [list(group) for _, group in itertools.groupby(expand(spec), key=lambda p: p.server_key)]
    measurer = ConfigMeasurer(spec, tmp_path)
    books = prompt_books(measurer, configs)
    tokenizer = load_tokenizer(prepare("tiny"))
    assert len(books) == len(configs) == 2
    for config, book in zip(configs, books, strict=True):
        assert set(book) == {p.point_id for p in config}
        for point in config:
            prompts = book[point.point_id]
            assert prompts == point_prompts(spec, point, tokenizer)
            assert len(prompts.load) == point.workload.num_prompts and len(prompts.warmup) == 2
            counted = {len(tokenizer.encode(p.text)) for p in (*prompts.load, *prompts.warmup)}
            assert counted == {point.workload.input_len}  # as the server counts them, special tokens included
    assert prompt_books(measurer, configs[:1]) == books[0]  # one configuration: Ray's single return value
    on_the_hub = [
        replace(p, recipe=p.recipe.model_copy(update={"model": "Qwen/Qwen2.5-7B-Instruct"})) for p in configs[0]
    ]
    assert prompt_books(measurer, [on_the_hub]) is None  # that task builds its own from its server's model
