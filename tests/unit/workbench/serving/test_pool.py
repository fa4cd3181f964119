"""The engine pool with real (small) processes: one start per configuration, leases, room for a new one,
every pooled server stopped at close, and none left behind when the pool's owner is SIGKILLed.

The "server" is a few lines of Python that answer /health and /v1/models on the `--port` it is given and
keep a child in its group, like vLLM's EngineCore; vLLM itself is pooled in the integration tier.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from workbench.serving.pool import POOL_ENV, EnginePool
from workbench.serving.processes import alive, live_processes
from workbench.serving.server import LaunchPlan, free_port, lease
from workbench.serving.starts import read_starts

FAKE_SERVER = textwrap.dedent(
    """
    import http.server, json, subprocess, sys
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # an EngineCore stand-in
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"{}" if self.path == "/health" else json.dumps({"data": [{"id": "fake", "root": "/x"}]}).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body)
        def log_message(self, *args):
            pass
    port = int(sys.argv[sys.argv.index("--port") + 1])
    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
    """
)


def plan(tmp_path: Path, flavour: str = "a") -> LaunchPlan:
    """A plan for the fake server; `flavour` changes its configuration (a different fingerprint)."""
    script = tmp_path / "server.py"
    script.write_text(FAKE_SERVER)
    port = free_port()
    return LaunchPlan(
        recipe_name=f"fake-{flavour}",
        argv=(sys.executable, str(script), "--flavour", flavour, "--port", str(port)),
        env=(("PYTHONUNBUFFERED", "1"),),
        host="127.0.0.1",
        port=port,
        log_path=tmp_path / f"server-{flavour}-{port}.log",
        startup_timeout_s=30.0,
    )


@pytest.fixture
def starts_file(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "starts.jsonl"
    monkeypatch.setenv("ASCEND_WORKBENCH_SERVER_STARTS", str(path))
    monkeypatch.setenv("ASCEND_WORKBENCH_STARTED_BY", "test")
    return path


def test_the_fingerprint_ignores_the_port_and_the_log_but_not_the_command(tmp_path):
    a1, a2, b = plan(tmp_path), plan(tmp_path), plan(tmp_path, "b")
    assert a1.port != a2.port and a1.fingerprint == a2.fingerprint
    assert b.fingerprint != a1.fingerprint


def test_one_start_per_configuration_then_leases_and_all_stopped_at_close(tmp_path, starts_file):
    with EnginePool.open(tmp_path / "pool") as pool:
        assert os.environ[POOL_ENV] == str(pool.directory)
        with lease(plan(tmp_path), pool, progress=False) as first:
            pid = first.pid
            assert first.pooled and first.process is None and first.group_pids() == []
        assert alive(pid)  # the lease ended; the server waits for the next one
        with lease(plan(tmp_path), pool, progress=False) as second:
            assert (second.pid, second.url) == (pid, first.url)
            assert second.ready_s == first.ready_s  # the start-up measured when it started
        group = live_processes(pid, pid)
        assert len(group) >= 2  # the server and its child
    assert POOL_ENV not in os.environ
    assert [p for p in group if alive(p)] == []
    starts = read_starts(starts_file)
    assert [s.reused for s in starts] == [False, True]
    assert {s.configuration for s in starts} == {plan(tmp_path).fingerprint}


def test_a_new_configuration_stops_the_idle_one_first(tmp_path, starts_file):
    with EnginePool.open(tmp_path / "pool") as pool:
        with lease(plan(tmp_path, "a"), pool, progress=False) as a:
            held = a.pid
            with lease(plan(tmp_path, "b"), pool, progress=False) as b:
                assert alive(held), "a server someone holds is never stopped to make room"
                b_pid = b.pid
        assert alive(held) and alive(b_pid)  # both idle now
        with lease(plan(tmp_path, "c"), pool, progress=False, keep_idle=0):
            deadline = time.monotonic() + 10
            while (alive(held) or alive(b_pid)) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not alive(held) and not alive(b_pid)  # keep_idle 0: room was made for c
            assert [r.recipe for r in pool.records()] == ["fake-c"]


def test_a_dead_pooled_server_is_started_again(tmp_path, starts_file):
    with EnginePool.open(tmp_path / "pool") as pool:
        with lease(plan(tmp_path), pool, progress=False) as first:
            os.killpg(first.pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while alive(first.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert first.diagnose() is not None  # gone: it says so instead of looking alive
        with lease(plan(tmp_path), pool, progress=False) as second:
            assert second.pid != first.pid and alive(second.pid)


OWNER = """
import sys, time
from pathlib import Path
from tests.unit.workbench.serving.test_pool import plan
from workbench.serving.pool import EnginePool
from workbench.serving.server import lease
with EnginePool.open(Path(sys.argv[1])) as pool:
    with lease(plan(Path(sys.argv[2])), pool, progress=False) as server:
        print(server.pid, flush=True)
        time.sleep(600)
"""


def test_a_sigkilled_pool_owner_leaves_no_server(tmp_path):
    """The main job killed by SIGKILL (or the OOM killer): its orphan guard stops every pooled server."""
    env = {k: v for k, v in os.environ.items() if k != POOL_ENV}
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path / "pool"), str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )
    try:
        pid = int(owner.stdout.readline())
        group = live_processes(pid, pid)
        assert len(group) >= 2
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=10)
        deadline = time.monotonic() + 30
        while any(alive(p) for p in group) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [p for p in group if alive(p)] == []
    finally:
        owner.kill()


def test_the_idle_budget_keeps_the_most_recently_leased_servers(tmp_path, starts_file):
    with EnginePool.open(tmp_path / "pool") as pool:
        with lease(plan(tmp_path, "a"), pool, progress=False) as a:
            first = a.pid
        time.sleep(0.05)  # record times order the leases
        with lease(plan(tmp_path, "b"), pool, progress=False, keep_idle=1) as b:
            second = b.pid
        time.sleep(0.05)
        with lease(plan(tmp_path, "c"), pool, progress=False, keep_idle=1):
            deadline = time.monotonic() + 10
            while alive(first) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not alive(first) and alive(second)  # one idle kept: the one leased last
