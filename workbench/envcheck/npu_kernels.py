"""Pre-flight items about the NPU kernels: NNAL/ATB loads, and the kernel the selection table picks per
attention state on this machine (`workbench.stack.kernels` shows the whole table).

Only for a machine with torch_npu installed: these checks import it.
"""

from __future__ import annotations

from ascend_backend.platform import kernels
from workbench.envcheck.result import CheckResult, Group, failed, passed, skipped


def device_checks() -> list[CheckResult]:
    """Pre-flight items for a machine with torch_npu installed (call only there: this imports torch_npu):
    `device.atb` (NNAL/ATB loads; op-plugin would only fail at the first `_npu_*` call) and
    `device.kernels` (the release, chip and graph mode the selection sees, and the attention kernels)."""
    from ascend_backend.platform import device

    status = device.npu_status()
    if not status.available:
        reason = f"torch_npu unusable: {status.kind.value} ({status.detail})"
        return [skipped("device.atb", Group.DEVICE, reason), skipped("device.kernels", Group.DEVICE, reason)]
    atb = device.atb_status()
    atb_check = (
        passed("device.atb", Group.DEVICE, atb.detail, "op-plugin's ATB kernels load (NNAL present and matching)")
        if atb.available
        else failed("device.atb", Group.DEVICE, f"{atb.kind.value}: {atb.detail}", "ATB kernels load", atb.fix)
    )
    choices = {op: kernels.choose(op) for op in kernels.STATES}
    chosen = "; ".join(
        f"{kernels.STATES[op]}: {c.kernel} ({c.row.id if c.row else c.reason})" for op, c in choices.items()
    )
    observed = f"{kernels.active_context().describe()}; {chosen}"
    return [
        atb_check,
        passed("device.kernels", Group.DEVICE, observed, "the kernel-selection table's choice per state"),
    ]
