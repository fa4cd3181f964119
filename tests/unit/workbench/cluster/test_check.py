"""Each cluster rule on a planted inconsistency of the documented two-node set, and the refusals it writes."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.conftest import FIXTURES
from tests.unit.workbench.cluster.threads import load_thread
from workbench.cluster.bundle import ListeningPort, NodeBundle
from workbench.cluster.check import CLUSTER_CHECK_KIND, check_bundles
from workbench.cluster.rules import load_rules
from workbench.errors import WorkbenchError

DOC = FIXTURES / "cluster" / "threads" / "doc-deepseek-v3.1-two-node-dp.yaml"


@pytest.fixture
def doc_nodes() -> list[NodeBundle]:
    return load_thread(DOC)[1]


def plant(bundles: list[NodeBundle], index: int, old: str, new: str) -> list[NodeBundle]:
    changed = list(bundles)
    assert old in changed[index].script
    changed[index] = dataclasses.replace(changed[index], script=changed[index].script.replace(old, new))
    return changed


def errors(bundles) -> set[tuple[str, str]]:
    return {(f.rule, f.setting) for f in check_bundles(bundles).findings if f.severity.value == "error"}


def test_the_documented_set_passes(doc_nodes):
    assert errors(doc_nodes) == set()


@pytest.mark.parametrize(
    ("node", "old", "new", "expected"),
    [
        (1, "HCCL_BUFFSIZE=200", "HCCL_BUFFSIZE=256", ("env-must-match", "HCCL_BUFFSIZE")),
        (
            1,
            "export OMP_PROC_BIND=false",
            "export VLLM_ASCEND_ENABLE_MLAPO=1",
            ("env-must-match", "VLLM_ASCEND_ENABLE_MLAPO"),
        ),
        (
            1,
            "--data-parallel-start-rank 2",
            "--data-parallel-start-rank 1",
            ("dp-consistent", "--data-parallel-start-rank"),
        ),
        (1, "--headless \\\n", "", ("dp-consistent", "--headless")),
        (
            1,
            "--data-parallel-rpc-port 13389",
            "--data-parallel-rpc-port 13390",
            ("dp-consistent", "--data-parallel-rpc-port"),
        ),
        (1, 'node0_ip="192.0.0.1"', 'node0_ip="192.0.0.9"', ("dp-consistent", "--data-parallel-address")),
        (
            1,
            "--data-parallel-size-local 2",
            "--data-parallel-size-local 1",
            ("dp-consistent", "--data-parallel-size-local"),
        ),
        (1, "--tensor-parallel-size 4", "--tensor-parallel-size 8", ("engine-flags-match", "--tensor-parallel-size")),
        (1, 'local_ip="192.0.0.2"', 'local_ip="192.0.0.1"', ("env-must-differ", "HCCL_IF_IP")),
    ],
)
def test_a_planted_inconsistency_names_the_setting(doc_nodes, node, old, new, expected):
    assert expected in errors(plant(doc_nodes, node, old, new))


def test_interfaces_and_addresses_are_those_of_the_node(doc_nodes):
    nodes = [
        dataclasses.replace(b, interfaces={"eth0": (f"192.0.0.{i + 1}",), "lo": ("127.0.0.1",)})
        for i, b in enumerate(doc_nodes)
    ]
    assert errors(nodes) == set()
    wrong = plant(nodes, 0, 'nic_name="eth0"', 'nic_name="enp189s0f0"')
    assert ("interface-exists", "GLOO_SOCKET_IFNAME") in errors(wrong)
    moved = [nodes[0], dataclasses.replace(nodes[1], interfaces={"eth0": ("192.0.0.7",)})]
    assert ("address-on-node", "HCCL_IF_IP") in errors(moved)


def test_a_port_another_process_holds(doc_nodes):
    taken = dataclasses.replace(doc_nodes[0], ports=(ListeningPort("0.0.0.0", 13389, 4242),))
    findings = check_bundles([taken, doc_nodes[1]]).findings
    port = [f for f in findings if f.rule == "ports-free"]
    assert port and port[0].setting == "--data-parallel-rpc-port" and "pid 4242" in port[0].fix
    own = dataclasses.replace(taken, own_pids=(4242,))
    assert not [f for f in check_bundles([own, doc_nodes[1]]).findings if f.rule == "ports-free"]


def test_nodes_on_one_cpu_host_need_their_own_cores():
    def node(name, cores):
        port = "8001" if name == "b" else "8000"  # two servers on one machine need two ports (ports-free)
        command = ("vllm", "serve", "m", "--port", port)
        return NodeBundle(name, hostname="box", env={"VLLM_CPU_OMP_THREADS_BIND": cores}, command=command)

    assert ("cpu-cores-disjoint", "VLLM_CPU_OMP_THREADS_BIND") in errors([node("a", "0-1"), node("b", "1")])
    assert errors([node("a", "0"), node("b", "1")]) == set()
    assert errors([node("a", "auto"), node("b", "auto")]) == set()


def test_timeouts_that_hide_the_cause():
    node = NodeBundle("n", env={"HCCL_EXEC_TIMEOUT": "3600", "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "1800"})
    warned = check_bundles([node]).findings
    assert [(f.rule, f.setting, f.severity.value) for f in warned] == [
        ("timeouts-ordered", "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "warning")
    ]
    fine = NodeBundle("n", env={"HCCL_EXEC_TIMEOUT": "204", "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "30000"})
    assert not check_bundles([fine]).findings  # vllm-ascend PR #16468's launch script


def pd_node(name: str, config: dict) -> NodeBundle:
    return NodeBundle(name, hostname=name, command=("vllm", "serve", "/m", "--kv-transfer-config", json.dumps(config)))


def test_prefill_and_decode_connectors_must_agree():
    producer = {
        "kv_connector": "ExampleConnector",
        "kv_role": "kv_producer",
        "kv_connector_extra_config": {"shared_storage_path": "/a"},
    }
    consumer = {**producer, "kv_role": "kv_consumer"}
    assert errors([pd_node("p", producer), pd_node("d", consumer)]) == set()
    moved = {**consumer, "kv_connector_extra_config": {"shared_storage_path": "/b"}}
    assert ("kv-connector-agrees", "--kv-transfer-config.kv_connector_extra_config.shared_storage_path") in errors(
        [pd_node("p", producer), pd_node("d", moved)]
    )
    assert ("kv-connector-agrees", "--kv-transfer-config.kv_role") in errors(
        [pd_node("p", producer), pd_node("d", producer)]
    )
    sized = {
        **consumer,
        "kv_connector": "MooncakeConnector",
        "kv_connector_extra_config": {"prefill": {"dp_size": 2, "tp_size": 16}},
    }
    mooncake = {**producer, "kv_connector": "MooncakeConnector"}
    found = errors([pd_node("p", mooncake), pd_node("d", sized)])
    assert ("kv-connector-agrees", "--kv-transfer-config.kv_connector_extra_config.prefill.dp_size") in found


def test_hccn_link_down_and_duplicate_device_addresses():
    ok = {
        "ip": "ipaddr:10.0.0.1\nnetmask:255.255.255.0",
        "link": "link status: UP",
        "net_health": "net health status: Success",
    }
    down = {**ok, "link": "link status: DOWN", "lldp": "Port ID TLV\n        Ifname: 200GE1/0/3"}
    a = NodeBundle("a", hostname="a", hccn={"0": ok, "1": down})
    b = NodeBundle("b", hostname="b", hccn={"0": ok})
    result = check_bundles([a, b])
    link = [f for f in result.findings if f.rule == "npu-link-up"]
    assert link and link[0].setting == "NPU 1" and "200GE1/0/3" in link[0].fix
    assert ("device-ip-unique", "device address") in {(f.rule, f.setting) for f in result.findings}


def test_clock_offsets_beyond_a_second():
    late = NodeBundle("late", clock_offset_s=2.5)
    assert [f.rule for f in check_bundles([NodeBundle("ref", clock_offset_s=0.01), late]).findings] == ["clock-synced"]


def test_unknown_rules_input_is_reported_as_skipped():
    result = check_bundles([NodeBundle("a"), NodeBundle("b")])
    assert any(s.startswith("npu-link-up") for s in result.skipped)


def test_duplicate_node_names_are_refused():
    with pytest.raises(WorkbenchError, match="appears twice"):
        check_bundles([NodeBundle("a"), NodeBundle("a")])


def test_every_rule_cites_a_source_and_its_kind_exists():
    from workbench.cluster.check import CHECKS
    from workbench.cluster.rules import RuleKind

    book = load_rules()
    for rule in book.rules:
        assert rule.source.strip() and rule.fix.strip()
        assert rule.kind in CHECKS or rule.kind is RuleKind.STACK_IN_MATRIX


def test_the_result_is_a_typed_document(tmp_path, doc_nodes):
    path = check_bundles(doc_nodes).write(tmp_path / "check.json", {})
    assert CLUSTER_CHECK_KIND.read(path)["verdict"] == "pass"
