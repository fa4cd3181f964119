"""`ascend-workbench`: the workbench's runners without Jupyter.

Each verb lives in its own module under `workbench.verbs` and exposes `register(subparsers)`, which
adds its sub-parser and sets `handler(args) -> exit code`. Verbs are discovered, so adding one is
adding a file; this module only wires them together and turns user errors into one clear line.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import signal
import sys

from workbench import verbs
from workbench.errors import WorkbenchError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ascend-workbench",
        description="Ascend Porting Workbench: move a vLLM service from NVIDIA GPUs to Ascend NPUs.",
    )
    subparsers = parser.add_subparsers(dest="verb", metavar="VERB")
    subparsers.required = True
    for info in sorted(pkgutil.iter_modules(verbs.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"workbench.verbs.{info.name}")
        module.register(subparsers)
    return parser


def _interrupt_on_sigterm(_signum: int, _frame: object) -> None:
    # `kill PID` should clean up like Ctrl-C does: servers started by a verb are stopped by their
    # context managers, and results already written stay.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    try:
        return int(args.handler(args) or 0)
    except WorkbenchError as exc:
        print(f"ascend-workbench {args.verb}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ascend-workbench {args.verb}: interrupted; results written so far are kept", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
