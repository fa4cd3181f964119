"""The launcher's process handling with real (small) processes: start, health, failure, stop the group.

These do not start vLLM: the "server" is a few lines of Python that behave like the cases that matter
(answers /health, crashes with a vLLM message, never becomes healthy, leaves children behind). vLLM
itself is exercised in tests/integration.
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from workbench.recipes import load_serving_recipe
from workbench.serving.crash import CrashKind, ServerFailure
from workbench.serving.processes import live_processes, stop_process_group
from workbench.serving.server import LaunchPlan, attach, free_port, launch_env, plan_launch, start

FAKE_SERVER = textwrap.dedent(
    """
    import http.server, json, os, subprocess, sys
    # A child in the same group, like vLLM's EngineCore: stopping the server must end it too.
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"{}" if self.path == "/health" else json.dumps({"data": [{"id": "fake", "root": "/nowhere"}]}).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body)
        def log_message(self, *args):
            pass
    print("INFO fake server up", flush=True)
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
    """
)


def processes_running(needle: str) -> list[int]:
    """Live processes whose command line contains `needle` (the fake server's unique script path)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and needle in (entry / "cmdline").read_text(errors="ignore"):
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def plan_for(tmp_path: Path, code: str, *args: str, timeout_s: float = 30.0) -> LaunchPlan:
    port = free_port()
    script = tmp_path / "server.py"
    script.write_text(code)
    return LaunchPlan(
        recipe_name="fake",
        argv=(sys.executable, str(script), str(port), *args),
        env=(("PYTHONUNBUFFERED", "1"),),
        host="127.0.0.1",
        port=port,
        log_path=tmp_path / "server.log",
        startup_timeout_s=timeout_s,
    )


def test_start_attach_and_stop_whole_group(tmp_path):
    server = start(plan_for(tmp_path, FAKE_SERVER), progress=False)
    try:
        assert server.model == "fake"
        pids = server.group_pids()
        assert len(pids) >= 2  # the server and its child
        assert attach(server.url).model == "fake"
        assert server.diagnose() is None
    finally:
        started = time.monotonic()
        server.stop()
    assert live_processes(server.process.pid) == []
    assert processes_running(str(server.plan.argv[1])) == []
    assert time.monotonic() - started < 30
    assert "fake server up" in server.log_text()


def test_crash_during_start_is_classified_and_cleaned_up(tmp_path):
    code = "import sys; print('ValueError: No common block size for 16 (CPU_ATTN: [32]).'); sys.exit(1)"
    plan = plan_for(tmp_path, code)
    with pytest.raises(ServerFailure) as err:
        start(plan, progress=False)
    report = err.value.report
    assert report.kind is CrashKind.BLOCK_SIZE and report.exit_code == 1 and report.log_path == plan.log_path
    assert "block_size" in str(err.value)


def test_death_by_signal_during_start(tmp_path):
    code = "import os, signal; os.kill(os.getpid(), signal.SIGBUS)"
    with pytest.raises(ServerFailure) as err:
        start(plan_for(tmp_path, code), progress=False)
    assert err.value.report.kind is CrashKind.SHM and err.value.report.signal_name == "SIGBUS"


def test_start_timeout_kills_the_group(tmp_path):
    code = (
        "import subprocess, sys, time; subprocess.Popen([sys.executable, sys.argv[0], sys.argv[1], 'child']) if len(sys.argv) < 3 "
        "else time.sleep(600); print('loading weights', flush=True); time.sleep(600)"
    )
    plan = plan_for(tmp_path, code, timeout_s=3)
    with pytest.raises(ServerFailure) as err:
        start(plan, progress=False)
    assert err.value.report.kind is CrashKind.START_TIMEOUT
    assert "loading weights" in err.value.report.evidence[0]
    assert processes_running(str(plan.argv[1])) == []


def test_stop_process_group_escalates_to_sigkill():
    import subprocess

    child = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    proc = subprocess.Popen([sys.executable, "-c", child], start_new_session=True)
    time.sleep(0.5)
    started = time.monotonic()
    stop_process_group(proc, grace_s=1.0)
    assert proc.returncode == -signal.SIGKILL
    assert live_processes(proc.pid) == []
    assert time.monotonic() - started < 10


def test_plan_for_a_local_model(tmp_path):
    recipe = load_serving_recipe("cpu-tiny").with_overrides(model=str(tmp_path), env={"EXTRA": "1"})
    plan = plan_launch(
        recipe, extra_env={"ASCEND_BACKEND_FAULT": "rms_norm:nan"}, extra_args=("--seed", "0"), log_dir=tmp_path
    )
    argv = list(plan.argv)
    assert argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert argv[argv.index("--model") + 1] == str(tmp_path)
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv[argv.index("--port") + 1] == str(plan.port)
    assert argv[argv.index("--block-size") + 1] == "32" and argv[-2:] == ["--seed", "0"]
    env = dict(plan.env)
    assert env["HF_HUB_OFFLINE"] == "1" and env["EXTRA"] == "1" and env["ASCEND_BACKEND_FAULT"] == "rms_norm:nan"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1" and env["VLLM_CPU_OMP_THREADS_BIND"]
    assert plan.log_path.parent == tmp_path and plan.url == f"http://127.0.0.1:{plan.port}"


def test_explicit_kv_bytes_beat_the_cpu_env_default(tmp_path):
    recipe = load_serving_recipe("cpu-tiny").with_overrides(
        model=str(tmp_path), engine={"kv_cache_memory_bytes": "4MiB"}
    )
    env = launch_env(recipe, True, {"VLLM_CPU_KVCACHE_SPACE": "2"})
    assert "VLLM_CPU_KVCACHE_SPACE" not in env
    npu = load_serving_recipe("ascend-7b-chat")
    npu_env = launch_env(npu, True, None)
    assert "VLLM_CPU_OMP_THREADS_BIND" not in npu_env and npu_env["ASCEND_RT_VISIBLE_DEVICES"] == "0"


def test_attach_to_nothing_says_what_to_check():
    from workbench.errors import WorkbenchError

    with pytest.raises(WorkbenchError, match="/health did not answer"):
        attach(f"http://127.0.0.1:{free_port()}", timeout_s=1)
    with pytest.raises(WorkbenchError, match="base URL"):
        attach("127.0.0.1:8000")


def test_server_is_a_context_manager(tmp_path):
    with start(plan_for(tmp_path, FAKE_SERVER), progress=False) as server:
        assert len(server.group_pids()) >= 2
    assert live_processes(server.process.pid) == []
    assert processes_running(str(server.plan.argv[1])) == []


# Answers /health; a GET of /exit-soon is answered, then the process SIGKILLs itself 3 s later: a server on
# its way out, as a killed vLLM server is when the client's requests have already failed.
EXITS_SOON = FAKE_SERVER.replace(
    "    def do_GET(self):\n",
    "    def do_GET(self):\n"
    "        if self.path == '/exit-soon':\n"
    "            import os, signal, threading, time\n"
    "            threading.Thread(target=lambda: (time.sleep(3), os.kill(os.getpid(), signal.SIGKILL))).start()\n",
)
assert EXITS_SOON != FAKE_SERVER


def test_a_diagnosis_after_failed_requests_waits_for_the_server_on_its_way_out(tmp_path):
    import httpx

    from workbench.serving.server import AFTER_FAILED_REQUESTS_S

    with start(plan_for(tmp_path, EXITS_SOON), progress=False) as server:
        assert server.diagnose(wait_s=0.2) is None  # alive: waiting changes nothing
        httpx.get(f"{server.url}/exit-soon", timeout=10)
        assert server.diagnose() is None  # not dead yet: a diagnosis without waiting cannot see it
        began = time.monotonic()
        report = server.diagnose(wait_s=AFTER_FAILED_REQUESTS_S)
        assert report is not None and report.kind is CrashKind.KILLED and report.signal_name == "SIGKILL"
        assert time.monotonic() - began < AFTER_FAILED_REQUESTS_S  # it returned once the exit showed


OWNER = textwrap.dedent(
    """
    import sys, time
    from workbench.serving.server import LaunchPlan, start
    plan = LaunchPlan("fake", ({python!r}, {script!r}, "{port}"), (("PYTHONUNBUFFERED", "1"),), "127.0.0.1", {port},
                      __import__("pathlib").Path({log!r}), 30.0)
    server = start(plan, progress=False)   # what a notebook kernel does with connect(recipe=...)
    print("started", flush=True)
    time.sleep(600)
    """
)


def test_a_killed_launcher_leaves_no_server_behind(tmp_path):
    """SIGKILL the process that started a server (an OOM kill, a killed kernel): the guard stops the server."""
    import subprocess

    script = tmp_path / "server.py"
    script.write_text(FAKE_SERVER)
    code = OWNER.format(python=sys.executable, script=str(script), port=free_port(), log=str(tmp_path / "s.log"))
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "started"
        assert len(processes_running(str(script))) >= 2  # the server and its child
        owner.kill()
        owner.wait(timeout=10)
        deadline = time.monotonic() + 30
        while processes_running(str(script)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert processes_running(str(script)) == []
    finally:
        owner.kill()
        for pid in processes_running(str(script)):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(
    "cores, ranks, expected",
    [([0, 1], 1, "0-1"), ([0, 1], 2, "0|1"), (list(range(8)), 2, "0-3|4-7"), ([0, 2, 4], 1, "0,2,4"), ([3], 1, "3")],
)
def test_cpu_threads_bind_gives_each_rank_its_cores(cores, ranks, expected):
    from workbench.serving.device_groups import cpu_threads_bind

    assert cpu_threads_bind(cores, ranks) == expected


def test_tensor_parallel_recipe_binds_one_group_per_rank(tmp_path, monkeypatch):
    from workbench.errors import WorkbenchError

    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0, 1})
    recipe = load_serving_recipe("cpu-tiny").with_overrides(model=str(tmp_path), engine={"tensor_parallel_size": 2})
    assert launch_env(recipe, True, None)["VLLM_CPU_OMP_THREADS_BIND"] == "0|1"
    too_many = recipe.with_overrides(engine={"tensor_parallel_size": 4})
    with pytest.raises(WorkbenchError, match="4 CPU ranks .* need at least 4 cores"):
        launch_env(too_many, True, None)


def test_an_npu_server_whose_atb_kernels_cannot_load_is_refused_before_starting(monkeypatch, tmp_path):
    """op-plugin defers the NNAL/ATB load to the first kernel call: the launcher asks first, so the
    user gets the fix instead of a server that fails minutes later in its first forward."""
    from ascend_backend.platform import device
    from workbench.errors import WorkbenchError
    from workbench.serving import server as server_mod

    monkeypatch.setattr(device, "npu_status", lambda: device.NpuStatus(device.NpuUnavailable.AVAILABLE, "npu:0", ""))
    monkeypatch.setattr(
        device,
        "atb_status",
        lambda: device.NpuStatus(
            device.NpuUnavailable.ATB_MISSING, "libatb.so: cannot open shared object file", device.ATB_FIX
        ),
    )
    monkeypatch.setattr(server_mod, "start", lambda *a, **k: pytest.fail("a server was started"))
    recipe = load_serving_recipe("ascend-7b-chat").with_overrides(model=str(tmp_path))
    with pytest.raises(WorkbenchError, match="NPU kernels cannot load .*libatb.so.*fix: install the NNAL package"):
        server_mod.launch(recipe)


def test_a_tp1_cpu_server_runs_its_engine_in_the_api_server_unless_the_recipe_says_otherwise():
    tiny = load_serving_recipe("cpu-tiny")
    assert launch_env(tiny, True, None)["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    tp2 = tiny.with_overrides(engine={"tensor_parallel_size": 2})
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in launch_env(tp2, True, None)  # the multiprocess executor
    kept = tiny.with_overrides(env={**tiny.env, "VLLM_ENABLE_V1_MULTIPROCESSING": "1"})
    assert launch_env(kept, True, None)["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in launch_env(load_serving_recipe("ascend-7b-chat"), True, None)
    plan = plan_launch(tiny)
    assert plan.in_process_worker and not plan_launch(tp2).in_process_worker
