"""Cluster recipes: read by the serving-recipe reader, planned into node commands, refused before any start."""

from __future__ import annotations

import json
import socket

import pytest

from workbench.errors import WorkbenchError
from workbench.recipes import load_serving_recipe
from workbench.serving.cluster import check_plan, plan_cluster, refuse_inconsistent
from workbench.serving.pd_proxy import prefill_body


@pytest.fixture
def dp2(tiny_dir):
    return load_serving_recipe("cpu-tiny-dp2")


def flags(argv) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for i, arg in enumerate(argv):
        if arg.startswith("--"):
            nxt = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None
            found[arg] = nxt
    return found


def test_dp_nodes_carry_vllms_multi_node_flags(dp2, tmp_path):
    cluster = plan_cluster(dp2, log_dir=tmp_path)
    master, follower = (flags(n.plan.argv) for n in cluster.nodes)
    assert master["--data-parallel-size"] == follower["--data-parallel-size"] == "2"
    assert master["--data-parallel-rpc-port"] == follower["--data-parallel-rpc-port"]
    assert "--headless" in follower and follower["--data-parallel-start-rank"] == "1" and "--headless" not in master
    assert [dict(n.plan.env)["VLLM_CPU_OMP_THREADS_BIND"] for n in cluster.nodes] == ["0", "1"]
    assert all("workbench.serving.vllm_serve" in n.plan.argv for n in cluster.nodes)
    assert cluster.front.name == "node0" and not check_plan(cluster).failed


def test_pd_nodes_share_one_connector_folder(tiny_dir, tmp_path):
    cluster = plan_cluster(load_serving_recipe("cpu-tiny-1p1d"), log_dir=tmp_path)
    configs = [json.loads(flags(n.plan.argv)["--kv-transfer-config"]) for n in cluster.engines]
    assert [c["kv_role"] for c in configs] == ["kv_producer", "kv_consumer"]
    assert len({c["kv_connector_extra_config"]["shared_storage_path"] for c in configs}) == 1
    assert cluster.front.role == "proxy" and not check_plan(cluster).failed


def planted(recipe, node1: dict, rpc_port: int | None = None):
    spec = recipe.cluster.model_dump() | {
        "nodes": [{"name": "node0", "env": {"VLLM_CPU_OMP_THREADS_BIND": "0"}}, node1]
    }
    if rpc_port is not None:
        spec["rpc_port"] = rpc_port
    return recipe.with_overrides(cluster=spec)


@pytest.mark.parametrize(
    ("node1", "flag"),
    [
        (
            {"name": "node1", "env": {"VLLM_CPU_OMP_THREADS_BIND": "1", "VLLM_LOGGING_LEVEL": "DEBUG"}},
            "VLLM_LOGGING_LEVEL",
        ),
        (
            {"name": "node1", "env": {"VLLM_CPU_OMP_THREADS_BIND": "1"}, "args": ["--data-parallel-start-rank", "0"]},
            "--data-parallel-start-rank",
        ),
        ({"name": "node1", "env": {"VLLM_CPU_OMP_THREADS_BIND": "0"}}, "VLLM_CPU_OMP_THREADS_BIND"),
    ],
)
def test_a_planted_inconsistency_is_refused_before_start(dp2, tmp_path, node1, flag):
    with pytest.raises(WorkbenchError, match=f"(?s)refused before start.*{flag}"):
        refuse_inconsistent(plan_cluster(planted(dp2, node1), log_dir=tmp_path))


def test_a_taken_rpc_port_is_refused_before_start(dp2, tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        recipe = planted(dp2, {"name": "node1", "env": {"VLLM_CPU_OMP_THREADS_BIND": "1"}}, rpc_port=port)
        with pytest.raises(WorkbenchError, match=f"--data-parallel-rpc-port: port {port} is already in use"):
            refuse_inconsistent(plan_cluster(recipe, log_dir=tmp_path))


def test_cluster_recipe_errors_name_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: x\nmodel: embedded:tiny\ncluster:\n  mode: pd\n  nodes: [{name: a, role: prefill}, {name: b}]\n"
    )
    with pytest.raises(WorkbenchError, match="one with role: prefill and one with role: decode"):
        load_serving_recipe(bad)


def test_the_proxy_prefills_one_token_without_streaming():
    body = {"prompt": "x", "max_tokens": 64, "stream": True, "stream_options": {"include_usage": True}, "logprobs": 5}
    assert prefill_body(body) == {"prompt": "x", "max_tokens": 1, "logprobs": 5}
    assert prefill_body({"messages": [], "max_completion_tokens": 9})["max_completion_tokens"] == 1
