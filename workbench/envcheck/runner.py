"""Run every pre-flight check once, in the order of docs/METHOD.md §6 and §14, and collect a `Report`.

Facts are gathered first (installed versions, the torch_npu import status, the CANN install, one
`npu-smi` run, /dev/shm), then each group of checks judges them; nothing is measured twice. A check
group that raises is a workbench bug: by default it becomes one failed result carrying the exception,
so a pre-flight in a notebook always finishes; `strict=True` (tests) lets it propagate.
"""

from __future__ import annotations

import platform
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from workbench.envcheck import buildtools, cann, compat, firmware, logging_env, npu_smi, probe, serving, shm, versions
from workbench.envcheck.context import CheckContext
from workbench.envcheck.matrix import load_matrices
from workbench.envcheck.result import CheckResult, Group, Status, failed
from workbench.stack import cann as stack_cann
from workbench.stack import firmware as stack_firmware
from workbench.stack import npu_smi as stack_npu_smi
from workbench.stack import shm as stack_shm
from workbench.stack.presence import detect_presence
from workbench.stack.versions import read_installed_stack


@dataclass(frozen=True)
class Report:
    """All results of one run plus when, where and how long."""

    results: tuple[CheckResult, ...]
    started_at: str  # ISO 8601, UTC
    seconds: float
    host: str
    ascend_root: str
    matrix_files: tuple[str, ...] = field(default=())

    def count(self, status: Status) -> int:
        return sum(r.status is status for r in self.results)

    @property
    def failed(self) -> bool:
        return any(r.status is Status.FAIL for r in self.results)

    def by_name(self, name: str) -> CheckResult:
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(f"no check named {name!r}; have: {', '.join(r.name for r in self.results)}")

    def summary(self) -> str:
        counts = ", ".join(f"{self.count(s)} {s.value}" for s in Status)
        return f"{len(self.results)} checks: {counts} ({self.seconds:.1f} s)"


def _guarded(group: Group, strict: bool, make: Callable[[], list[CheckResult]]) -> list[CheckResult]:
    try:
        return make()
    except Exception as exc:
        if strict:
            raise
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return [
            failed(
                f"{group.value}.internal_error",
                group,
                f"the {group.value} checks raised {type(exc).__name__}: {exc} ({where.filename}:{where.lineno})",
                "the checks finish",
                "this is a workbench bug: report it with this line",
            )
        ]


def _npu_status():
    """ascend_backend's verdict on `import torch_npu` (cached there; it imports torch, so only asked
    when torch_npu is installed: on a CPU machine the pre-flight never pays for importing torch)."""
    from ascend_backend.platform.device import npu_status

    return npu_status()


def _firmware_checks(
    ctx: CheckContext, reading: stack_npu_smi.NpuSmiReading, toolkit: stack_cann.CannInstall
) -> list[CheckResult]:
    """Driver/firmware loaded vs installed, the firmware range, and the driver against the CANN toolkit."""
    installed = stack_firmware.read_installed_firmware(ctx)
    checks = firmware.check_firmware(installed, reading, ctx)
    return [*checks, firmware.check_driver_cann(installed, stack_cann.driver_requirements(toolkit))]


def run_checks(ctx: CheckContext | None = None, *, strict: bool = False) -> Report:
    """Run the whole pre-flight against `ctx` (default: this process's environment)."""
    ctx = ctx or CheckContext.from_environment()
    started, t0 = datetime.now(timezone.utc).isoformat(timespec="seconds"), time.monotonic()
    matrices = load_matrices(ctx.matrix_files)  # a broken matrix file is a user error: raise it
    presence = detect_presence(ctx)
    stack = read_installed_stack()
    npu = _npu_status() if stack.torch_npu else None
    toolkit = stack_cann.find_cann(ctx)
    reading = stack_npu_smi.read_npu_smi(ctx)
    matched = compat.StackVersions.from_stack(stack, toolkit.version)

    groups: list[tuple[Group, Callable[[], list[CheckResult]]]] = [
        (Group.VERSIONS, lambda: versions.check_versions(stack, npu, presence)),
        (Group.MATRIX, lambda: [compat.check_matrix(matched, matrices, presence)]),
        (Group.CANN, lambda: cann.check_cann(toolkit, presence, ctx)),
        (Group.NPU_SMI, lambda: npu_smi.check_npu_smi(reading, presence, ctx)),
        (Group.FIRMWARE, lambda: _firmware_checks(ctx, reading, toolkit)),
        (
            Group.DEVICE,
            lambda: [
                probe.check_device_init(ctx, presence, stack.one("torch_npu") is not None),
                *_kernel_checks(stack.one("torch_npu") is not None),
            ],
        ),
        (Group.SHM, lambda: [shm.check_shm(stack_shm.read_shm(ctx.shm_path))]),
        (Group.BUILD, lambda: buildtools.check_build(ctx)),
        (Group.LOGGING, lambda: logging_env.check_logging(ctx)),
        (Group.SERVING, lambda: [serving.check_one_request(ctx.server_url)]),
    ]
    results: list[CheckResult] = []
    for group, make in groups:
        results += _guarded(group, strict, make)
    return Report(
        results=tuple(results),
        started_at=started,
        seconds=time.monotonic() - t0,
        host=platform.node(),
        ascend_root=str(ctx.ascend_root),
        matrix_files=tuple(str(p) for p in ctx.matrix_files),
    )


def _kernel_checks(has_torch_npu: bool) -> list[CheckResult]:
    """NNAL/ATB and the chosen NPU kernels, where torch_npu is installed (the checks import it)."""
    if not has_torch_npu:
        return []
    from workbench.envcheck.npu_kernels import device_checks

    return device_checks()
