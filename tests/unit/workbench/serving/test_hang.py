"""The hang watchdog: the stall rule on readings, the evidence, and a load against a server that stops.

`StallServer` below is a small threaded HTTP server that streams completions the way vLLM does and
keeps vLLM's counters on /metrics (prompt and generation tokens, engine steps, running requests); told
to freeze, it stops streaming and stops counting while its requests stay open: what an NPU engine
waiting in a collective looks like from outside. The real-server version (an EngineCore stopped with
SIGSTOP) is tests/integration/test_hang.py.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from workbench.serving.crash import CrashKind
from workbench.serving.hang import HangWatchdog, ServerHung, StallClock, describe_processes
from workbench.serving.load.runner import HangWatch, run_coroutine, run_load_async
from workbench.serving.load.workload import Prompt, Workload
from workbench.serving.prometheus import MetricsSnapshot


class StallServer:
    """Streams `tokens_before_freeze` tokens in all, then freezes (no token, no counter) until `thaw()`."""

    def __init__(self, tokens_before_freeze: int = 10**9, gap_s: float = 0.01, metrics: bool = True):
        self.tokens_before_freeze = tokens_before_freeze
        self.gap_s = gap_s
        self.metrics = metrics
        self.metrics_blocked = threading.Event()  # set: /metrics stops answering (the API server itself blocked)
        self.lock = threading.Lock()
        self.generated = 0
        self.prompt_tokens = 0
        self.steps = 0
        self.running = 0
        self.thawed = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                if self.path != "/metrics" or not owner.metrics:
                    self.send_error(404)
                    return
                while owner.metrics_blocked.is_set() and not owner.thawed.is_set():
                    time.sleep(0.05)
                body = owner.metrics_text().encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                with owner.lock:
                    owner.running += 1
                    owner.prompt_tokens += 4
                try:
                    for i in range(request["max_tokens"]):
                        owner.wait_while_frozen()
                        time.sleep(owner.gap_s)
                        with owner.lock:
                            owner.generated += 1
                            owner.steps += 1
                        chunk = {"choices": [{"index": 0, "text": f" t{i}"}], "usage": None}
                        self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                        self.wfile.flush()
                    usage = {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": request["max_tokens"]}}
                    self.wfile.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with owner.lock:
                        owner.running -= 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def wait_while_frozen(self) -> None:
        while self.generated >= self.tokens_before_freeze and not self.thawed.is_set():
            time.sleep(0.05)

    def thaw(self) -> None:
        self.thawed.set()

    def metrics_text(self) -> str:
        with self.lock:
            return "\n".join(
                [
                    "# TYPE vllm:num_requests_running gauge",
                    f'vllm:num_requests_running{{engine="0",model_name="m"}} {self.running}',
                    'vllm:num_requests_waiting{engine="0",model_name="m"} 0',
                    f'vllm:prompt_tokens_total{{engine="0",model_name="m"}} {self.prompt_tokens}',
                    f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {self.generated}',
                    f'vllm:iteration_tokens_total_count{{engine="0",model_name="m"}} {self.steps}',
                    "",
                ]
            )

    def close(self) -> None:
        self.thaw()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def stall_server():
    servers: list[StallServer] = []

    def make(**kwargs) -> StallServer:
        servers.append(StallServer(**kwargs))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


PROMPTS = [Prompt(text=f"p{i}", num_tokens=4) for i in range(4)]


def _load(url: str, watch: HangWatch | None, records: Path | None = None, num_prompts: int = 4):
    workload = Workload(input_len=4, output_len=8, num_prompts=num_prompts, concurrency=2, request_timeout_s=60.0)
    return run_coroutine(run_load_async(url, "m", PROMPTS, workload, progress=False, hang=watch, records_path=records))


# -- the stall rule ----------------------------------------------------------------------------------


def _snapshot(at: float, tokens: float, running: float = 1.0) -> MetricsSnapshot:
    return MetricsSnapshot(
        at, running=running, waiting=0.0, prompt_tokens=4.0, generation_tokens=tokens, iteration_tokens_count=tokens
    )


def _observe(clock: StallClock, at: float, tokens: float | None, running: float = 1.0, in_flight=None) -> float:
    """One reading at `at`; tokens None = /metrics did not answer."""
    return clock.observe(at, None if tokens is None else _snapshot(at, tokens, running), in_flight)


def test_busy_without_progress_accumulates_and_progress_resets_it():
    clock = StallClock()
    assert _observe(clock, 0.0, 5, in_flight=2) == 0.0
    assert _observe(clock, 1.0, 5, in_flight=2) == 1.0
    assert _observe(clock, 3.5, 5, in_flight=2) == 3.5
    assert _observe(clock, 4.0, 6, in_flight=2) == 0.0  # a token: progress
    assert _observe(clock, 6.0, 6, in_flight=2) == 2.0


def test_an_idle_engine_is_never_stalled():
    clock = StallClock()
    for t in range(10):
        assert _observe(clock, float(t), 5, running=0.0, in_flight=0) == 0.0
    # with no client (serve), the server's running gauge decides
    assert _observe(StallClock(), 0.0, 5, running=0.0) == 0.0
    clock = StallClock()
    _observe(clock, 0.0, 5, running=3.0)
    assert _observe(clock, 7.0, 5, running=3.0) == 7.0


def test_an_unanswered_metrics_read_is_no_progress():
    clock = StallClock()
    _observe(clock, 0.0, 5, in_flight=1)
    assert _observe(clock, 2.0, None, in_flight=1) == 2.0
    assert clock.last_answer is not None and clock.last_answer.at_s == 0.0


# -- the watchdog on a server ---------------------------------------------------------------------------


def test_a_load_on_a_server_that_stops_producing_ends_hung_with_the_evidence(stall_server, tmp_path):
    server = stall_server(tokens_before_freeze=20)  # the first two requests (8 tokens each) complete, then it freezes
    records = tmp_path / "requests.jsonl"
    began = time.monotonic()
    with pytest.raises(ServerHung) as caught:
        _load(server.url, HangWatch(hang_after_s=1.5), records)
    took = time.monotonic() - began
    report = caught.value.report
    assert report.kind is CrashKind.HUNG
    assert took < 15.0, "the load waited for its request timeout instead of the watchdog"
    assert "requests in flight" in report.evidence[0]
    assert any(f"generated tokens {server.generated}," in line for line in report.evidence)
    assert caught.value.completed == 2
    assert len(records.read_text().splitlines()) == 2, "the requests finished before the hang are kept"
    assert "ascend-workbench triage" in report.fix and "HCCL_EXEC_TIMEOUT" in report.fix


def test_a_slow_server_that_keeps_producing_is_not_hung(stall_server):
    server = stall_server(gap_s=0.3)  # a token every 0.3 s: slow, never stalled for 1 s
    result = _load(server.url, HangWatch(hang_after_s=1.0), num_prompts=2)
    assert result.summary.completed == 2 and result.summary.failed == 0


def test_metrics_that_stop_answering_with_requests_in_flight_is_a_hang(stall_server):
    server = stall_server(tokens_before_freeze=4)
    threading.Timer(0.5, server.metrics_blocked.set).start()  # the API server blocks with its engine
    with pytest.raises(ServerHung) as caught:
        _load(server.url, HangWatch(hang_after_s=2.0))
    assert any("/metrics has not answered" in line for line in caught.value.report.evidence)


def test_a_server_without_metrics_cannot_be_judged_and_says_so(stall_server):
    server = stall_server(metrics=False, tokens_before_freeze=4)
    said: list[str] = []
    with HangWatchdog(server.url, hang_after_s=0.5, interval_s=0.1, in_flight=lambda: 1, on_blind=said.append) as dog:
        time.sleep(1.2)
    assert dog.report is None and not dog.hung.is_set()
    assert len(said) == 1 and "never answered" in said[0]


def test_the_watchdog_reports_once_per_episode_and_sees_the_recovery(stall_server):
    server = stall_server(tokens_before_freeze=3)
    hangs, recoveries = [], []
    with HangWatchdog(server.url, hang_after_s=0.6, interval_s=0.1, on_hang=hangs.append, on_recover=recoveries.append):
        sender = threading.Thread(target=_load, args=(server.url, None), kwargs={"num_prompts": 1}, daemon=True)
        sender.start()
        deadline = time.monotonic() + 10
        while not hangs and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # still hung: no second report
        server.thaw()
        sender.join(timeout=10)
        time.sleep(0.3)
    assert len(hangs) == 1 and hangs[0].kind is CrashKind.HUNG
    assert "requests running" in hangs[0].evidence[0]  # no client count: the server's gauge
    assert len(recoveries) == 1


def test_the_evidence_names_a_stopped_process():
    child = subprocess.Popen(["sleep", "30"])
    try:
        child.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 5
        lines: tuple[str, ...] = ()
        while time.monotonic() < deadline and not any("stopped (T)" in line for line in lines):
            lines = describe_processes([child.pid])
            time.sleep(0.05)
        assert lines == (f"process {child.pid} sleep: stopped (T)",)
        assert describe_processes([2**22 + 7]) == ()  # gone: no line
    finally:
        child.kill()
        with contextlib.suppress(Exception):
            child.wait(timeout=5)
