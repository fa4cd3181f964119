"""`ascend-workbench kernels`: which NPU kernel each op runs on this machine or a stored stack, and what changed.

    ascend-workbench kernels                                 # this machine (ASCEND_BACKEND_KERNELS applies)
    ascend-workbench kernels --stack deploy/stack.lock.yaml  # a lock file, result file or bare stack
    ascend-workbench kernels --diff old.lock.yaml new.lock.yaml --graph-mode FULL_DECODE_ONLY

Every answer names the kernel-selection table's row and where in vllm-ascend's source it was read.
`--diff` exits 1 when any op runs a different kernel on the two stacks (for CI next to `lock check`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from workbench.verbs._common import add_json_out

HELP = "the NPU kernel each op runs on this machine or a stored stack; --diff A B lists what changed"
DESCRIPTION = (
    "Show the kernel-selection table's choice per op and attention state (torch_npu kernel, argument "
    "recipe, the row and its vllm-ascend source) for this machine or a stored stack; with --diff, the ops whose "
    "kernel differs between two stacks (exit 1 when any does)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "--stack", type=Path, metavar="FILE", help="a lock file, a result file or a bare stack (JSON/YAML)"
    )
    target.add_argument("--diff", nargs=2, type=Path, metavar=("A", "B"), help="two stack files to compare")
    parser.add_argument(
        "--graph-mode",
        default="NONE",
        metavar="MODE",
        help="vLLM cudagraph_mode of the service: NONE (eager, default), PIECEWISE, FULL, FULL_DECODE_ONLY, "
        "FULL_AND_PIECEWISE (decode kernels depend on it from vllm-ascend v0.12)",
    )
    parser.add_argument(
        "--pa-shape",
        action="store_true",
        help="the decode batch size is in vllm-ascend's additional_config pa_shape_list (with FULL_DECODE_ONLY)",
    )
    add_json_out(parser, "the table (or the changes)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from workbench.backend.api import context_of, kernel_diff, read_stack, selection_table

    if args.diff:
        a, b = (read_stack(p) for p in args.diff)
        for label, stack in (("A", a), ("B", b)):
            print(f"{label}: {context_of(stack, graph_mode=args.graph_mode, pa_shape=args.pa_shape).describe()}")
        changes = kernel_diff(a, b, graph_mode=args.graph_mode, pa_shape=args.pa_shape)
        for change in changes:
            print(change.describe())
        print(f"{len(changes)} op(s) run a different kernel" if changes else "no op runs a different kernel")
        _write(args.json, [c.row() for c in changes])
        return 1 if changes else 0
    stack = read_stack(args.stack) if args.stack else None
    print(context_of(stack, graph_mode=args.graph_mode, pa_shape=args.pa_shape).describe())
    table = selection_table(stack, graph_mode=args.graph_mode, pa_shape=args.pa_shape)
    with pd.option_context("display.width", 220, "display.max_colwidth", 90):
        print(table[["op", "state", "kernel", "recipe", "row", "source"]].to_string(index=False))
    _write(args.json, table.to_dict(orient="records"))
    return 0


def _write(path: Path | None, records: list[dict]) -> None:
    if path is None:
        return
    from workbench.results.envelope import write_result
    from workbench.stack.provenance import provenance

    print(f"wrote {write_result(path, {'rows': records}, provenance())}")
