"""`ascend-workbench serve --recipe FILE`: start a vLLM server from a recipe and keep it up until Ctrl-C.

While it serves, the hang watchdog reads its /metrics: requests running with no token for
`--hang-after` seconds are reported on stderr with the evidence (and again when tokens flow again);
the server is left up, for the user to inspect (py-spy, npu-smi) before stopping it.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time

from workbench.recipes import load_serving_recipe
from workbench.serving.api import CrashReport, HangWatchdog, Server, ServerFailure, launch
from workbench.verbs._common import (
    add_hang_after,
    add_launch_options,
    launch_extras,
    lint_recipes,
    terminate_as_interrupt,
)

HELP = "start a vLLM server from a recipe and keep it up until Ctrl-C"
DESCRIPTION = (
    "Start `python -m vllm.entrypoints.openai.api_server` from a serving recipe on 127.0.0.1 "
    "and a free port; print its URL; stop the whole process group on Ctrl-C."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recipe", required=True, help="serving recipe file or shipped name (e.g. cpu-tiny)")
    add_launch_options(parser)
    add_hang_after(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    recipe = load_serving_recipe(args.recipe)
    lint_recipes(args, [recipe])
    with (
        terminate_as_interrupt(),
        launch(recipe, progress=not args.no_progress, **launch_extras(args)) as server,
    ):
        print(f"serving {server.model!r} at {server.url} (log: {server.log_path}); Ctrl-C stops it", flush=True)
        with _watchdog(server, args.hang_after):
            while True:
                report = server.diagnose()
                if report is not None:
                    raise ServerFailure(report)
                time.sleep(1.0)


def _say_hung(report: CrashReport) -> None:
    lines = "\n  ".join(report.evidence[1:])
    print(f"ascend-workbench serve: {report.message()}\n  {lines}", file=sys.stderr, flush=True)


def _say_recovered(at_s: float) -> None:
    print(
        f"ascend-workbench serve: tokens are flowing again ({at_s:.0f} s after the start)", file=sys.stderr, flush=True
    )


def _watchdog(server: Server, hang_after_s: float) -> contextlib.AbstractContextManager:
    if hang_after_s <= 0:
        return contextlib.nullcontext()
    return HangWatchdog(
        server.url,
        hang_after_s=hang_after_s,
        pids=server.processes,
        log_path=server.log_path,
        on_hang=_say_hung,
        on_recover=_say_recovered,
    )
