"""`ascend-workbench serve --recipe FILE`: start a vLLM server from a recipe and keep it up until Ctrl-C."""

from __future__ import annotations

import argparse
import time

from workbench.recipes import load_serving_recipe
from workbench.serving.api import ServerFailure, launch
from workbench.verbs._common import add_launch_options, launch_extras, terminate_as_interrupt

HELP = "start a vLLM server from a recipe and keep it up until Ctrl-C"
DESCRIPTION = (
    "Start `python -m vllm.entrypoints.openai.api_server` from a serving recipe on 127.0.0.1 "
    "and a free port; print its URL; stop the whole process group on Ctrl-C."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recipe", required=True, help="serving recipe file or shipped name (e.g. cpu-tiny)")
    add_launch_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    recipe = load_serving_recipe(args.recipe)
    with (
        terminate_as_interrupt(),
        launch(recipe, progress=not args.no_progress, **launch_extras(args)) as server,
    ):
        print(f"serving {server.model!r} at {server.url} (log: {server.log_path}); Ctrl-C stops it", flush=True)
        while True:
            report = server.diagnose()
            if report is not None:
                raise ServerFailure(report)
            time.sleep(1.0)
