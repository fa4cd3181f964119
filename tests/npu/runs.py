"""Run tests/npu/worker.py in a fresh process and collect its JSON lines (one per op and case)."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache

from tests.conftest import REPO_ROOT

TIMEOUT_S = 900


@cache
def worker(override: str, dtype: str, group: str, heads: str = "64,128", device: str = "npu:0") -> tuple[dict, ...]:
    """Results of one worker process (cached: each family/dtype/group runs once per session)."""
    command = [sys.executable, "-m", "tests.npu.worker", "--override", override, "--dtype", dtype]
    command += ["--group", group, "--heads", heads, "--device", device]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        raise AssertionError(f"worker {override} {dtype} {group} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return tuple(json.loads(line[len("RESULT ") :]) for line in done.stdout.splitlines() if line.startswith("RESULT "))


def torch_npu_has(*names: str) -> bool:
    from ascend_backend.platform.device import torch_npu

    return all(hasattr(torch_npu(), name) for name in names)
