"""`npu-smi info` judged: cards visible, health, and device memory already in use (the pre-flight's npu-smi
group, docs/METHOD.md §6, §14). Running and parsing npu-smi is the stack's job (`workbench.stack.npu_smi`).
"""

from __future__ import annotations

from workbench.check.context import CheckContext
from workbench.check.result import CheckResult, Group, failed, passed, skipped, warned
from workbench.stack.npu_smi import NpuSmiReading
from workbench.stack.presence import NpuPresence

G = Group.NPU_SMI


# -- running npu-smi ----------------------------------------------------------------------------------


# -- checks ---------------------------------------------------------------------------------------------

_DCMI_FIXES = {
    "-8005": "dcmi could not open the device manager: run as root or add the user to the HwHiAiUser group "
    "(usermod -aG HwHiAiUser $USER, then log in again); in a container pass --device /dev/davinci_manager "
    "--device /dev/devmm_svm --device /dev/hisi_hdc and mount /usr/local/dcmi and /usr/local/Ascend/driver",
    "-8020": "the device is held by another container or process: `npu-smi info` on the host lists it; stop it "
    "or give this container other /dev/davinciN devices",
}


def _error_fix(error: str) -> str:
    for code, fix in _DCMI_FIXES.items():
        if code in error:
            return fix
    return "run `npu-smi info` by hand; a driver that does not answer usually needs reinstalling and a reboot"


def check_cards(reading: NpuSmiReading, presence: NpuPresence) -> CheckResult:
    name = "npu_smi.cards"
    if reading.absent:
        if not presence.present:
            return skipped(name, G, f"{reading.absent}: {presence.evidence}")
        return failed(
            name,
            G,
            f"{reading.absent}, but {presence.evidence}",
            "npu-smi lists the cards",
            "put npu-smi on PATH (usually /usr/local/sbin or /usr/local/bin); in containers mount "
            "/usr/local/bin/npu-smi and /usr/local/dcmi from the host",
        )
    if reading.error is not None:
        return failed(name, G, f"npu-smi info failed: {reading.error}", "a table of cards", _error_fix(reading.error))
    table = reading.table
    assert table is not None
    if not table.chips:
        return failed(
            name,
            G,
            "npu-smi lists no chips",
            ">= 1 chip",
            "check the driver install (`dmesg | grep -i davinci`) and, in containers, the --device flags",
        )
    names = sorted({c.name for c in table.chips})
    return passed(
        name,
        G,
        f"{len(table.npu_ids)} NPU(s), {len(table.chips)} chip(s): {', '.join(names)}; driver {table.driver_version}",
    )


def check_health(reading: NpuSmiReading) -> CheckResult:
    name = "npu_smi.health"
    if reading.table is None or not reading.table.chips:
        return skipped(name, G, "no npu-smi table")
    bad = [c for c in reading.table.chips if c.health.upper() != "OK"]
    if not bad:
        return passed(name, G, f"all {len(reading.table.chips)} chip(s) OK", "Health OK")
    listing = ", ".join(f"NPU {c.npu_id} chip {c.chip_id} ({c.name}): {c.health}" for c in bad)
    fix = (
        "read the alarm with `npu-smi info -t health -i <NPU>` and the device log; leave the card out "
        "(ASCEND_RT_VISIBLE_DEVICES) until it is fixed"
    )
    if all(c.health.lower() == "warning" for c in bad):
        return warned(name, G, listing, "Health OK", fix)
    return failed(name, G, listing, "Health OK", fix)


def check_memory(reading: NpuSmiReading, gpu_memory_utilization: float) -> CheckResult:
    """vLLM asks for `gpu_memory_utilization` x total at start; memory already used beyond the rest
    makes it refuse to start (or start with too little KV cache)."""
    name = "npu_smi.memory"
    if reading.table is None or not reading.table.chips:
        return skipped(name, G, "no npu-smi table")
    limit = 1.0 - gpu_memory_utilization
    expected = f"<= {limit:.0%} of device memory in use before the server starts (--gpu-memory-utilization {gpu_memory_utilization})"
    busy = [c for c in reading.table.chips if c.device_total_mb and c.device_used_mb / c.device_total_mb > limit]
    used = ", ".join(f"{c.npu_id}/{c.chip_id}: {c.device_used_mb}/{c.device_total_mb} MB" for c in reading.table.chips)
    if not busy:
        return passed(name, G, f"in use (npu/chip): {used}", expected)
    worst = max(c.device_used_mb / c.device_total_mb for c in busy)
    procs = ", ".join(f"pid {p.pid} {p.name} ({p.memory_mb} MB on NPU {p.npu_id})" for p in reading.table.processes)
    holders = f"; processes: {procs}" if procs else "; npu-smi lists no process (another container holds it)"
    ids = " ".join(str(c.npu_id) for c in busy)
    return warned(
        name,
        G,
        f"busy chips on NPU {ids}: {used}{holders}",
        expected,
        f"free the cards (stop the processes listed) or lower --gpu-memory-utilization to {max(0.05, 0.95 - worst):.2f}",
    )


def check_npu_smi(reading: NpuSmiReading, presence: NpuPresence, ctx: CheckContext) -> list[CheckResult]:
    return [check_cards(reading, presence), check_health(reading), check_memory(reading, ctx.gpu_memory_utilization)]
