"""`ascend-workbench compare-ops`: the op suite on a device vs native float32 on CPU."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.verbs._common import add_json_out

HELP = "run every registry op on a device vs its float32 native reference (msprobe verdicts)"
DESCRIPTION = (
    "Run the op suite (recipes/ops/*.yaml) on DEVICE in each case's dtype and compare with the "
    "native implementation in float32 on CPU. Exit 1 when any case has verdict 'error'."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recipe", type=Path, action="append", default=[], help="op-suite YAML (repeatable)")
    parser.add_argument("--device", default="auto", help="auto (default), cpu, npu:0, cuda:0")
    parser.add_argument("--op", action="append", default=[], help="only this op (repeatable)")
    add_json_out(parser, "the result table")
    parser.add_argument(
        "--export-failures",
        type=Path,
        default=None,
        metavar="DIR",
        help="write a standalone reproduction script for each failing case",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import pandas as pd

    from workbench.accuracy.api import CompareOpsRequest, ReproExport, run_compare_ops

    request = CompareOpsRequest(
        device=args.device,
        ops=tuple(args.op),
        recipes=tuple(args.recipe),
        repros=ReproExport.FAILURES if args.export_failures else ReproExport.NONE,
        repro_dir=args.export_failures,
    )
    result = run_compare_ops(request)
    table = result.suite.table()
    columns = ["op", "case", "dtype", "implementation", "verdict", "cosine", "max_abs_err", "max_rel_err"]
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(table[columns].to_string(index=False))
    print("verdicts:", result.suite.counts())
    if args.json:
        print(f"table: {result.write(args.json)}")
    for script in result.repros:
        print(f"repro: {script}")
    return 1 if result.failures else 0
