"""`ascend-workbench kernels`: which NPU kernel each op runs, and what changes between two stacks, releases,
chips or graph modes.

    ascend-workbench kernels                                 # this machine (engine config, ASCEND_BACKEND_KERNELS)
    ascend-workbench kernels --stack deploy/stack.lock.yaml  # a lock file, result file or bare stack
    ascend-workbench kernels --release 0.18.0 --chip A3 --graph-mode FULL_DECODE_ONLY --pa-shape
    ascend-workbench kernels --diff old.lock.yaml new.lock.yaml --graph-mode FULL_DECODE_ONLY
    ascend-workbench kernels --diff 0.11.0 0.18.0                  # two releases (chip, mode from the base)
    ascend-workbench kernels --diff A2 A5 --release 0.18.0         # two chips
    ascend-workbench kernels --diff NONE FULL_DECODE_ONLY --release 0.18.0 --pa-shape   # two graph modes
    ascend-workbench kernels --diff "release=0.13.0,chip=A2" "release=0.18.0,chip=A3"

Every answer names the kernel-selection table's row and where in vllm-ascend's source it was read, the
graph mode and where it was found, and, where vllm-ascend's default is its own compiled or Triton kernel,
that kernel. `--diff` exits 1 when any op's kernel, recipe (its arguments) or vllm-ascend's own default
kernel changes (for CI next to `lock check`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from workbench.verbs._common import add_json_out

HELP = "the NPU kernel each op runs on this machine or a stored stack; --diff A B lists what changes"
DESCRIPTION = (
    "Show the kernel-selection table's choice per op and attention state (torch_npu kernel, argument "
    "recipe, vllm-ascend's own default kernel where it has one, the row and its vllm-ascend source) for this "
    "machine, a stored stack or a release/chip/graph mode given on the command line, with the graph mode and "
    "where it was found; with --diff A B (each a stack file, a release, a chip, a graph mode or key=value,...), "
    "every op whose kernel, recipe or row changes (exit 1 when any does)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "--stack", type=Path, metavar="FILE", help="a lock file, a result file or a bare stack (JSON/YAML)"
    )
    target.add_argument(
        "--diff",
        nargs=2,
        metavar=("A", "B"),
        help="two sides to compare: stack files, releases (0.18.0), chips (A2, A5), graph modes (FULL_DECODE_ONLY) "
        "or key=value,... (release, chip, graph, pa_shape, cann, torch_npu, arch, checkpoint)",
    )
    parser.add_argument(
        "--graph-mode",
        default=None,
        metavar="MODE",
        help="vLLM cudagraph_mode of the service: NONE, PIECEWISE, FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE, or "
        "vllm-ascend's TORCHAIR / XLITE (default: the engine's, inside vLLM, else ASCEND_BACKEND_KERNELS, else NONE)",
    )
    parser.add_argument(
        "--pa-shape",
        action="store_true",
        help="the decode batch size is in vllm-ascend's additional_config pa_shape_list (with FULL_DECODE_ONLY)",
    )
    parser.add_argument("--release", metavar="X.Y.Z", help="the vllm-ascend release (instead of this machine's)")
    parser.add_argument("--chip", metavar="CHIP", help="the chip family: A2, A3, A5 or 310P (or a device name)")
    parser.add_argument("--arch", metavar="NAME", help="the model's architecture (vLLM's architectures[0])")
    parser.add_argument(
        "--checkpoint", metavar="FORMAT", help="the quantized checkpoint's format: msmodelslim or compressed-tensors"
    )
    add_json_out(parser, "the table (or the changes)")
    parser.set_defaults(handler=run)


def _base(args: argparse.Namespace):
    from workbench.backend.api import context_of, read_stack, side_context, with_serving

    stack = read_stack(args.stack) if args.stack else None
    context = context_of(stack, graph_mode=args.graph_mode, pa_shape=args.pa_shape)
    given = ",".join(f"{k}={v}" for k, v in (("release", args.release), ("chip", args.chip)) if v)
    if given:
        context = side_context(given, context)
    return with_serving(context, architecture=args.arch, checkpoint=args.checkpoint)


def run(args: argparse.Namespace) -> int:
    from workbench.backend.api import kernel_diff_contexts, selection_table, side_context

    base = _base(args)
    if args.diff:
        a, b = (side_context(side, base) for side in args.diff)
        for label, context in (("A", a), ("B", b)):
            print(f"{label}: {context.describe()}")
        changes = kernel_diff_contexts(a, b)
        for change in changes:
            print(change.describe())
        print(f"{len(changes)} op(s) change between A and B" if changes else "no op changes between A and B")
        _write(args.json, [c.row() for c in changes])
        return 1 if changes else 0
    print(base.describe())
    table = selection_table(base)
    with pd.option_context("display.width", 240):
        print(table[["op", "state", "kernel", "recipe", "row", "source"]].to_string(index=False, max_colwidth=80))
    own = table[table["vllm_default"] != ""]
    if not own.empty:
        print("\nwhere vllm-ascend's default is its own kernel (ascend_backend calls the torch_npu kernel above):")
        for _, row in own.iterrows():
            print(f"  {row['op']}: {row['vllm_default']}")
    differs = table[table["differs"] != ""]
    if not differs.empty:
        print("\nwhere ascend_backend deliberately differs from vllm-ascend:")
        for _, row in differs.iterrows():
            print(f"  {row['op']} ({row['row']}): {row['differs']}")
    if base.ambiguous:
        print(f"\nthe release is ambiguous: {base.release_basis}")
    _write(args.json, table.to_dict(orient="records"))
    return 0


def _write(path: Path | None, records: list[dict]) -> None:
    if path is None:
        return
    from workbench.backend.api import write_kernel_rows

    print(f"wrote {write_kernel_rows(path, records)}")
