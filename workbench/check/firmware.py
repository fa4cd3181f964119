"""Driver and firmware: what is installed on disk versus what the running system has loaded.

A driver or firmware package takes effect only after a reboot. Until then `npu-smi info` reports the
old driver version while `<root>/driver/version.info` already names the new one, and ops can return
garbage. The loaded driver comes from the npu-smi header ("Version: 25.0.rc1.1"), the loaded firmware
from `npu-smi info -t board -i N` ("Firmware Version"). The driver's own version.info also states which
firmware it works with (`compatible_version_fw=[7.0.0,7.7.99]`), and its `Innerversion`
(V100R001C21SPC002B220) and component versions (`ascendhal_version=7.35.23`) are what the CANN toolkit's
own files name when they say which driver they run on (`check_driver_cann`).
"""

from __future__ import annotations

from workbench.check.context import CheckContext
from workbench.check.result import CheckResult, Group, failed, passed, skipped, warned
from workbench.stack.cann import DriverRequirements
from workbench.stack.firmware import InstalledFirmware, inner_family
from workbench.stack.infofiles import ascend_version_key, in_range
from workbench.stack.npu_smi import NpuSmiReading

G = Group.FIRMWARE


def check_driver_cann(installed: InstalledFirmware, needs: DriverRequirements) -> CheckResult:
    """The driver on disk against what the CANN toolkit's version files ask of it (docs/METHOD.md §2).

    A `required_driver_<c>_version` the driver's `<c>_version` falls short of fails (the toolkit states
    it as a requirement). A driver family missing from the toolkit's `compatible_version` list warns: the
    list is what the toolkit's installer checks, but a hot-fix driver may postdate the toolkit.
    Skipped when either side's files do not say (no driver version.info, no toolkit lists).
    """
    name = "firmware.driver_cann"
    if installed.driver is None:
        return skipped(name, G, "no driver version.info")
    if not needs.compatible_inner and not needs.minimums:
        return skipped(name, G, "the CANN toolkit's files name no driver requirement (no compatible_version list)")
    have = dict(installed.driver_components)
    short = [
        f"{component} {have[component]} < required {wanted}"
        for component, wanted in needs.minimums
        if component in have and ascend_version_key(have[component]) < ascend_version_key(wanted)
    ]
    family = inner_family(installed.driver_inner or "")
    listed = needs.compatible_inner
    files = ", ".join(str(p) for p in needs.sources)
    expected = f"driver family in [{', '.join(listed)}]" if listed else "driver components >= the toolkit's minimums"
    observed = f"driver {installed.driver} (family {family or 'unknown'})"
    fix = (
        "install a driver (Ascend HDK) release that this CANN release supports, or the CANN release made for "
        "this driver; Ascend's compatibility table for the CANN release lists the pairs, then reboot"
    )
    if short:
        return failed(name, G, f"{observed}: {'; '.join(short)} ({files})", expected, fix)
    if listed and family is not None and family not in listed:
        return warned(name, G, f"{observed} is not in the toolkit's compatible_version list ({files})", expected, fix)
    if listed and family is None:
        return skipped(name, G, f"{observed}: the driver's version.info has no Innerversion to match against {files}")
    return passed(name, G, f"{observed} fits the toolkit ({files})", expected)


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
