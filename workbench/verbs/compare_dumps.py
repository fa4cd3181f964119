"""`ascend-workbench compare-dumps TEST REFERENCE`: module-by-module metrics, first divergence, NaN origin.

Either side may be a workbench dump or an msprobe dump directory. An engine dump (`dump --recipe`, vLLM's
names and forward steps) against a transformers/executor dump is lined up first: rows by token
position, fused qkv_proj/gate_up_proj split, decoder layers as hidden + residual, logits at the last
token; the `level` column and the "compared at" lines say where each row met the reference.

    ascend-workbench compare-dumps dumps/npu-bf16 dumps/cpu-fp32 --json report.json
    ascend-workbench compare-dumps dumps/engine dumps/golden       # engine vs transformers float32
"""

from __future__ import annotations

import argparse

import pandas as pd

from workbench.verbs._common import add_json_out

_SHOWN = ["key", "test_dtype", "shape", "cosine", "max_abs_err", "max_rel_err", "one_thousandth_ratio", "verdict"]
_SHOWN_STATS = ["key", "test_dtype", "shape", "test_norm", "reference_norm", "norm_rel_diff", "verdict"]


HELP = "compare two dumps (workbench, engine or msprobe) module by module"
DESCRIPTION = (
    "Compare TEST (e.g. the NPU run) with REFERENCE (e.g. CPU float32): msprobe metrics and "
    "verdicts per module output, the first diverging module and the NaN origin."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("test", help="dump directory under test (workbench or msprobe)")
    parser.add_argument("reference", help="reference dump directory (workbench or msprobe)")
    add_json_out(parser, "the full table and summary")
    parser.add_argument("--allow-missing", action="store_true", help="compare the common modules only")
    parser.add_argument("--all-rows", action="store_true", help="print every row (default: the first 60)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from workbench.accuracy.api import compare_dumps

    result = compare_dumps(args.test, args.reference, allow_missing=args.allow_missing, progress=True)
    s = result.summary
    columns = _SHOWN if s.mode.value == "tensors" else _SHOWN_STATS
    if "level" in result.table.columns:  # an engine dump lined up with a reference: show step and level
        columns = [columns[0], "step", "level", *columns[1:]]
    table = result.table[columns]
    with pd.option_context("display.width", 200, "display.max_colwidth", 60, "display.float_format", "{:.6g}".format):
        print(table.to_string(index=False, max_rows=None if args.all_rows else 60))
    print(f"\ncompared {s.compared} tensors ({s.mode.value}): {s.passed} pass, {s.warnings} warning, {s.errors} error")
    if s.only_in_test or s.only_in_reference:
        print(f"skipped: {len(s.only_in_test)} only in test, {len(s.only_in_reference)} only in reference")
    print(
        f"first divergence: {s.first_divergence or 'none'}"
        + (f" ({s.first_divergence_reason})" if s.first_divergence else "")
    )
    print(f"first warning:    {s.first_warning or 'none'}")
    print(
        f"NaN/Inf origin:   {s.nan_origin or 'none'}"
        + (
            f" (first non-finite output: {s.first_nonfinite})"
            if s.first_nonfinite and s.first_nonfinite != s.nan_origin
            else ""
        )
    )
    if s.engine_nan_origin:
        print(f"NaN/Inf origin in the engine's own names: {s.engine_nan_origin}")
    if s.reference_nan_origin:
        print(f"reference NaN/Inf origin: {s.reference_nan_origin}")
    for note in s.mapping:
        print(f"engine vs reference: {note}")
    if args.json:
        from workbench.stack.provenance import provenance

        print(f"wrote {result.write(args.json, provenance())}")
    return 0
