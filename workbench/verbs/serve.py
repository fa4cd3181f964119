"""`ascend-workbench serve --recipe FILE`: start a vLLM server from a recipe and keep it up until Ctrl-C.

Also home of the server-selection flags that `smoke` and `bench` share (`--url` or `--recipe`, plus
`--env KEY=VALUE` and `--server-arg ARG` for a launched server), so the three verbs spell them alike.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import time
from collections.abc import Iterator

from workbench.errors import WorkbenchError
from workbench.recipes import load_serving_recipe
from workbench.serving.crash import ServerFailure
from workbench.serving.server import Server, connect, launch


def parse_env_pairs(pairs: list[str] | None) -> dict[str, str]:
    """['ASCEND_BACKEND_FAULT=rms_norm:nan'] -> {'ASCEND_BACKEND_FAULT': 'rms_norm:nan'}."""
    env = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise WorkbenchError(f"--env {pair!r}: write KEY=VALUE, e.g. --env ASCEND_BACKEND_FAULT=rms_norm:nan")
        env[key.strip()] = value
    return env


def add_launch_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env", action="append", metavar="KEY=VALUE", help="extra environment for a launched server (repeatable)"
    )
    parser.add_argument(
        "--server-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra api_server argument for a launched server (repeatable; use --server-arg=--seed --server-arg=0)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """--url URL | --recipe FILE (exactly one), plus the launch extras."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--url", help="attach to a running OpenAI-compatible server, e.g. http://127.0.0.1:8000")
    source.add_argument("--recipe", help="launch a server from a serving recipe (file or shipped name, e.g. cpu-tiny)")
    add_launch_arguments(parser)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM (and a SIGINT that a background shell set to ignored) into KeyboardInterrupt.

    Python's default SIGTERM ends the process without running `finally` blocks, which would orphan a
    launched server's process group; `kill PID` on the CLI must stop the server like Ctrl-C does.
    """

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def server_from_args(args: argparse.Namespace) -> Iterator[Server]:
    recipe = load_serving_recipe(args.recipe) if args.recipe else None
    kwargs = {}
    if recipe is not None:
        kwargs = {"extra_env": parse_env_pairs(args.env), "extra_args": tuple(args.server_arg)}
    with (
        terminate_as_interrupt(),
        connect(url=args.url, recipe=recipe, progress=not args.no_progress, **kwargs) as server,
    ):
        yield server


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="start a vLLM server from a recipe and keep it up until Ctrl-C",
        description="Start `python -m vllm.entrypoints.openai.api_server` from a serving recipe on 127.0.0.1 "
        "and a free port; print its URL; stop the whole process group on Ctrl-C.",
    )
    parser.add_argument("--recipe", required=True, help="serving recipe file or shipped name (e.g. cpu-tiny)")
    add_launch_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    recipe = load_serving_recipe(args.recipe)
    env, extra = parse_env_pairs(args.env), tuple(args.server_arg)
    with (
        terminate_as_interrupt(),
        launch(recipe, extra_env=env, extra_args=extra, progress=not args.no_progress) as server,
    ):
        print(f"serving {server.model!r} at {server.url} (log: {server.log_path}); Ctrl-C stops it", flush=True)
        while True:
            report = server.diagnose()
            if report is not None:
                raise ServerFailure(report)
            time.sleep(1.0)
