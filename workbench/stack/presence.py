"""Is this an Ascend machine at all? Decides whether a missing NPU piece is `fail` or `skip`.

On a CPU-only laptop a missing torch_npu is expected and the NPU checks are skipped with that reason;
on a machine that has the Ascend driver or device nodes the same absence is a real failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.stack.context import MachineContext


@dataclass(frozen=True)
class NpuPresence:
    """`present` is True when any sign of Ascend hardware is found; `evidence` names the signs."""

    present: bool
    evidence: str


def detect_presence(ctx: MachineContext) -> NpuPresence:
    """Look for the device manager node, the installed driver and npu-smi (cheap: no subprocess)."""
    signs = []
    if (ctx.dev_dir / "davinci_manager").exists():
        signs.append(f"{ctx.dev_dir / 'davinci_manager'} exists")
    if (ctx.ascend_root / "driver" / "version.info").is_file():
        signs.append(f"driver installed at {ctx.ascend_root / 'driver'}")
    smi = ctx.which(ctx.npu_smi)
    if smi:
        signs.append(f"npu-smi at {smi}")
    if signs:
        return NpuPresence(True, "; ".join(signs))
    return NpuPresence(
        False,
        f"no Ascend NPU here (no {ctx.dev_dir / 'davinci_manager'}, no driver under {ctx.ascend_root}, "
        "no npu-smi on PATH)",
    )
