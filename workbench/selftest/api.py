"""The self-test API: the first hardware run as one call (`ascend-workbench selftest --npu`; docs/npu.md).

    report = run_selftest(SelftestRequest(npu=True))        # every recipe the release and chip select, on the NPU
    report.write(path, provenance())                        # one JSON document to attach to a bug
    print(report.text())

On an Ascend machine it runs every kernel recipe the installed vllm-ascend release and the chip select,
and the other chips' recipes at that release through the override (whether this hardware executes them),
each against the native float32 reference on the CPU, per dtype, with the time and CANN's error code of a
kernel that raises; plus, with `serve`, one request through a vLLM server that loaded the plugin. On a
machine without an NPU it runs what it can (the probe, the selection, the limits table, every op's native
path against float32) and lists every kernel with the reason it needs hardware.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from packaging.version import InvalidVersion, Version

from ascend_backend.platform import autoload, device, kernels, limits
from ascend_backend.platform.kernels import SelectionContext
from ascend_backend.platform.kernels.context import apply_override
from ascend_backend.platform.kernels.recipes import RECIPES
from ascend_backend.platform.kernels.table import releases
from workbench.errors import WorkbenchError
from workbench.selftest.plan import KernelItem, plan_items
from workbench.selftest.report import SELFTEST_KIND, KernelRun, KernelStatus, SelftestReport, ServeRun, read_selftest
from workbench.selftest.run import run_item
from workbench.serving.server import Server
from workbench.stack.dtypes import parse_dtype

HALF = ("float16", "bfloat16")  # the dtypes the NPU kernels take (float32 runs native by design)


@dataclass(frozen=True)
class SelftestRequest:
    """What to test. `npu`: run the kernels on this machine's NPU; `serve`: one request through a vLLM server
    with the plugin (`recipe` to launch one, or `url` of a running one)."""

    npu: bool = False
    ops: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = HALF
    other_chips: bool = True
    release: str | None = None
    native: bool = True
    serve: bool = False
    recipe: str | None = None
    url: str | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.ops) - set(RECIPES))
        if unknown:
            raise WorkbenchError(
                f"--op {', '.join(unknown)}: not an op of the kernel table; ops: {', '.join(sorted(RECIPES))}"
            )
        bad = [d for d in self.dtypes if d not in HALF]
        if bad or not self.dtypes:
            raise WorkbenchError(f"--dtype {', '.join(bad) or '(none)'}: the NPU kernels take {' and '.join(HALF)}")
        if self.release is not None:
            try:
                Version(self.release.lstrip("vV"))
            except InvalidVersion:
                raise WorkbenchError(f"--release {self.release!r} is not a version (e.g. 0.13.0)") from None
        if self.serve and (self.recipe is None) == (self.url is None):
            raise WorkbenchError("--serve needs exactly one of --recipe (launch a server) or --url (a running one)")


def machine_facts() -> dict:
    """What the probe knows: torch_npu's status (with the fix), the autoload failure, NNAL/ATB, the device."""
    status = device.npu_status()
    info = device.detect()
    facts = {
        "npu_status": {"kind": status.kind.name, "detail": status.detail, "fix": status.fix},
        "autoload_failure": (autoload.failure() or "").strip().splitlines()[-1:] or None,
        "device": {"kind": info.kind.value, "name": info.name, "count": info.count},
        "cann": device.cann_version(),
    }
    if status.available:
        atb = device.atb_status()
        facts["atb"] = {"kind": atb.kind.name, "detail": atb.detail, "fix": atb.fix}
    return facts


def selection_context(release: str | None) -> tuple[SelectionContext, str]:
    """This process's context, `release` applied; with no release known, the newest the table read (said so)."""
    context = kernels.active_context()
    if release is not None:
        return apply_override(context, (("release", release.lstrip("vV")),)), ""
    if context.release is None:
        newest = releases()[-1].release
        note = (
            f"no vllm-ascend release here ({context.release_basis}): planned for v{newest}, the newest the table read"
        )
        return replace(context, release=newest, candidates=()), note
    return context, ""


def _skipped(items: tuple[KernelItem, ...], why: str) -> tuple[KernelRun, ...]:
    return tuple(KernelRun(item, KernelStatus.SKIPPED, why) for item in items)


def _run_kernels(
    items: tuple[KernelItem, ...], context: SelectionContext, dtypes, progress: Callable[[str], None]
) -> tuple[KernelRun, ...]:
    target = torch.device("npu", 0)
    out = []
    for n, item in enumerate(items, 1):
        progress(f"[{n}/{len(items)}] {item.key}")
        out.append(KernelRun.of(item, run_item(item, context, target, dtypes)))
    return tuple(out)


def _run_native(ops: tuple[str, ...], dtypes) -> tuple[KernelRun, ...]:
    from workbench.selftest.cases import item_inputs
    from workbench.selftest.run import run_dtype

    out = []
    cpu = torch.device("cpu")
    for op in ops:
        item = KernelItem(op, "native", "native", kernels.ChipFamily.A2, "-", "native reference", (), False)
        runs = tuple(run_dtype(op, item_inputs(item), cpu, dtype) for dtype in dtypes)
        out.append(KernelRun.of(item, runs, expected="native"))
    return tuple(out)


def _serve(request: SelftestRequest, server: Server | None) -> ServeRun:
    from workbench.selftest.serve import serve_check

    if server is not None:
        return serve_check(server)
    if not request.serve:
        why = "not asked: pass --serve with --recipe or --url to send one request through vLLM with the plugin"
        return ServeRun(KernelStatus.SKIPPED, why)
    from workbench.recipes.serving import load_serving_recipe
    from workbench.serving.server import connect

    recipe = load_serving_recipe(request.recipe) if request.recipe else None
    with connect(url=request.url, recipe=recipe, progress=False) as launched:
        return serve_check(launched)


def run_selftest(
    request: SelftestRequest, *, server: Server | None = None, progress: Callable[[str], None] | None = None
) -> SelftestReport:
    """Run the self-test (see the module docstring); `server`: serve through this one instead of `request`'s."""
    say = progress or (lambda _message: None)
    facts = machine_facts()
    context, note = selection_context(request.release)
    items = plan_items(context, request.ops, request.other_chips)
    status = device.npu_status()
    dtypes = tuple(parse_dtype(d) for d in request.dtypes)
    needs: list[str] = []
    if request.npu and status.available:
        runs = _run_kernels(items, context, dtypes, say)
    else:
        why = (
            f"needs an Ascend NPU: {status.kind.value} ({status.detail})"
            if not status.available
            else "pass --npu to run the kernels on this NPU"
        )
        runs = _skipped(items, why)
        needs.append(f"{len(items)} kernel recipes of vllm-ascend v{context.release} ({why})")
    if not status.available:
        needs.append("NNAL/ATB's load (the _npu_* kernels) and the served request on the NPU")
    say("native paths on the CPU")
    native = _run_native(request.ops or tuple(sorted(RECIPES)), dtypes) if request.native else ()
    table = limits.limits()
    counted = {"kernels": len(table), "limits": sum(len(v) for v in table.values())}
    described = context.describe() + (f"; {note}" if note else "")
    return SelftestReport(facts, described, counted, runs, native, _serve(request, server), tuple(needs))


__all__ = [
    "SELFTEST_KIND",
    "KernelRun",
    "KernelStatus",
    "SelftestReport",
    "SelftestRequest",
    "ServeRun",
    "read_selftest",
    "run_selftest",
]
