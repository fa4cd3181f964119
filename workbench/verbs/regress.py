"""`ascend-workbench regress --baseline NAME RESULT...`: the regression gate (docs/METHOD.md §16).

    ascend-workbench regress --baseline tiny-good runs/now-1.json runs/now-2.json runs/now-3.json

Compares the results with the stored baseline metric by metric (output throughput, TTFT / TPOT / E2E
percentiles, accuracy verdicts), with the noise rule of `workbench.regress.compare`, and prints the stack
difference beside each regression. Exit 0: no regression; 1: a regression (or, with --fail-on-thin, a
worse metric on single runs); 2: a bad input (unknown baseline, unreadable file, different workloads).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.verbs._common import add_json_out

HELP = "compare results with a stored baseline; exit 1 on a regression"
DESCRIPTION = (
    "Compare RESULT files (bench --json, sweep results.jsonl, compare-ops/compare-dumps --json) "
    "with the baseline NAME metric by metric. A change counts when it is beyond its threshold "
    "(policy/regress/thresholds.yaml) and, with repeats on both sides, larger than the run-to-run spread of both."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", required=True, metavar="NAME", help="a baseline stored with `baseline save`")
    parser.add_argument("results", nargs="+", type=Path, metavar="RESULT", help="result files of the runs to judge")
    parser.add_argument(
        "--thresholds", metavar="FILE", help="thresholds file (default: policy/regress/thresholds.yaml)"
    )
    parser.add_argument(
        "--fail-on-thin",
        action="store_true",
        help="also exit 1 when a metric is worse beyond its threshold on single runs (thin evidence)",
    )
    add_json_out(parser, "the comparison (with provenance)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from workbench.regress.api import format_report, load_baseline, load_thresholds, read_all, regress

    thresholds = load_thresholds(args.thresholds)
    baseline = load_baseline(args.baseline)
    current = read_all(args.results)
    report = regress(baseline.name, baseline.runs, current, thresholds, fail_on_thin=args.fail_on_thin)
    print(format_report(report))
    if args.json:
        print(f"written: {report.write(args.json, args.results)}")
    return 1 if report.failed else 0
