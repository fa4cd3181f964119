"""Device initialisation probe: `import torch, torch_npu; set_device(0)` and one op, in a child process.

A broken CANN/driver pairing does not raise; it segfaults or hangs inside the first device call. Run
in-process, that takes the notebook kernel down with it. The probe runs in a subprocess with its own
session and a timeout: a signal becomes a failed check naming the signal, a hang is killed (the whole
process group) and reported, and a Python error is classified with
`ascend_backend.platform.device.classify_npu_import_error`, all with the child's stderr tail as evidence.

The child adds two ones-vectors of length 4 on the NPU and prints the sum; anything but 8.0 means the
device computes garbage (typically a driver installed without the reboot). Then it calls one ATB
kernel, `torch_npu._npu_reshape_and_cache` (the cache write of most vllm-ascend releases), on a one-slot
cache and prints what it wrote: op-plugin loads NNAL/ATB lazily (op_plugin/python/atb/_atb_ops.py), so
`import torch_npu` succeeds without it and only a call shows the problem. A failed call is classified as
ATB_MISSING with the NNAL fix; a child that prints no ATB line (an injected probe) is judged on the sum.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from workbench.envcheck.context import CheckContext
from workbench.envcheck.result import CheckResult, Group, failed, passed, skipped
from workbench.stack.presence import NpuPresence

G = Group.DEVICE
EXPECTED_SUM = 8.0  # sum(ones(4) + ones(4))
MARKER = "PROBE_RESULT"
ATB_MARKER = "PROBE_ATB"
ATB_HEAD = 128
EXPECTED_ATB_SUM = 0.5 * ATB_HEAD  # one key row of 0.5s written to slot 0

PROBE_CODE = f"""
import torch, torch_npu
torch_npu.npu.set_device(0)
x = torch.ones(4, device="npu:0")
print("{MARKER}", float((x + x).sum().cpu()), flush=True)
key = torch.full((1, 1, {ATB_HEAD}), 0.5, dtype=torch.float16, device="npu:0")
key_cache = torch.zeros(1, 128, 1, {ATB_HEAD}, dtype=torch.float16, device="npu:0")
value_cache = torch.zeros_like(key_cache)
slots = torch.zeros(1, dtype=torch.int32, device="npu:0")
torch_npu._npu_reshape_and_cache(key=key, value=key, key_cache=key_cache, value_cache=value_cache, slot_indices=slots)
print("{ATB_MARKER}", float(key_cache[0, 0].float().sum().cpu()), flush=True)
"""


def default_probe_command() -> tuple[str, ...]:
    return (sys.executable, "-c", PROBE_CODE)


@dataclass(frozen=True)
class ProbeOutcome:
    """What the child did. `returncode` < 0 is death by signal -returncode; `timed_out` means killed."""

    command: tuple[str, ...]
    returncode: int | None
    timed_out: bool
    seconds: float
    stdout: str
    stderr: str

    @property
    def signal_name(self) -> str | None:
        if self.returncode is None or self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"

    def result_value(self, marker: str = MARKER) -> float | None:
        for line in self.stdout.splitlines():
            if line.split()[:1] == [marker]:
                try:
                    return float(line.split()[1])
                except (IndexError, ValueError):
                    return None
        return None


def run_probe(command: tuple[str, ...], timeout_s: float, env: dict[str, str]) -> ProbeOutcome:
    """Run `command` in its own process group; on timeout kill the whole group, never wait forever."""
    start = time.monotonic()
    proc = subprocess.Popen(
        list(command),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the child may have spawned helpers (CANN does)
        out, err = proc.communicate()
        timed_out = True
    return ProbeOutcome(
        tuple(command),
        None if timed_out else proc.returncode,
        timed_out,
        time.monotonic() - start,
        out or "",
        err or "",
    )


def tail(text: str, lines: int = 8, chars: int = 1500) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])[-chars:]


def judge_probe(outcome: ProbeOutcome, timeout_s: float) -> CheckResult:
    """Turn a finished (or killed) probe into a check result."""
    from ascend_backend.platform.device import classify_npu_import_error

    name = "device.init_probe"
    expected = (
        f"set_device(0), ones(4)+ones(4) summing to {EXPECTED_SUM} and one ATB cache write within {timeout_s:.0f} s"
    )
    evidence = tail(outcome.stderr) or tail(outcome.stdout) or "(no output)"
    if outcome.timed_out:
        return failed(
            name,
            G,
            f"hung: no answer after {timeout_s:.0f} s (killed); stderr tail: {evidence}",
            expected,
            "a hang in set_device is usually a card held by another process or a driver/firmware mismatch: check "
            "npu-smi info (processes, health) and reboot after any driver upgrade; rerun with "
            "ASCEND_GLOBAL_LOG_LEVEL=3 ASCEND_SLOG_PRINT_TO_STDOUT=1 to see CANN's last words",
        )
    if outcome.signal_name:
        return failed(
            name,
            G,
            f"crashed with {outcome.signal_name} after {outcome.seconds:.1f} s; stderr tail: {evidence}",
            expected,
            "a crash inside device initialisation points at the CANN/driver/torch_npu combination: check the "
            "matrix and reboot checks above; rerun with ASCEND_GLOBAL_LOG_LEVEL=3 ASCEND_SLOG_PRINT_TO_STDOUT=1",
        )
    if outcome.returncode != 0:
        status = classify_npu_import_error(outcome.stderr or outcome.stdout)
        return failed(name, G, f"exit code {outcome.returncode}: {status.kind.value}: {evidence}", expected, status.fix)
    value = outcome.result_value()
    if value is None:
        return failed(
            name,
            G,
            f"finished without a result line: {evidence}",
            expected,
            "run the probe command by hand to see what it printed",
        )
    if value != EXPECTED_SUM:
        return failed(
            name,
            G,
            f"device computed {value}, not {EXPECTED_SUM}",
            expected,
            "the device returns wrong numbers: reboot if a driver/firmware was installed since the last "
            "boot, then check the matrix row",
        )
    atb = outcome.result_value(ATB_MARKER)
    if atb is not None and atb != EXPECTED_ATB_SUM:
        return failed(
            name,
            G,
            f"the ATB kernel _npu_reshape_and_cache wrote a row summing to {atb}, not {EXPECTED_ATB_SUM}",
            expected,
            "NNAL/ATB runs but writes wrong values: install the NNAL release that matches CANN and torch_npu "
            "(see recipes/matrices) and source /usr/local/Ascend/nnal/atb/set_env.sh",
        )
    atb_text = f"; ATB _npu_reshape_and_cache wrote {atb}" if atb is not None else ""
    return passed(name, G, f"initialised and computed {value}{atb_text} in {outcome.seconds:.1f} s", expected)


def check_device_init(ctx: CheckContext, presence: NpuPresence, torch_npu_installed: bool) -> CheckResult:
    """Run the probe when it can mean something: an Ascend machine with torch_npu (or an injected child)."""
    name = "device.init_probe"
    if not ctx.run_probe:
        return skipped(name, G, "probe turned off (run_probe=False / --no-probe)")
    if ctx.probe_command is None:
        if not presence.present:
            return skipped(name, G, presence.evidence)
        if not torch_npu_installed:
            return skipped(name, G, "torch_npu not installed (see versions.torch_npu)")
    command = ctx.probe_command or default_probe_command()
    return judge_probe(run_probe(command, ctx.probe_timeout_s, ctx.subprocess_env()), ctx.probe_timeout_s)
