"""The options every verb spells the same way, declared once, and the server a verb launches or attaches to.

    add_json_out(parser, "the report")      --json OUT   write a result file (atomically, via write_json_out)
    add_json_print(parser, "each model")    --json       print JSON instead of text (listings)
    add_no_progress(parser)                 --no-progress
    add_launch_options(parser)              --env KEY=VALUE, --server-arg ARG (repeatable), --no-progress
    add_server_source(parser)               --url URL | --recipe R, plus the launch options
    add_hang_after(parser)                  --hang-after S   the hang watchdog's threshold (0 = off)
    add_no_lint(parser)                     --no-lint    start a recipe's server even when `lint` finds errors

`server_from_args(args)` is the one way a verb gets its server: a context manager that attaches to
`--url` or launches `--recipe` and stops what it launched on exit, Ctrl-C and `kill` included.
This module's name starts with `_`: the CLI's verb discovery skips it.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError


def add_json_out(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--json", type=Path, metavar="OUT", help=f"write {what} as JSON to OUT")


def add_json_print(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--json", action="store_true", help=f"print {what} as JSON")


def add_no_progress(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-progress", action="store_true", help="no progress bars (CI logs)")


def add_hang_after(parser: argparse.ArgumentParser) -> None:
    from workbench.serving.api import HANG_AFTER_S

    parser.add_argument(
        "--hang-after",
        type=float,
        default=HANG_AFTER_S,
        metavar="S",
        help=f"report the server as hung after S seconds with requests running and no token (default {HANG_AFTER_S:g}; 0 = off)",
    )


def add_no_lint(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument(
        "--no-lint",
        action="store_true",
        help="start the server even when `ascend-workbench lint` finds settings that fail or do nothing on the release",
    )


def lint_recipes(args: argparse.Namespace, recipes: list[Any]) -> None:
    """Lint each recipe before any server starts (docs/METHOD.md §2): warnings print, errors stop here."""
    if getattr(args, "no_lint", False):
        return
    from workbench.lint.api import check_recipe

    seen: list[Any] = []
    for recipe in recipes:
        if recipe not in seen:
            seen.append(recipe)
            check_recipe(recipe)


def add_launch_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
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
    add_no_lint(parser)
    add_no_progress(parser)  # type: ignore[arg-type]


def add_server_source(parser: argparse.ArgumentParser) -> None:
    """--url URL | --recipe FILE (exactly one), plus the launch options."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--url", help="attach to a running OpenAI-compatible server, e.g. http://127.0.0.1:8000")
    source.add_argument("--recipe", help="launch a server from a serving recipe (file or shipped name, e.g. cpu-tiny)")
    add_launch_options(parser)


def write_json_out(path: Path, data: Any) -> Path:
    """Write a verb's --json OUT atomically; returns the path (the verbs print it)."""
    from workbench.results.files import write_json

    return write_json(Path(path), data)


def parse_env_pairs(pairs: list[str] | None) -> dict[str, str]:
    """['ASCEND_BACKEND_FAULT=rms_norm:nan'] -> {'ASCEND_BACKEND_FAULT': 'rms_norm:nan'}."""
    env = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise WorkbenchError(f"--env {pair!r}: write KEY=VALUE, e.g. --env ASCEND_BACKEND_FAULT=rms_norm:nan")
        env[key.strip()] = value
    return env


def launch_extras(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments `connect` / `launch` take from the launch options."""
    return {"extra_env": parse_env_pairs(args.env), "extra_args": tuple(getattr(args, "server_arg", ()) or ())}


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
def server_from_args(args: argparse.Namespace) -> Iterator[Any]:
    """The server of `--url` or `--recipe` (see `add_server_source`), stopped on exit when launched here."""
    from workbench.recipes import load_serving_recipe
    from workbench.serving.api import connect

    recipe = load_serving_recipe(args.recipe) if args.recipe else None
    if recipe is not None:
        lint_recipes(args, [recipe])
    kwargs = launch_extras(args) if recipe is not None else {}
    with (
        terminate_as_interrupt(),
        connect(url=args.url, recipe=recipe, progress=not args.no_progress, **kwargs) as server,
    ):
        yield server
