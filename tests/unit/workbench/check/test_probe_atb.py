"""The device probe's ATB step: one `_npu_reshape_and_cache` call, because NNAL/ATB fails only when called.

Injected children are real processes (as in test_probe.py); their output is what the real probe prints.
"""

from __future__ import annotations

import sys

from tests.unit.workbench.check.fakes import make_ctx
from workbench.check.probe import ATB_MARKER, EXPECTED_ATB_SUM, MARKER, PROBE_CODE, check_device_init
from workbench.check.result import Status
from workbench.stack.presence import NpuPresence

NOWHERE = NpuPresence(False, "no Ascend NPU here")
NNAL = "OSError: [Errno 2] Please check that the nnal package is installed. Please run 'source set_env.sh' in the NNAL installation path."


def probe_with(tmp_path, code: str):
    ctx = make_ctx(tmp_path, run_probe=True, probe_command=(sys.executable, "-c", code), probe_timeout_s=30.0)
    return check_device_init(ctx, NOWHERE, torch_npu_installed=False)


def test_the_default_probe_calls_one_atb_kernel():
    assert "torch_npu._npu_reshape_and_cache(" in PROBE_CODE and ATB_MARKER in PROBE_CODE


def test_atb_missing_is_classified_with_the_nnal_fix(tmp_path):
    code = f"import sys; print('{MARKER} 8.0', flush=True); sys.stderr.write({NNAL!r}); sys.exit(1)"
    result = probe_with(tmp_path, code)
    assert result.status is Status.FAIL and "NNAL/ATB library missing" in result.observed
    assert "nnal/atb/set_env.sh" in result.fix


def test_atb_writing_wrong_values_fails(tmp_path):
    result = probe_with(tmp_path, f"print('{MARKER} 8.0'); print('{ATB_MARKER} 0.0')")
    assert result.status is Status.FAIL and "_npu_reshape_and_cache wrote" in result.observed


def test_a_working_atb_kernel_passes_and_is_reported(tmp_path):
    result = probe_with(tmp_path, f"print('{MARKER} 8.0'); print('{ATB_MARKER} {EXPECTED_ATB_SUM}')")
    assert result.status is Status.PASS and f"ATB _npu_reshape_and_cache wrote {EXPECTED_ATB_SUM}" in result.observed
