"""The pass@1 sandbox: generated code is untrusted; every way it can misbehave is contained and named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workbench.evaluate.datasets import load_dataset
from workbench.evaluate.execution import Limits, Outcome, run_problem, run_program

QUICK = Limits(wall_s=6.0, cpu_s=2, memory_bytes=512 << 20, file_bytes=1 << 20)


@pytest.fixture(scope="module")
def problem0():
    return load_dataset("humaneval", limit=1).problems[0]


def test_canonical_solution_passes_and_a_wrong_one_fails_with_the_assertion(problem0) -> None:
    passed = run_problem(problem0, problem0.reference, QUICK)
    assert passed.outcome is Outcome.PASSED and passed.passed and passed.reason == ""
    assert "audit hook" in passed.isolation and "rlimits" in passed.isolation
    wrong = run_problem(problem0, "    return True\n", QUICK)
    assert wrong.outcome is Outcome.FAILED and wrong.reason.startswith("AssertionError")


def test_a_loop_that_never_ends_is_stopped_by_the_cpu_limit() -> None:
    # A generous wall clock, so on a loaded machine the CPU limit (2 s of CPU) still fires first.
    result = run_program("while True:\n    pass\n", Limits(wall_s=60.0, cpu_s=2))
    assert result.outcome is Outcome.TIMED_OUT and "CPU-time limit of 2 s" in result.reason


def test_a_sleeping_program_is_stopped_by_the_wall_clock() -> None:
    result = run_program("import time\ntime.sleep(60)\n", Limits(wall_s=1.5, cpu_s=2))
    assert result.outcome is Outcome.TIMED_OUT and "wall-clock limit of 1.5 s" in result.reason
    assert result.duration_s < 10


def test_a_huge_allocation_hits_the_memory_limit() -> None:
    result = run_program("data = bytearray(8 * 1024**3)\n", QUICK)
    assert result.outcome is Outcome.MEMORY_LIMIT and "MemoryError" in result.reason


def test_a_large_file_hits_the_file_size_limit_and_small_ones_stay_in_the_sandbox() -> None:
    big = run_program("open('big.bin', 'wb').write(b'x' * (4 << 20))\n", QUICK)
    assert big.outcome is Outcome.FILE_SIZE_LIMIT and "File too large" in big.reason
    small = run_program(
        "import os\nopen('note.txt', 'w').write('hi')\nassert os.getcwd().startswith(os.environ['TMPDIR'])\n", QUICK
    )
    assert small.outcome is Outcome.PASSED


def test_writing_outside_the_sandbox_is_blocked(tmp_path: Path) -> None:
    target = tmp_path / "planted.txt"
    result = run_program(f"open({str(target)!r}, 'w').write('x')\n", QUICK)
    assert result.outcome is Outcome.BLOCKED and "outside the sandbox directory" in result.reason
    assert not target.exists()
    moved = run_program(f"import os\nos.chdir({str(tmp_path)!r})\nopen('relative.txt', 'w').write('x')\n", QUICK)
    assert moved.outcome is Outcome.BLOCKED and not (tmp_path / "relative.txt").exists()


@pytest.mark.parametrize(
    "code",
    [
        "import os\nos.remove({victim!r})\n",
        "import shutil\nshutil.rmtree({folder!r})\n",
        "import os\ntry:\n    os.remove({victim!r})\nexcept BaseException:\n    pass\n",  # swallowing does not help
        "import ctypes\nctypes.CDLL(None).unlink({victim!r}.encode())\n",
    ],
    ids=["os.remove", "shutil.rmtree", "swallowed", "ctypes"],
)
def test_deleting_files_is_blocked_and_they_survive(tmp_path: Path, code: str) -> None:
    folder = tmp_path / "keep"
    folder.mkdir()
    victim = folder / "victim.txt"
    victim.write_text("precious")
    result = run_program(code.format(victim=str(victim), folder=str(folder)), QUICK)
    assert result.outcome is Outcome.BLOCKED and result.reason.startswith("blocked by the sandbox")
    assert victim.read_text() == "precious"


@pytest.mark.parametrize(
    ("code", "event"),
    [
        ("import os\nos.fork()\n", "os.fork"),
        ("import subprocess\nsubprocess.run(['true'])\n", "subprocess.Popen"),
        ("import os\nos.system('true')\n", "os.system"),
        ("import os, signal\nos.kill(1, signal.SIGTERM)\n", "os.kill"),
        ("import socket\nsocket.create_connection(('127.0.0.1', 9))\n", "socket"),
    ],
)
def test_processes_signals_and_network_are_blocked(code: str, event: str) -> None:
    result = run_program(code, QUICK)
    assert result.outcome is Outcome.BLOCKED and event in result.reason


def test_the_environment_is_minimal_and_exiting_early_is_not_a_pass() -> None:
    os.environ["WB_SECRET_FOR_TEST"] = "x"
    try:
        leak = run_program("import os\nassert 'WB_SECRET_FOR_TEST' not in os.environ, 'leaked'\n", QUICK)
    finally:
        del os.environ["WB_SECRET_FOR_TEST"]
    assert leak.outcome is Outcome.PASSED
    early = run_program("import os\nos._exit(0)\n", QUICK)
    assert early.outcome is Outcome.CRASHED and "without a verdict" in early.reason
    exited = run_program("raise SystemExit(0)\n", QUICK)
    assert exited.outcome is Outcome.FAILED and "SystemExit" in exited.reason
    broken = run_program("def f(:\n", QUICK)
    assert broken.outcome is Outcome.FAILED and broken.reason.startswith("SyntaxError")
