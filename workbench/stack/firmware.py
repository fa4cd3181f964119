"""The NPU driver and firmware installed on disk: versions, the firmware range the driver accepts, and the
driver's inner version and component versions (from `<root>/driver/version.info` and
`<root>/firmware/version.info`). What is *loaded* comes from npu-smi (`workbench.stack.npu_smi`); the
pre-flight compares the two (`workbench.check.firmware`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from workbench.stack.context import MachineContext
from workbench.stack.infofiles import parse_range, read_key_values


@dataclass(frozen=True)
class InstalledFirmware:
    """Versions on disk (None = file missing), the driver's compatible firmware range, and the driver's
    inner version and component versions (`ascendhal_version=7.35.23` -> ('ascendhal', '7.35.23'))."""

    driver: str | None
    firmware: str | None
    firmware_range: tuple[str, str] | None
    driver_inner: str | None = None
    driver_components: tuple[tuple[str, str], ...] = ()


_COMPONENT_KEY = re.compile(r"^(\w+)_version$")


def read_installed_firmware(ctx: MachineContext) -> InstalledFirmware:
    driver = read_key_values(ctx.ascend_root / "driver" / "version.info") or {}
    firmware = read_key_values(ctx.ascend_root / "firmware" / "version.info") or {}
    components = tuple(
        sorted((m.group(1), v) for k, v in driver.items() if (m := _COMPONENT_KEY.match(k)) and m.group(1) != "package")
    )
    return InstalledFirmware(
        driver.get("Version") or driver.get("package_version"),
        firmware.get("Version"),
        parse_range(driver.get("compatible_version_fw", "")),
        driver.get("Innerversion") or driver.get("innerversion"),
        components,
    )


def inner_family(inner_version: str) -> str | None:
    """'V100R001C21SPC002B220' -> 'V100R001C21' (the family a toolkit's compatible_version lists)."""
    match = re.match(r"(V\d+R\d+C\d+)", inner_version.strip(), re.IGNORECASE)
    return match.group(1).upper() if match else None
