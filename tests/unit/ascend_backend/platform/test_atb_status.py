"""NNAL/ATB reported before serving: op-plugin defers the load error to the first `_npu_*` call, we do not.

The fake torch_npu packages below are real modules with op-plugin's loader shape
(torch_npu.op_plugin.atb._atb_ops._register_atb_extensions, op_plugin/python/atb/_atb_ops.py): what they
raise is the text op-plugin raises (7.2.0: "Please check that the nnal package is installed. ...").
"""

from __future__ import annotations

import sys
import types

import pytest

import ascend_backend.platform.device as device_mod
from ascend_backend.platform import kernels
from ascend_backend.platform.device import classify_atb_load, classify_npu_import_error
from ascend_backend.platform.kinds import NpuStatus, NpuUnavailable

NNAL_MESSAGE = (
    "Please check that the nnal package is installed. Please run 'source set_env.sh' in the NNAL installation path."
)


def fake_torch_npu(monkeypatch, name: str, register) -> types.ModuleType:
    """A package `name` with `name.op_plugin.atb._atb_ops._register_atb_extensions = register`."""
    modules = {}
    for part in (name, f"{name}.op_plugin", f"{name}.op_plugin.atb", f"{name}.op_plugin.atb._atb_ops"):
        modules[part] = types.ModuleType(part)
        modules[part].__path__ = []  # a package, so the dotted import resolves through sys.modules
        monkeypatch.setitem(sys.modules, part, modules[part])
    modules[f"{name}.op_plugin.atb._atb_ops"]._register_atb_extensions = register
    return modules[name]


def test_the_nnal_load_error_is_atb_missing_with_the_fix(monkeypatch):
    def register():
        try:
            raise OSError("libatb.so: cannot open shared object file: No such file or directory")
        except OSError as cause:
            raise OSError(2, NNAL_MESSAGE) from cause

    module = fake_torch_npu(monkeypatch, "fake_npu_a", register)
    status = classify_atb_load(*device_mod._load_atb(module))
    assert status.kind is NpuUnavailable.ATB_MISSING
    assert "nnal package is installed" in status.detail and "libatb.so" in status.detail
    assert "nnal/atb/set_env.sh" in status.fix


def test_a_loaded_library_with_no_registered_kernels_is_still_missing(monkeypatch):
    module = fake_torch_npu(monkeypatch, "fake_npu_b", lambda: None)
    error, registered = device_mod._load_atb(module)  # torch.ops.atb has no ATB kernels on this machine
    assert error is None and registered is False
    assert classify_atb_load(error, registered).kind is NpuUnavailable.ATB_MISSING


def test_loaded_kernels_are_available():
    assert classify_atb_load(None, True).available


def test_atb_status_is_the_npu_status_when_torch_npu_is_unusable(monkeypatch):
    status = NpuStatus(NpuUnavailable.NOT_INSTALLED, "no module named torch_npu", "install it")
    monkeypatch.setattr(device_mod, "_load_torch_npu", lambda: (None, status))
    assert device_mod.atb_status.__wrapped__() == status


@pytest.mark.parametrize(
    "text",
    [
        f"Traceback (most recent call last):\n  ...\nOSError: [Errno 2] {NNAL_MESSAGE}",
        "OSError: Please check the version of the NNAL package. An undefined symbol was found, which may be caused by a "
        "version mismatch between NNAL and torch_npu.",
        "OSError: libop_plugin_atb.so: undefined symbol: _ZN3atb9Operation5SetupEv",
    ],
)
def test_op_plugin_messages_classify_as_atb_missing(text):
    status = classify_npu_import_error(text)
    assert status.kind is NpuUnavailable.ATB_MISSING and "NNAL" in status.fix


def test_atb_kernels_go_native_with_the_reason_when_atb_is_missing(monkeypatch):
    missing = NpuStatus(NpuUnavailable.ATB_MISSING, NNAL_MESSAGE, device_mod.ATB_FIX)
    monkeypatch.setattr(device_mod, "atb_status", lambda: missing)
    monkeypatch.setenv("ASCEND_BACKEND_KERNELS", "release=0.11.0,chip=A2")
    decode = kernels.choose("paged_decode_attention")
    assert decode.native and "ATB kernel" in decode.reason and "nnal/atb/set_env.sh" in decode.reason
    assert decode.row is not None and decode.row.kernel == "_npu_paged_attention"
    assert not kernels.choose("rms_norm").native  # aclnn kernels do not need ATB


def test_preflight_items_report_atb_and_the_chosen_kernels(monkeypatch):
    from workbench.envcheck.npu_kernels import device_checks
    from workbench.envcheck.result import Status

    available = NpuStatus(NpuUnavailable.AVAILABLE, "torch_npu 2.7.1.post1", "")
    missing = NpuStatus(NpuUnavailable.ATB_MISSING, NNAL_MESSAGE, device_mod.ATB_FIX)
    monkeypatch.setattr(device_mod, "npu_status", lambda: available)
    monkeypatch.setattr(device_mod, "atb_status", lambda: missing)
    monkeypatch.setenv("ASCEND_BACKEND_KERNELS", "release=0.11.0,chip=A2")
    atb, chosen = device_checks()
    assert atb.name == "device.atb" and atb.status is Status.FAIL and "nnal/atb/set_env.sh" in atb.fix
    assert chosen.status is Status.PASS and "vllm-ascend v0.11.0" in chosen.observed
    assert "DecodeOnly: native" in chosen.observed  # ATB kernels cannot run without NNAL: said, not hidden
    monkeypatch.setattr(device_mod, "atb_status", lambda: available)
    atb, chosen = device_checks()
    assert atb.status is Status.PASS and "DecodeOnly: _npu_paged_attention (decode.pa)" in chosen.observed
