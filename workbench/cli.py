"""`ascend-workbench`: the workbench's runners without Jupyter.

Each verb lives in its own module under `workbench.verbs` and declares `HELP` (one line for the verb
list), optionally `DESCRIPTION`, and `add_arguments(parser)`, which adds its flags (the shared ones come
from `workbench.verbs._common`) and sets `handler(args) -> exit code`. Verbs are discovered, so adding
one is adding a file; this module creates their parsers, wires them together and turns user errors into
one clear line.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import signal
import sys

from workbench import verbs
from workbench.errors import WorkbenchError


def _verb_modules() -> dict[str, str]:
    """CLI verb -> module name ('compare-ops' -> 'compare_ops'), from the files in workbench/verbs.

    A trailing underscore is Python's escape for a keyword and no part of the verb ('import_' -> 'import')."""
    return {
        info.name.rstrip("_").replace("_", "-"): info.name
        for info in pkgutil.iter_modules(verbs.__path__)
        if not info.name.startswith("_")  # shared option helpers, not verbs
    }


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every verb, or with just `only` (so `check` does not pay for torch and pandas)."""
    parser = argparse.ArgumentParser(
        prog="ascend-workbench",
        description="Ascend Porting Workbench: move a vLLM service from NVIDIA GPUs to Ascend NPUs.",
    )
    subparsers = parser.add_subparsers(dest="verb", metavar="VERB")
    subparsers.required = True
    modules = _verb_modules()
    for verb in sorted(modules):
        if only is None or verb == only:
            module = importlib.import_module(f"workbench.verbs.{modules[verb]}")
            description = getattr(module, "DESCRIPTION", None)
            module.add_arguments(subparsers.add_parser(verb, help=module.HELP, description=description))
    return parser


def _interrupt_on_sigterm(_signum: int, _frame: object) -> None:
    # `kill PID` should clean up like Ctrl-C does: servers started by a verb are stopped by their
    # context managers, and results already written stay.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    first = argv[0] if argv else None
    args = build_parser(first if first in _verb_modules() else None).parse_args(argv)
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
