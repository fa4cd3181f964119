"""Driver and firmware: what is installed on disk versus what the running system has loaded.

A driver or firmware package takes effect only after a reboot. Until then `npu-smi info` reports the
old driver version while `<root>/driver/version.info` already names the new one, and ops can return
garbage. The loaded driver comes from the npu-smi header ("Version: 25.0.rc1.1"), the loaded firmware
from `npu-smi info -t board -i N` ("Firmware Version"). The driver's own version.info also states which
firmware it works with (`compatible_version_fw=[7.0.0,7.7.99]`).
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.envcheck.context import CheckContext
from workbench.envcheck.infofiles import ascend_version_key, in_range, parse_range, read_key_values
from workbench.envcheck.npu_smi import NpuSmiReading
from workbench.envcheck.result import CheckResult, Group, failed, passed, skipped

G = Group.FIRMWARE


@dataclass(frozen=True)
class InstalledFirmware:
    """Versions on disk (None = file missing) and the driver's compatible firmware range."""

    driver: str | None
    firmware: str | None
    firmware_range: tuple[str, str] | None


def read_installed_firmware(ctx: CheckContext) -> InstalledFirmware:
    driver = read_key_values(ctx.ascend_root / "driver" / "version.info") or {}
    firmware = read_key_values(ctx.ascend_root / "firmware" / "version.info") or {}
    return InstalledFirmware(
        driver.get("Version") or driver.get("package_version"),
        firmware.get("Version"),
        parse_range(driver.get("compatible_version_fw", "")),
    )


def _direction(on_disk: str, loaded: str) -> str:
    return "newer" if ascend_version_key(on_disk) > ascend_version_key(loaded) else "older"


def _reboot_check(
    name: str, what: str, on_disk: str | None, loaded: str | None, disk_file: str, no_loaded: str
) -> CheckResult:
    if on_disk is None:
        return skipped(name, G, f"no {disk_file}")
    if loaded is None:
        return skipped(name, G, no_loaded)
    expected = f"loaded {what} == installed {what}"
    if ascend_version_key(on_disk) == ascend_version_key(loaded):
        return passed(name, G, f"{what} {loaded} loaded and installed", expected)
    return failed(
        name,
        G,
        f"{what} {on_disk} on disk is {_direction(on_disk, loaded)} than the loaded {loaded}: installed after the last boot",
        expected,
        f"reboot the machine so {what} {on_disk} is loaded (until then ops may return garbage); "
        "check again with `npu-smi info` afterwards",
    )


def check_driver_loaded(installed: InstalledFirmware, reading: NpuSmiReading, ctx: CheckContext) -> CheckResult:
    loaded = reading.table.driver_version if reading.table else None
    why = reading.absent or reading.error or "no npu-smi table"
    return _reboot_check(
        "firmware.driver_reboot",
        "driver",
        installed.driver,
        loaded,
        f"{ctx.ascend_root}/driver/version.info",
        f"loaded driver unknown: {why}",
    )


def check_firmware_loaded(installed: InstalledFirmware, reading: NpuSmiReading, ctx: CheckContext) -> CheckResult:
    loaded = (reading.board or {}).get("Firmware Version")
    why = reading.absent or reading.error or "`npu-smi info -t board` gave no Firmware Version"
    return _reboot_check(
        "firmware.firmware_reboot",
        "firmware",
        installed.firmware,
        loaded,
        f"{ctx.ascend_root}/firmware/version.info",
        f"loaded firmware unknown: {why}",
    )


def check_firmware_compatible(installed: InstalledFirmware, reading: NpuSmiReading) -> CheckResult:
    """The running (else installed) firmware must lie in the driver's compatible_version_fw range."""
    name = "firmware.compatible"
    firmware = (reading.board or {}).get("Firmware Version") or installed.firmware
    if installed.firmware_range is None or firmware is None:
        return skipped(name, G, "needs the driver's compatible_version_fw and a firmware version")
    low, high = installed.firmware_range
    expected = f"firmware in [{low}, {high}] for driver {installed.driver}"
    if in_range(firmware, installed.firmware_range):
        return passed(name, G, f"firmware {firmware}", expected)
    return failed(
        name,
        G,
        f"firmware {firmware} outside the range driver {installed.driver} supports",
        expected,
        "install the firmware package released with this driver (same Ascend HDK version), then reboot",
    )


def check_firmware(installed: InstalledFirmware, reading: NpuSmiReading, ctx: CheckContext) -> list[CheckResult]:
    return [
        check_driver_loaded(installed, reading, ctx),
        check_firmware_loaded(installed, reading, ctx),
        check_firmware_compatible(installed, reading),
    ]
