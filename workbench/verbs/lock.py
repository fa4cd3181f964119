"""`ascend-workbench lock`: write the exact stack down, and check a machine against it (docs/METHOD.md §16).

    ascend-workbench lock write --out deploy/stack.lock.yaml    # + deploy/stack.constraints.txt
    ascend-workbench lock check deploy/stack.lock.yaml          # exit 1 on a difference that counts

`check` is meant for CI and for a container's start-up script: every difference is listed with what it
means ("CANN changed: ... re-run the benchmarks and the op suite"); notes (another hostname, another
container instance) do not fail it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.verbs._common import add_json_out

HELP = "write the stack fingerprint + pip constraints; check a machine against it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="lock_action", metavar="ACTION")
    actions.required = True

    write = actions.add_parser(
        "write",
        help="write the stack fingerprint and a pip constraints file",
        description="Write FILE (YAML: Python, packages, CANN toolkit/kernels/NNAL, driver, firmware, chip and "
        "cards, OS, kernel, container) and a pip constraints file beside it.",
    )
    write.add_argument(
        "--out", type=Path, required=True, metavar="FILE", help="lock file to write (e.g. stack.lock.yaml)"
    )
    write.add_argument(
        "--constraints",
        type=Path,
        metavar="FILE",
        help="pip constraints file (default: <stem>.constraints.txt beside --out)",
    )
    write.set_defaults(handler=run_write)

    check = actions.add_parser(
        "check",
        help="compare this machine with a lock file; exit 1 on a difference",
        description="List every difference between this machine and FILE with what it means. Exit 0 when "
        "nothing that can move a result differs, 1 otherwise, 2 when FILE is missing or malformed.",
    )
    check.add_argument("file", type=Path, metavar="FILE", help="a lock file written by `lock write`")
    add_json_out(check, "the differences")
    check.set_defaults(handler=run_check)


def run_write(args: argparse.Namespace) -> int:
    from workbench.regress.api import write_lock

    lock, constraints = write_lock(args.out, constraints=args.constraints)
    print(f"lock file:   {lock}")
    print(f"constraints: {constraints}")
    print(f"check with:  ascend-workbench lock check {lock}")
    return 0


def run_check(args: argparse.Namespace) -> int:
    from workbench.regress.api import check_lock, format_check, read_lock

    lock = read_lock(args.file)
    result = check_lock(lock)
    print(format_check(result, args.file))
    if args.json:
        print(f"json: {result.write(args.json, args.file)}")
    return 0 if result.ok else 1
