"""The device probe with injected children: a real segfault, a hang, a classified import error, a
wrong result and a good one. Each child is a real process; nothing is mocked."""

from __future__ import annotations

import sys
import time

from tests.unit.workbench.check.fakes import fixture_text, make_ctx
from workbench.check.probe import MARKER, PROBE_CODE, check_device_init, default_probe_command
from workbench.check.result import Status
from workbench.stack.presence import NpuPresence

HERE = NpuPresence(True, "test machine")
NOWHERE = NpuPresence(False, "no Ascend NPU here")


def probe_with(tmp_path, code: str, timeout: float = 30.0):
    ctx = make_ctx(tmp_path, run_probe=True, probe_command=(sys.executable, "-c", code), probe_timeout_s=timeout)
    return check_device_init(ctx, NOWHERE, torch_npu_installed=False)  # an injected child always runs


def test_segfault_becomes_failed_check_with_signal_and_stderr(tmp_path):
    code = "import sys, ctypes; print('initialising device', file=sys.stderr, flush=True); ctypes.string_at(0)"
    result = probe_with(tmp_path, code)
    assert result.status is Status.FAIL
    assert "crashed with SIGSEGV" in result.observed and "initialising device" in result.observed


def test_hang_is_killed_at_the_timeout(tmp_path):
    code = "import sys, time; print('set_device(0)...', file=sys.stderr, flush=True); time.sleep(120)"
    start = time.monotonic()
    result = probe_with(tmp_path, code, timeout=1.5)
    assert time.monotonic() - start < 20
    assert result.status is Status.FAIL and "hung: no answer after 2 s (killed)" in result.observed
    assert "set_device(0)..." in result.observed


def test_import_error_is_classified(tmp_path):
    text = fixture_text("error_libhccl_not_found_torch_npu.txt")
    result = probe_with(tmp_path, f"import sys; sys.stderr.write({text!r}); sys.exit(1)")
    assert result.status is Status.FAIL and "CANN libraries not found" in result.observed
    assert "set_env.sh" in result.fix


def test_wrong_sum_and_missing_result(tmp_path):
    assert "device computed 6.0" in probe_with(tmp_path, f"print('{MARKER} 6.0')").observed
    assert probe_with(tmp_path, "print('hello')").status is Status.FAIL


def test_good_child_passes(tmp_path):
    result = probe_with(tmp_path, f"print('{MARKER}', float(sum([1.0] * 4 + [1.0] * 4)))")
    assert result.status is Status.PASS and "computed 8.0" in result.observed


def test_default_probe_is_gated(tmp_path):
    ctx = make_ctx(tmp_path, run_probe=True)
    assert check_device_init(ctx, NOWHERE, torch_npu_installed=True).status is Status.SKIP
    skipped = check_device_init(ctx, HERE, torch_npu_installed=False)
    assert skipped.status is Status.SKIP and "torch_npu not installed" in skipped.observed
    assert check_device_init(make_ctx(tmp_path, run_probe=False), HERE, True).status is Status.SKIP
    assert default_probe_command()[-1] == PROBE_CODE and "torch_npu.npu.set_device(0)" in PROBE_CODE
