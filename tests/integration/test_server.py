"""A real vLLM CPU server on the tiny model: start, health, stop; crash classes reproduced for real."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.integration.conftest import CASE_VAR, processes_with_marker
from workbench.serving.crash import CrashKind, ServerFailure
from workbench.serving.hang import HangWatchdog, ServerHung
from workbench.serving.load.runner import HangWatch, run_load
from workbench.serving.load.workload import Workload
from workbench.serving.pool import POOL_ENV
from workbench.serving.processes import live_processes
from workbench.serving.server import AFTER_FAILED_REQUESTS_S, IN_PROCESS_WORKER_VAR, launch

pytestmark = pytest.mark.integration


def test_started_server_is_healthy_and_serves_the_recipe_model(tiny_server):
    assert httpx.get(f"{tiny_server.url}/health", timeout=10).status_code == 200
    assert tiny_server.model == "tiny"
    assert len(live_processes(tiny_server.pid)) >= 2  # API server + EngineCore (pooled: the pool owns them)
    assert tiny_server.diagnose() is None
    assert "--block-size" in tiny_server.plan.argv


def start_expecting_failure(recipe, server_env, log_dir):
    """Launch a recipe that must fail; return the crash report after checking nothing of it survives."""
    case = {**server_env, CASE_VAR: uuid.uuid4().hex}
    try:
        with launch(recipe, extra_env=case, log_dir=log_dir, progress=False, startup_timeout_s=900):
            return None  # it started: the caller's assertion on the report fails
    except ServerFailure as failure:
        return failure.report
    finally:
        assert processes_with_marker(case[CASE_VAR], CASE_VAR) == []


@pytest.fixture(scope="module")
def failed_starts(tiny_recipe, server_env, log_dir, tmp_path_factory):
    """The three bad recipes, started at the same time (each start is mostly single-threaded Python:
    two cores take them about twice as fast together as one after another)."""
    recipes = {
        "block_size_16": tiny_recipe.with_overrides(engine={"block_size": 16}),
        "missing_model": tiny_recipe.with_overrides(model=str(tmp_path_factory.mktemp("empty") / "no-such-model")),
        # tiny: 4 layers x 2 KV heads x 64 dims x (K and V) x 4 bytes = 4 KiB per token; 1024 tokens need 4 MiB.
        "kv_too_small": tiny_recipe.with_overrides(engine={"kv_cache_memory_bytes": "1MiB"}),
    }
    with ThreadPoolExecutor(max_workers=len(recipes)) as pool:
        futures = {name: pool.submit(start_expecting_failure, r, server_env, log_dir) for name, r in recipes.items()}
        return {name: future.result() for name, future in futures.items()}


def test_block_size_16_on_cpu(failed_starts):
    report = failed_starts["block_size_16"]
    assert report is not None and report.kind is CrashKind.BLOCK_SIZE, report
    assert "No common block size" in " ".join(report.evidence)
    assert "multiple of 32" in report.fix


def test_missing_model_path(failed_starts):
    report = failed_starts["missing_model"]
    assert report is not None and report.kind is CrashKind.MODEL_NOT_FOUND, report


def test_kv_budget_too_small_for_max_model_len(failed_starts):
    report = failed_starts["kv_too_small"]
    assert report is not None and report.kind is CrashKind.KV_MEMORY, report
    assert "max_model_len" in report.fix


@pytest.fixture(scope="module")
def worker_process_server(tiny_recipe, server_env, log_dir):
    """A tiny server of this module's own with its worker in a process of its own (vLLM's default, what NPU
    and TP servers run): the hang test stops its EngineCore, then the kill test kills the API server above it."""
    env = {**server_env, IN_PROCESS_WORKER_VAR: "1"}
    with launch(tiny_recipe, extra_env=env, log_dir=log_dir, progress=False, pooled=False) as server:
        yield server


def _engine_core(server) -> int:
    children = [pid for pid in server.processes() if pid != server.pid]
    named = [pid for pid in children if "EngineCor" in open(f"/proc/{pid}/comm").read()]
    assert named, f"no EngineCore among {children}"
    return named[0]


def test_a_stopped_engine_is_reported_hung_with_the_evidence_then_recovers(worker_process_server):
    """The hang watchdog on a real server: SIGSTOP the EngineCore mid-load (what an engine blocked in a
    collective looks like from outside). The load ends as hung long before its request timeout, with
    the evidence; a `serve`-style watchdog (no client count: the server's gauge) reports it too, and
    sees the recovery after SIGCONT; the server then serves again."""
    server = worker_process_server
    engine = _engine_core(server)
    workload = Workload(input_len=32, output_len=512, num_prompts=4, concurrency=2, request_timeout_s=600)
    box, hangs, recoveries = {}, [], []

    def load() -> None:
        try:
            run_load(server.url, server.model, workload, progress=False, hang=HangWatch.of(server, hang_after_s=8))
        except ServerHung as hung:
            box["hung"] = hung
        except Exception as exc:  # kept for the assertion below: a thread's exception is otherwise lost
            box["error"] = exc

    with HangWatchdog(
        server.url, hang_after_s=8, pids=server.processes, on_hang=hangs.append, on_recover=recoveries.append
    ):
        loader = threading.Thread(target=load)
        began = time.monotonic()
        loader.start()
        deadline = time.monotonic() + 120
        while not _running(server.url):
            assert loader.is_alive(), f"the load ended before the engine was stopped: {box}"
            assert time.monotonic() < deadline, "load never reached the server"
            time.sleep(0.2)
        os.kill(engine, signal.SIGSTOP)
        try:
            loader.join(timeout=120)
            took = time.monotonic() - began
            deadline = time.monotonic() + 30  # the serve-style watchdog runs its own clock beside the load's
            while not hangs and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            os.kill(engine, signal.SIGCONT)
        deadline = time.monotonic() + 60
        while not recoveries and time.monotonic() < deadline:
            time.sleep(0.5)
    assert "hung" in box, "the load did not end as hung"
    report = box["hung"].report
    assert report.kind is CrashKind.HUNG and took < 100
    assert "requests in flight" in report.evidence[0]
    assert any(f"process {engine} " in line and "stopped (T)" in line for line in report.evidence), report.evidence
    assert any(line.startswith("/metrics: running ") for line in report.evidence)
    assert len(hangs) == 1 and "requests running" in hangs[0].evidence[0]
    assert recoveries, "the serve-style watchdog did not see the tokens flow again"
    after = run_load(
        server.url, server.model, Workload(input_len=32, output_len=8, num_prompts=2, concurrency=2), progress=False
    )
    assert after.summary.completed == 2 and server.diagnose() is None


def test_server_killed_mid_load(worker_process_server):
    workload = Workload(input_len=32, output_len=64, num_prompts=32, concurrency=8)
    server = worker_process_server
    pgid = server.process.pid
    box = {}
    loader = threading.Thread(
        target=lambda: box.setdefault("result", run_load(server.url, server.model, workload, progress=False))
    )
    loader.start()
    deadline = time.monotonic() + 120
    while not _running(server.url):
        assert time.monotonic() < deadline, "load never reached the server"
        time.sleep(0.2)
    os.kill(server.process.pid, signal.SIGKILL)  # the API server only: its EngineCore is orphaned
    loader.join(timeout=300)
    report = server.diagnose(wait_s=AFTER_FAILED_REQUESTS_S)  # as the sweep does after failed requests
    assert report is not None and report.kind is CrashKind.KILLED and report.signal_name == "SIGKILL"
    server.stop()
    assert live_processes(pgid) == []
    result = box["result"]
    s = result.summary
    assert s.sent == len(result.records) and s.completed + s.failed == s.sent
    assert s.failed > 0
    assert all(r.error for r in result.records if not r.success)


def _running(url: str) -> bool:
    """True once vLLM's metrics show at least one request running."""
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith("vllm:num_requests_running") and float(line.rsplit(" ", 1)[1]) > 0:
            return True
    return False


KILLED_KERNEL = """
import sys
from workbench.recipes import load_serving_recipe
from workbench.serving.server import connect
server = connect(recipe=load_serving_recipe("cpu-tiny"), progress=False, log_dir=__import__("pathlib").Path(sys.argv[1]))
print(server.url, flush=True)
__import__("time").sleep(900)
"""


def test_a_sigkilled_notebook_kernel_leaves_no_server(server_env, log_dir):
    """What notebook 03's kernel does — connect(recipe=...) — then an OOM kill: API server, EngineCore and
    workers must all go (the orphan guard), not keep the port and the memory."""
    import subprocess
    import sys

    marker = uuid.uuid4().hex
    # A kernel outside any engine pool (a guided JupyterLab session): the server is the kernel's own.
    env = {k: v for k, v in {**os.environ, **server_env, CASE_VAR: marker}.items() if k != POOL_ENV}
    kernel = subprocess.Popen(
        [sys.executable, "-c", KILLED_KERNEL, str(log_dir)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        url = kernel.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), "the server did not start"
        assert len(processes_with_marker(marker, CASE_VAR)) >= 3  # the kernel, the API server, EngineCore
        kernel.send_signal(signal.SIGKILL)
        kernel.wait(timeout=10)
        deadline = time.monotonic() + 60
        while processes_with_marker(marker, CASE_VAR) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert processes_with_marker(marker, CASE_VAR) == []
    finally:
        kernel.kill()
        for pid in processes_with_marker(marker, CASE_VAR):
            os.kill(pid, signal.SIGKILL)
