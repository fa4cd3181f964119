"""Device groups: splitting cores and cards by tensor x pipeline parallel size, the pool, ports, launch plans.

Exact expectations (which cores, which cards, which variables) plus one invariant checked over random
acquire/release sequences: no device is ever in two live groups.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

import pytest

from workbench.errors import WorkbenchError
from workbench.recipes import DeviceKind, ServingRecipe
from workbench.serving.device_groups import (
    GIB,
    PORT_BASE,
    PORT_STRIDE,
    DeviceGroup,
    DevicePool,
    make_pool,
    numa_groups,
    parse_devices,
    ports_for_slot,
    resolve_parallel,
    split_cores,
    visible_devices,
)
from workbench.serving.server import plan_launch


def recipe(tmp_path: Path, device: DeviceKind = DeviceKind.CPU, tp: int = 1, pp: int = 1, **engine) -> ServingRecipe:
    """A recipe on a local (empty) model directory: plan_launch resolves it without preparing a model."""
    return ServingRecipe(
        name="r",
        device=device,
        model=str(tmp_path),
        engine={"tensor_parallel_size": tp, "pipeline_parallel_size": pp, **engine},
        env={"VLLM_CPU_KVCACHE_SPACE": "1"} if device is DeviceKind.CPU else {},
    )


# -- parsing ------------------------------------------------------------------------------------------


def test_parse_devices_ranges_and_lists():
    assert parse_devices("0-3,6") == (0, 1, 2, 3, 6)
    assert parse_devices("5") == (5,)
    for bad in ("", "a", "1,1", "3-x"):
        with pytest.raises(WorkbenchError, match="device ids"):
            parse_devices(bad)


def test_visible_devices_prefers_the_variable_then_the_count():
    assert visible_devices(DeviceKind.NPU, {"ASCEND_RT_VISIBLE_DEVICES": "4,5,6,7"}, count=4) == (4, 5, 6, 7)
    assert visible_devices(DeviceKind.CUDA, {"CUDA_VISIBLE_DEVICES": "1"}, count=8) == (1,)
    assert visible_devices(DeviceKind.NPU, {}, count=3) == (0, 1, 2)
    with pytest.raises(WorkbenchError, match="ASCEND_RT_VISIBLE_DEVICES or pass --devices"):
        visible_devices(DeviceKind.NPU, {}, count=0)


def test_resolve_parallel():
    assert resolve_parallel(None) is None
    assert resolve_parallel("auto") == 0 and resolve_parallel("AUTO") == 0
    assert resolve_parallel("3") == 3
    for bad in ("0", "-1", "two"):
        with pytest.raises(WorkbenchError, match="--parallel"):
            resolve_parallel(bad)


def test_numa_groups_counts_nodes_holding_allowed_cores(tmp_path):
    for node, cpus in (("node0", "0-3"), ("node1", "4-7")):
        (tmp_path / node).mkdir()
        (tmp_path / node / "cpulist").write_text(cpus + "\n")
    assert numa_groups([0, 1, 4, 5], tmp_path) == 2
    assert numa_groups([0, 1], tmp_path) == 1
    assert numa_groups([0, 1], tmp_path / "absent") == 1  # no NUMA information: one group


# -- CPU groups ---------------------------------------------------------------------------------------


def test_split_cores_equal_contiguous_groups_with_kv_shares():
    two = split_cores([0, 1], 2, kv_budget_bytes=4 * GIB)
    assert [(g.devices, g.slot, g.kv_cache_bytes) for g in two] == [((0,), 0, 2 * GIB), ((1,), 1, 2 * GIB)]
    three = split_cores(range(8), 3)
    assert [g.devices for g in three] == [(0, 1), (2, 3), (4, 5)]  # cores 6-7 stay unused
    assert [g.group_id for g in three] == ["cpu:0-1", "cpu:2-3", "cpu:4-5"]
    with pytest.raises(WorkbenchError, match="may use 2 CPU cores .* at most 2 groups"):
        split_cores([0, 1], 3)


def test_cpu_group_binds_ranks_pins_cores_and_keeps_a_fitting_kv_request(tmp_path):
    group = split_cores(range(4), 2, kv_budget_bytes=8 * GIB)[1]  # cores 2-3, 4 GiB
    tp1 = group.launch(recipe(tmp_path), {"VLLM_CPU_KVCACHE_SPACE": "1"})
    assert tp1.env["VLLM_CPU_OMP_THREADS_BIND"] == "2-3"
    assert tp1.args == () and tp1.unset == ()  # 1 GiB fits the 4 GiB share
    tp2 = group.launch(recipe(tmp_path, tp=2), {})
    assert tp2.env["VLLM_CPU_OMP_THREADS_BIND"] == "2|3"
    if tp1.prefix:  # taskset is on PATH
        assert tp1.prefix == ("taskset", "-c", "2-3")
    with pytest.raises(WorkbenchError, match="= 4 needs 4 cores, its device group cpu:2-3 has 2"):
        group.launch(recipe(tmp_path, tp=2, pp=2), {})


def test_cpu_group_lowers_a_kv_request_above_its_share_and_refuses_explicit_bytes(tmp_path):
    group = split_cores([0, 1], 2, kv_budget_bytes=GIB)[0]  # 512 MiB each
    placed = group.launch(recipe(tmp_path), {"VLLM_CPU_KVCACHE_SPACE": "1"})
    assert placed.args == ("--kv-cache-memory-bytes", str(GIB // 2))
    assert placed.unset == ("VLLM_CPU_KVCACHE_SPACE",)  # it would override the flag
    fits = group.launch(recipe(tmp_path, kv_cache_memory_bytes="256MiB"), {})
    assert fits.args == ()
    with pytest.raises(WorkbenchError, match="kv_cache_memory_bytes 1.00 GiB exceeds device group cpu:0"):
        group.launch(recipe(tmp_path, kv_cache_memory_bytes="1GiB"), {})


def test_plan_launch_in_a_group_uses_its_port_binding_and_kv_share(tmp_path):
    group = split_cores([0, 1], 2, kv_budget_bytes=GIB)[1]
    plan = plan_launch(recipe(tmp_path), group=group, log_dir=tmp_path)
    env = dict(plan.env)
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "1"
    assert "VLLM_CPU_KVCACHE_SPACE" not in env  # the recipe's 1 GiB is above the 512 MiB share
    assert plan.argv[-2:] == ("--kv-cache-memory-bytes", str(GIB // 2))
    assert PORT_BASE + PORT_STRIDE <= plan.port < PORT_BASE + PORT_STRIDE + PORT_STRIDE // 2
    assert env["VLLM_PORT"] == str(PORT_BASE + PORT_STRIDE + PORT_STRIDE // 2)
    plain = dict(plan_launch(recipe(tmp_path), log_dir=tmp_path).env)  # no group: the launcher's own rules
    assert plain["VLLM_CPU_KVCACHE_SPACE"] == "1" and "VLLM_PORT" not in plain


# -- NPU / GPU groups ---------------------------------------------------------------------------------


def test_npu_and_gpu_groups_set_visible_devices_and_their_own_ports(tmp_path):
    npu = DeviceGroup(DeviceKind.NPU, (2, 3), slot=2).launch(recipe(tmp_path, DeviceKind.NPU, tp=2), {})
    assert npu.env["ASCEND_RT_VISIBLE_DEVICES"] == "2,3"
    assert npu.env["HCCL_IF_BASE_PORT"] == str(60000 + 2 * PORT_STRIDE)
    other = DeviceGroup(DeviceKind.NPU, (0, 1), slot=0).launch(recipe(tmp_path, DeviceKind.NPU, tp=2), {})
    assert other.env["HCCL_IF_BASE_PORT"] == "60000" and other.env["VLLM_PORT"] != npu.env["VLLM_PORT"]
    gpu = DeviceGroup(DeviceKind.CUDA, (5,), slot=5).launch(recipe(tmp_path, DeviceKind.CUDA), {})
    assert gpu.env["CUDA_VISIBLE_DEVICES"] == "5" and "HCCL_IF_BASE_PORT" not in gpu.env
    with pytest.raises(WorkbenchError, match="runs on cpu, but the device group npu:2-3"):
        DeviceGroup(DeviceKind.NPU, (2, 3), slot=2).launch(recipe(tmp_path), {})


def test_card_pool_cuts_aligned_groups_by_tp_size():
    pool = DevicePool(DeviceKind.NPU, devices=range(8))
    tp2 = pool.acquire(2)
    tp1 = pool.acquire(1)
    tp2b = pool.acquire(2)
    tp4 = pool.acquire(4)
    assert (tp2.devices, tp1.devices, tp2b.devices) == ((0, 1), (2,), (4, 5))
    assert tp4 is None  # 3, 6, 7 are free but no 4
    pool.release(tp2)
    pool.release(tp1)
    assert pool.acquire(4).devices == (0, 1, 2, 3)
    assert pool.acquire(1).devices == (6,)


def test_card_pool_caps_concurrent_groups_and_refuses_what_never_fits(tmp_path):
    pool = make_pool(DeviceKind.NPU, 2, devices=(0, 1, 2, 3))
    first, second = pool.acquire(1), pool.acquire(1)
    assert first and second and pool.acquire(1) is None  # --parallel 2: two servers at most
    pool.check_fits([recipe(tmp_path, DeviceKind.NPU, tp=4)])
    with pytest.raises(WorkbenchError, match="= 8, but there are only 4 NPU devices"):
        pool.check_fits([recipe(tmp_path, DeviceKind.NPU, tp=4, pp=2)])
    with pytest.raises(WorkbenchError, match="only 2 NPU devices"):
        make_pool(DeviceKind.NPU, 3, devices=(0, 1))
    with pytest.raises(WorkbenchError, match="--devices"):
        make_pool(DeviceKind.CUDA, 0, devices=())


def test_cpu_pool_refuses_an_explicit_kv_request_above_the_share_before_starting(tmp_path):
    pool = make_pool(DeviceKind.CPU, 2, cores=(0, 1), kv_budget_bytes=GIB)
    pool.check_fits([recipe(tmp_path, kv_cache_memory_bytes="512MiB")])
    with pytest.raises(
        WorkbenchError, match=r"1.00 GiB exceeds each device group's share of the KV budget \(0.50 GiB\)"
    ):
        pool.check_fits([recipe(tmp_path, kv_cache_memory_bytes="1GiB")])


def test_cpu_pool_hands_out_each_group_once():
    pool = make_pool(DeviceKind.CPU, 2, cores=(0, 1))
    a, b = pool.acquire(1), pool.acquire(1)
    assert {a.devices, b.devices} == {(0,), (1,)} and pool.acquire(1) is None
    pool.release(a)
    assert pool.acquire(1) == a
    assert make_pool(DeviceKind.CPU, 2, cores=(0, 1)).acquire(2) is None  # a TP=2 server needs two cores


def test_no_device_is_ever_in_two_live_groups():
    rng = random.Random(0)
    pool = DevicePool(DeviceKind.NPU, devices=range(8))
    live: list[DeviceGroup] = []
    for _ in range(2000):
        if live and rng.random() < 0.45:
            pool.release(live.pop(rng.randrange(len(live))))
        elif (group := pool.acquire(rng.choice((1, 2, 4)))) is not None:
            live.append(group)
        held = [d for g in live for d in g.devices]
        assert len(held) == len(set(held))
        assert len({g.slot for g in live}) == len(live)  # slots (port blocks) never shared either


# -- ports --------------------------------------------------------------------------------------------


def test_port_blocks_are_disjoint_and_skip_a_taken_port():
    ports = [ports_for_slot(slot) for slot in range(4)]
    assert len({p.api for p in ports}) == 4 and len({p.vllm for p in ports}) == 4
    block = PORT_BASE + 7 * PORT_STRIDE
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", block))
        assert ports_for_slot(7).api == block + 1
    assert ports_for_slot(7).api == block
