"""`ascend-workbench sweep`: run a tuning sweep from a spec, resumably, and write an HTML report.

    ascend-workbench sweep --spec recipes/sweeps/cpu-tiny.yaml [--out DIR] [--adaptive]
        [--parallel auto|N] [--ray ADDRESS|local] [--devices 0-7] [--kv-budget 8GiB] [--confirm-best K]

Results go to DIR/results.jsonl (one line per point, appended as each finishes) and the report to
DIR/report.html. Rerunning the same command measures only the points that are missing, so an
interrupted sweep (Ctrl-C, SIGKILL, reboot) loses nothing already measured. `--parallel` runs server
configurations at once, one per device group of this machine; `--ray` spreads them over a Ray
cluster; either way this process alone writes the results. `--confirm-best K` then re-measures the K
best points that ran side by side alone (DIR/confirm.jsonl) and the report compares the two.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.settings import run_dir
from workbench.verbs._common import add_no_lint, add_no_progress, lint_recipes

HELP = "tuning sweep over engine arguments: Pareto fronts, best under SLO, diagnosis, HTML report"
DESCRIPTION = (
    "Start a vLLM server per configuration of a sweep spec (recipes/sweeps/*.yaml), run its "
    "workloads, scrape /metrics, and store each point as it finishes; rerun to resume."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spec", required=True, help="sweep spec: a path or a shipped name such as cpu-tiny")
    parser.add_argument("--out", type=Path, help="output directory (default: runs/sweeps/<spec name>)")
    parser.add_argument(
        "--adaptive",
        action="store_true",
        help="auto_tune-style search from the spec's 'adaptive:' section instead of the grid",
    )
    parser.add_argument(
        "--parallel",
        metavar="auto|N",
        help="run N server configurations at once, one per device group (NPU/GPU cards sized by "
        "tensor x pipeline parallel size; CPU cores split N ways with the KV budget); 'auto': "
        "as many as the cards allow, on CPU one per NUMA node",
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run each configuration as a Ray task on the cluster at ADDRESS (host:port), or "
        "'local' to start a Ray cluster on this machine (with --parallel N CPU groups)",
    )
    parser.add_argument(
        "--devices", metavar="IDS", help="NPU/GPU ids to split into groups, e.g. 0-3 (default: the visible devices)"
    )
    parser.add_argument(
        "--kv-budget",
        metavar="SIZE",
        help="CPU: KV-cache bytes split between concurrent servers, e.g. 8GiB (default: half of the available memory)",
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=1,
        help="Ray: resubmissions of a configuration whose worker or node died (default 1)",
    )
    parser.add_argument(
        "--confirm-best",
        type=int,
        default=0,
        metavar="K",
        help="after the sweep, re-measure alone the K best points that ran side by side",
    )
    parser.add_argument("--report-only", action="store_true", help="do not measure; rebuild report.html from DIR")
    add_no_lint(parser)
    add_no_progress(parser)
    parser.set_defaults(handler=run)


def execution_from(args: argparse.Namespace):
    """The flags as a runner `Execution` (one WorkbenchError per bad value, before anything starts)."""
    from workbench.errors import WorkbenchError
    from workbench.serving.api import kv_budget_flag, parse_devices, resolve_parallel
    from workbench.sweep.api import Execution

    if args.adaptive and (args.parallel or args.ray):
        raise WorkbenchError("--adaptive decides each step from the one before; run it without --parallel/--ray")
    if args.retries < 0:
        raise WorkbenchError(f"--retries {args.retries}: give 0 or more")
    budget = kv_budget_flag(args.kv_budget)
    return Execution(
        parallel=resolve_parallel(args.parallel),
        ray=args.ray,
        devices=parse_devices(args.devices) if args.devices else (),
        kv_budget_bytes=budget,
        retries=args.retries,
    )


def run(args: argparse.Namespace) -> int:
    from workbench.sweep.api import (
        ResultStore,
        build_report,
        confirm_best,
        confirm_path,
        load_sweep_spec,
        overhead_table,
        run_adaptive,
        run_sweep,
        write_html,
    )

    spec = load_sweep_spec(args.spec)
    out = args.out or run_dir("sweeps", spec.name)
    execution = execution_from(args)
    if not args.report_only:
        from workbench.sweep.api import expand, load_base_recipe

        lint_recipes(args, [point.recipe for point in expand(spec, load_base_recipe(spec))])
    missing = 0
    if args.adaptive:
        outcome = run_adaptive(spec, out, progress=not args.no_progress)
        print(outcome.summary())
    elif not args.report_only:
        result = run_sweep(spec, out, progress=not args.no_progress, execution=execution)
        missing = len(result.missing)
        print(
            f"sweep {spec.name}: {len(result.measured)} measured, {len(result.skipped)} already stored, "
            f"{missing} missing; {result.wall_s:.0f} s ({result.mode})"
        )
    if args.confirm_best and not args.report_only:
        print(confirm_best(spec, out, args.confirm_best, progress=not args.no_progress).summary())
    results = ResultStore(out / "results.jsonl").read()
    report = build_report(spec, results, ResultStore(confirm_path(out)).read())
    print(report.points_table().round(2).to_string(index=False))
    print(report.diagnosis_table().to_string(index=False, max_colwidth=70))
    print(overhead_table(report.points.assign(point_id=report.points["label"])).round(2).to_string(index=False))
    print(report.best_text())
    print(report.guard_text())
    print(report.interference_text())
    if not report.confirm.empty:
        print(report.confirm.round(2).to_string(index=False))
    path = write_html(report, out / "report.html")
    print(f"results: {out / 'results.jsonl'}\nreport:  {path}")
    return 1 if missing else 0
