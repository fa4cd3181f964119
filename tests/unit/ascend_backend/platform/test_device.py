"""Device detection without torch_npu, and classification of real torch_npu import failures."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ascend_backend.platform import device
from ascend_backend.platform.device import classify_npu_import_error
from ascend_backend.platform.kinds import DeviceKind, NpuUnavailable
from tests.conftest import FIXTURES

ERRORS = FIXTURES / "ascend"


@pytest.mark.parametrize(
    "sample,kind,fix_hint",
    [
        ("error_libhccl_not_found_torch_npu.txt", NpuUnavailable.CANN_NOT_SOURCED, "set_env.sh"),
        ("error_libascendcl_not_found_ais_bench.txt", NpuUnavailable.CANN_NOT_SOURCED, "set_env.sh"),
        ("error_torch_npu_undefined_symbol_atb_issue117.txt", NpuUnavailable.ATB_MISSING, "nnal/atb"),
        ("error_torch_npu_version_mismatch_torch2.9.1_npu2.8.0.txt", NpuUnavailable.TORCH_MISMATCH, "torch"),
    ],
)
def test_classify_real_import_errors(sample, kind, fix_hint):
    status = classify_npu_import_error((ERRORS / sample).read_text())
    assert status.kind is kind
    assert fix_hint in status.fix
    assert status.detail  # the evidence line is kept for the report


def test_unrecognised_error_keeps_the_last_line():
    status = classify_npu_import_error("Traceback...\nRuntimeError: something new")
    assert status.kind is NpuUnavailable.IMPORT_ERROR and status.detail == "RuntimeError: something new"


def test_detect_on_this_machine_is_cpu_with_a_reason():
    info = device.detect()
    if info.kind is not DeviceKind.CPU:
        pytest.skip("an accelerator is present")
    assert not info.npu.available
    assert info.npu.fix  # a cpu machine still says how an NPU would be enabled
    assert info.count == 1 and info.total_memory and info.total_memory > 0
    assert str(info.torch_device) == "cpu"


@pytest.mark.parametrize("name,kind", [("npu:0", DeviceKind.NPU), ("cuda:1", DeviceKind.CUDA), ("cpu", DeviceKind.CPU)])
def test_kind_of(name, kind):
    assert device.kind_of(name) is kind


def test_disable_env_var_short_circuits_the_import():
    code = "import ascend_backend.platform.device as d; s = d.npu_status(); print(s.kind.name)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"ASCEND_BACKEND_DISABLE_NPU": "1", "PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == "DISABLED"


def test_torch_npu_accessor_raises_with_the_reason():
    if device.npu_status().available:
        pytest.skip("an NPU is usable here")
    with pytest.raises(RuntimeError, match="torch_npu unusable"):
        device.torch_npu()
