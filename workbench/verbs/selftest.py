"""`ascend-workbench selftest`: the first hardware run as one command, one report to attach to a bug (docs/npu.md)."""

from __future__ import annotations

import argparse
import sys

from workbench.verbs._common import add_json_out

HELP = "run every NPU kernel recipe the release and chip select against float32, and one served request"
DESCRIPTION = (
    "With --npu on an Ascend machine: every kernel recipe the installed vllm-ascend release and the chip select "
    "(and the other chips' recipes at that release, through the override) runs against the native float32 "
    "reference on the CPU; each gets ran / native (with the guard's reason) / error (with CANN's code) and the "
    "msprobe numbers and time per dtype. Without an NPU it runs the probe, the selection, the limits table and every "
    "op's native path, and lists what needs hardware. Writes one JSON report (kind 'selftest'). Exit 1 when a "
    "kernel or the served request errs."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--npu", action="store_true", help="run the kernel recipes on this machine's NPU (npu:0)")
    parser.add_argument("--op", action="append", default=[], help="only this op (repeatable; default: every op)")
    parser.add_argument(
        "--dtype", action="append", default=[], help="float16 and/or bfloat16 (repeatable; default: both)"
    )
    parser.add_argument(
        "--no-other-chips", action="store_true", help="skip the other chips' recipes (run this chip's only)"
    )
    parser.add_argument("--release", help="the vllm-ascend release to test the recipes of (default: the installed one)")
    parser.add_argument("--no-native", action="store_true", help="skip the native paths' check on the CPU")
    parser.add_argument(
        "--serve", action="store_true", help="send one request through a vLLM server that loaded the plugin"
    )
    parser.add_argument("--recipe", help="serving recipe to launch for --serve (e.g. cpu-tiny)")
    parser.add_argument("--url", help="a running server for --serve, instead of launching one")
    add_json_out(parser, "the report (default: runs/selftest/<stamp>/selftest.json)")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from workbench import settings
    from workbench.selftest.api import HALF, SelftestRequest, run_selftest
    from workbench.stack.provenance import provenance

    request = SelftestRequest(
        npu=args.npu,
        ops=tuple(args.op),
        dtypes=tuple(args.dtype) or HALF,
        other_chips=not args.no_other_chips,
        release=args.release,
        native=not args.no_native,
        serve=args.serve,
        recipe=args.recipe,
        url=args.url,
    )
    report = run_selftest(request, progress=lambda message: print(message, file=sys.stderr, flush=True))
    print(report.text())
    path = args.json or settings.run_dir("selftest", fresh=True) / "selftest.json"
    device = report.machine["device"]["kind"]
    print(f"report: {report.write(path, provenance(device=device))}")
    return 1 if report.failed else 0
